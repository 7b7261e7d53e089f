"""EmberBackend: ExecuTorch's ahead-of-time half of the Ember delegate.

ExecuTorch finds a backend by the class's name, which is also the id the runtime library
registers (`register_backend`) and the id recorded in the .pte: "EmberBackend". The
processed bytes are one Ember plan (docs/plan-format.md), the only contract between this
package and the runtime.

Compile specs are recorded in the .pte by ExecuTorch and handed to the runtime's `init`
as they are; preprocess does not read them.
"""

from __future__ import annotations

from typing import List, final

from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from .lowering import SYMBOL_LOWER_BOUNDS_KEY, lower_to_plan, parse_symbol_lower_bounds

BACKEND_ID = "EmberBackend"


@final
class EmberBackend(BackendDetails):
    @staticmethod
    def preprocess(
        edge_program: ExportedProgram,
        compile_specs: List[CompileSpec],
    ) -> PreprocessResult:
        lower_bounds = {}
        for spec in compile_specs:
            if spec.key == SYMBOL_LOWER_BOUNDS_KEY:
                lower_bounds.update(parse_symbol_lower_bounds(spec.value))
        return PreprocessResult(processed_bytes=lower_to_plan(edge_program, lower_bounds))


assert EmberBackend.__name__ == BACKEND_ID  # ExecuTorch looks the backend up by class name

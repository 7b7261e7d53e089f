"""Ember ahead of time: partition a PyTorch program for the Ember GPU delegate and save it.

    import ember
    ember.save(model, "model.pte", example_inputs=(x,))

`ember.save` exports (for an nn.Module), lowers what Ember runs into EmberBackend
delegates (one plan per delegate, docs/plan-format.md), leaves the rest to ExecuTorch's
own kernels, and writes an ExecuTorch program (.pte).

There is no `ember.load`: loading and running a .pte is ExecuTorch's job. From Python,
`import ember_executorch_runtime` (which registers EmberBackend) and use
`executorch.runtime.Runtime`; from C++, ExecuTorch's Module or Method API with the
`ember::executorch_backend` CMake target linked.

Names:
    BACKEND_ID          "EmberBackend", the id in the .pte and in the runtime's registry
    save(...)           export, partition, lower, write a .pte; returns the path
    EmberPartitioner    the partitioner, for to_edge_transform_and_lower
    EmberBackend        the BackendDetails subclass (preprocess)
    delegation_report   per method: Ember partitions, operator nodes delegated and left
                        outside, for a program from to_edge_transform_and_lower
    pte_delegation_report  the same read from a .pte (partitions, plan ops, kernel calls
                        outside delegates); what `python -m ember.inspect` prints

`import ember` imports neither torch nor executorch; the names that need them load on
first use. `ember/plan_writer.py` is standard library only and can be loaded by file path.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable, List, Optional, Sequence

__version__ = "0.1.0"

BACKEND_ID = "EmberBackend"
OUTPUT_FORMATS = ("executorch",)

__all__ = ["BACKEND_ID", "OUTPUT_FORMATS", "EmberBackend", "EmberPartitioner", "save",
           "delegation_report", "pte_delegation_report", "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from .backend import EmberBackend
    from .partitioner import EmberPartitioner

_LAZY = {"EmberBackend": "backend", "EmberPartitioner": "partitioner",
         "delegation_report": "report", "pte_delegation_report": "report"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ember' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY))


def save(
    model_or_exported_program: Any,
    path: "str | os.PathLike[str]",
    example_inputs: Optional[Sequence[Any]] = None,
    output_format: str = "executorch",
    *,
    compile_specs: Optional[List[Any]] = None,
    skip_ops: Iterable[Any] = (),
    extra_partitioners: Sequence[Any] = (),
    executorch_backend_config: Any = None,
) -> str:
    """Lower a model to Ember and write an ExecuTorch program file.

    Args:
        model_or_exported_program: a torch.nn.Module, exported here with
            `torch.export.export(model.eval(), example_inputs)` under torch.no_grad(), or a
            torch.export.ExportedProgram (ATen dialect, as torch.export.export returns it).
        path: where to write the .pte.
        example_inputs: a tuple of example inputs (a single tensor is taken as a 1-tuple);
            required for an nn.Module, ignored for an ExportedProgram.
        output_format: "executorch", the only format Ember writes.
        compile_specs: ExecuTorch CompileSpecs recorded with every Ember delegate and
            handed to the runtime's init.
        skip_ops: operator names Ember must not take (see EmberPartitioner).
        extra_partitioners: partitioners run after Ember's, on what Ember left, e.g.
            [XnnpackPartitioner()] for a program whose remaining ops run on XNNPACK.
        executorch_backend_config: an executorch.exir.ExecutorchBackendConfig for
            to_executorch (memory planning, device placement of inputs and outputs, ...).

    Returns:
        The path written, as a str. (The ExecutorchProgramManager is not returned; build
        one with to_edge_transform_and_lower(..., partitioner=[EmberPartitioner()]) when
        it is needed.)

    Raises:
        ValueError: output_format is not "executorch", or an nn.Module came without
            example_inputs.
        TypeError: the model is neither an nn.Module nor an ExportedProgram.
    """
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(
            f"output_format={output_format!r} is not supported; valid values: "
            + ", ".join(repr(f) for f in OUTPUT_FORMATS)
        )

    import torch

    # Inference only: under autograd, ExecuTorch's passes refuse programs that mutate a
    # buffer ("a leaf Variable that requires grad is being used in an in-place operation").
    with torch.no_grad():
        program = _lower(model_or_exported_program, example_inputs, compile_specs, skip_ops,
                         extra_partitioners, executorch_backend_config)

    path = os.fspath(path)
    with open(path, "wb") as f:
        program.write_to_file(f)
    return path


def _lower(model, example_inputs, compile_specs, skip_ops, extra_partitioners,
           executorch_backend_config):
    import torch
    from executorch.exir import to_edge_transform_and_lower

    from .partitioner import EmberPartitioner

    if isinstance(model, torch.export.ExportedProgram):
        exported = model
    elif isinstance(model, torch.nn.Module):
        if example_inputs is None:
            raise ValueError(
                "ember.save needs example_inputs to export an nn.Module: pass "
                "example_inputs=(tensor, ...), or pass an ExportedProgram from "
                "torch.export.export instead of the module"
            )
        if isinstance(example_inputs, torch.Tensor):
            example_inputs = (example_inputs,)
        exported = torch.export.export(model.eval(), tuple(example_inputs))
    else:
        raise TypeError(
            "ember.save takes a torch.nn.Module or a torch.export.ExportedProgram, got "
            f"{type(model).__name__}"
        )

    # The exported program's lower bounds of its dynamic dims, which the edge program
    # raises from 1 to 2 (lowering.py _Lowerer._lower_bound).
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    from .lowering import SYMBOL_LOWER_BOUNDS_KEY, symbol_lower_bounds_value

    specs = list(compile_specs or [])
    bounds = symbol_lower_bounds_value(exported)
    if bounds is not None:
        specs.append(CompileSpec(SYMBOL_LOWER_BOUNDS_KEY, bounds))
    partitioners = [EmberPartitioner(compile_specs=specs, skip_ops=skip_ops)]
    partitioners += list(extra_partitioners)
    edge = to_edge_transform_and_lower(exported, partitioner=partitioners)
    return edge.to_executorch(executorch_backend_config)

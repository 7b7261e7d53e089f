"""Export a program whose method inputs and outputs stay on the GPU, and prove it from the file.

    python examples/export_device_resident.py [--out DIR] [--dtype float16]

Writes two programs of the same MLP, both with Ember's partitions placed on `cuda:0`
(compile spec `target_device`):

- `mlp_device_resident.pte`: ExecuTorch is told not to copy method inputs to the device
  or outputs back (`PropagateDeviceConfig(skip_h2d_for_method_inputs=True,
  skip_d2h_for_method_outputs=True)`), to plan non-CPU memory, and not to allocate graph
  inputs and outputs itself (`MemoryPlanningPass(alloc_graph_input=False,
  alloc_graph_output=False)`), so the caller's device memory is bound directly.
- `mlp_cpu_boundary.pte`: the control, with ExecuTorch's defaults, so the runtime copies
  at the boundary.

Then it reads both files back (`ember.inspect`) rather than trusting the flags: the
device-resident one must hold neither `et_copy::_h2d_copy` nor `et_copy::_d2h_copy` and
record every method input and output as a CUDA tensor; the control must hold both copy
operators, so the check is shown able to fail. Exits non-zero when either does not hold.
Exporting needs no GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def mlp(width: int = 1024, layers: int = 4) -> torch.nn.Module:
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.GELU(approximate="tanh")]
    return torch.nn.Sequential(*blocks[:-1]).eval()


def target_device_spec(device: str = "cuda:0"):
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from executorch.exir.passes.propagate_device_pass import TARGET_DEVICE_COMPILE_SPEC_KEY

    return CompileSpec(TARGET_DEVICE_COMPILE_SPEC_KEY, device.encode())


def device_resident_config():
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.propagate_device_config import PropagateDeviceConfig

    return ExecutorchBackendConfig(
        propagate_device_config=PropagateDeviceConfig(
            skip_h2d_for_method_inputs=True, skip_d2h_for_method_outputs=True
        ),
        enable_non_cpu_memory_planning=True,
        memory_planning_pass=MemoryPlanningPass(
            alloc_graph_input=False, alloc_graph_output=False
        ),
    )


def export_pair(model, example_inputs, out: Path) -> tuple[Path, Path]:
    import ember

    resident = out / "mlp_device_resident.pte"
    boundary = out / "mlp_cpu_boundary.pte"
    spec = [target_device_spec()]
    ember.save(model, resident, example_inputs, compile_specs=spec,
               executorch_backend_config=device_resident_config())
    ember.save(model, boundary, example_inputs, compile_specs=spec)
    return resident, boundary


def main(argv=None) -> int:
    from ember.inspect import BOUNDARY_COPY_OPERATORS, device_resident_problems, summarize

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "out" / "device_resident"))
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(0)
    dtype = DTYPES[args.dtype]
    model = mlp().to(dtype)
    x = torch.randn(args.batch, 1024, dtype=dtype)
    resident, boundary = export_pair(model, (x,), out)

    failures = []
    problems = device_resident_problems(summarize(str(resident)))
    print(f"{resident.name}: " + ("device-resident" if not problems else "; ".join(problems)))
    failures += problems

    # The control: the same check must find both copy operators in the default export.
    control_ops = {op.split(".")[0] for m in summarize(str(boundary)) for op in m.operators}
    missing = [op for op in BOUNDARY_COPY_OPERATORS if op not in control_ops]
    print(f"{boundary.name}: operators {sorted(control_ops)}")
    if missing:
        failures.append(f"control {boundary.name} lacks {missing}: the check could not fail")
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

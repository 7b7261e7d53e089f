"""Export the programs the GPU check runs, with their inputs, expected outputs and a manifest.

    python tools/make_gpu_programs.py [--out .device-programs]

Exporting needs no GPU; running them does (tools/gpu_check.sh, on the H200). Writes into
OUT (git-ignored; carried to the GPU machine):

- The four combinations of issue 3 part 4, in float32, float16 and bfloat16:
    model   ember_only  a small MLP, every op in one Ember partition
            coalesced   the same MLP with Ember told not to take ReLU, which XNNPACK takes
                        (ember.save(..., skip_ops=..., extra_partitioners=[XnnpackPartitioner()]));
                        XNNPACK takes no bfloat16 ReLU, so in bfloat16 it runs on ExecuTorch's
                        CPU kernels (the manifest records the delegates found in the file)
    inputs  host        inputs and outputs in host memory; Ember stages them itself
            boundary    Ember's partitions placed on cuda:0 (compile spec target_device) with
                        ExecuTorch's default boundary: its et_copy operators copy in and out
                        through the registered CUDA device allocator (Ember's)
            resident    method inputs and outputs stay on the GPU
                        (examples/export_device_resident.py's configuration); the caller
                        binds device memory
  Each with `<name>.in.bin` (the raw inputs) and `<name>.expected.bin` (float32, eager
  PyTorch in float32 on the same inputs and weights as the program holds: for float16 and
  bfloat16 the model's rounded weights and inputs, evaluated in float32).
(bench/run_bench.py exports its own programs on the GPU machine.)

manifest.json lists every program with what was read back from the file (ember.inspect:
delegates, operators, dtype/shape/device of inputs and outputs) and the host<->device
bytes per execute the program implies, computed from the file: what Ember's engine stages
(Ember delegate arguments in host memory) and what ExecuTorch's et_copy operators move
through the device allocator. tools/run_gpu_programs.py checks the runs against it.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "examples"))

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
ELEMENT_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "bool": 1}
# fp32 within 1e-5 relative (max abs error / max abs reference); fp16/bf16 within 1e-2.
TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}


class SmallMLP(torch.nn.Module):
    """Linear -> GELU -> Linear -> ReLU -> Linear: ReLU is what the coalesced export leaves
    to XNNPACK, with an Ember partition on each side of it."""

    def __init__(self, d_in: int = 64, hidden: int = 128, d_out: int = 32) -> None:
        super().__init__()
        self.a = torch.nn.Linear(d_in, hidden)
        self.b = torch.nn.Linear(hidden, hidden)
        self.c = torch.nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(torch.relu(self.b(torch.nn.functional.gelu(self.a(x)))))


def export(model, x, path: Path, model_kind: str, inputs: str) -> None:
    import ember
    from export_device_resident import device_resident_config, target_device_spec

    options = {}
    if model_kind == "coalesced":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        options = {"skip_ops": ["aten.relu.default"], "extra_partitioners": [XnnpackPartitioner()]}
    if inputs in ("boundary", "resident"):
        options["compile_specs"] = [target_device_spec()]
    if inputs == "resident":
        options["executorch_backend_config"] = device_resident_config()
    ember.save(model, path, example_inputs=(x,), **options)


# ---- what the file says --------------------------------------------------------------


def _tensor_value(plan, index):
    value = plan.values[index].val
    return value if hasattr(value, "sizes") else None


def _nbytes(value) -> int:
    from ember.inspect import SCALAR_TYPE_NAMES

    count = 1
    for size in value.sizes:
        count *= int(size)
    return count * ELEMENT_SIZE[SCALAR_TYPE_NAMES[int(value.scalar_type)]]


def _on_cuda(value) -> bool:
    info = getattr(value, "extra_tensor_info", None)
    return info is not None and int(info.device_type) == 1


def expected_copies(path: Path) -> dict[str, int]:
    """Host<->device bytes one execute of the program's first method implies, from its
    instructions: Ember delegate arguments in host memory (Ember stages them), and the
    sources of et_copy operators (ExecuTorch copies them through the device allocator)."""
    from ember.inspect import _delegate_blob
    from executorch.exir._serialize._program import deserialize_pte_binary

    pte = deserialize_pte_binary(path.read_bytes())
    program = getattr(pte, "program", pte)
    plan = program.execution_plan[0]
    copies = {"ember_h2d": 0, "ember_d2h": 0, "allocator_h2d": 0, "allocator_d2h": 0}
    for chain in plan.chains:
        for instruction in chain.instructions:
            args = instruction.instr_args
            kind = type(args).__name__
            if kind == "DelegateCall":
                delegate = plan.delegates[args.delegate_index]
                if delegate.id != "EmberBackend":
                    continue
                blob = _delegate_blob(program, pte, delegate.processed)
                num_inputs = struct.unpack_from("<I", blob, 44)[0]  # plan header num_inputs
                for position, index in enumerate(args.args):
                    value = _tensor_value(plan, index)
                    if value is None or _on_cuda(value):
                        continue
                    key = "ember_h2d" if position < num_inputs else "ember_d2h"
                    copies[key] += _nbytes(value)
            elif kind == "KernelCall":
                name = plan.operators[args.op_index].name
                source = _tensor_value(plan, args.args[0])
                if name == "et_copy::_h2d_copy":
                    copies["allocator_h2d"] += _nbytes(source)
                elif name == "et_copy::_d2h_copy":
                    copies["allocator_d2h"] += _nbytes(source)
    return copies


def describe(path: Path) -> dict:
    from ember.inspect import summarize

    (method,) = summarize(str(path))
    delegates: dict[str, int] = {}
    for delegate in method.delegates:
        delegates[delegate.backend_id] = delegates.get(delegate.backend_id, 0) + 1
    return {
        "delegates": delegates,
        "operators": method.operators,
        "inputs": [{"dtype": t.dtype, "shape": t.shape, "device": t.device} for t in method.inputs],
        "outputs": [{"dtype": t.dtype, "shape": t.shape, "device": t.device}
                    for t in method.outputs],
        "copies_per_execute": expected_copies(path),
    }


# ---- the sets ------------------------------------------------------------------------


def combinations(out: Path) -> list[dict]:
    entries = []
    for dtype_name, dtype in DTYPES.items():
        torch.manual_seed(0)
        model32 = SmallMLP().eval()
        x32 = torch.randn(8, 64)
        model = SmallMLP().eval()
        model.load_state_dict(model32.state_dict())
        model = model.to(dtype)
        x = x32.to(dtype)
        with torch.no_grad():
            # The fp32 reference of exactly what the program holds: rounded weights and
            # inputs, evaluated in float32.
            expected = model.float()(x.float())
        model = model.to(dtype)
        for model_kind in ("ember_only", "coalesced"):
            for inputs in ("host", "boundary", "resident"):  # the manifest's "io"
                name = f"{model_kind}_{inputs}_{SHORT[dtype_name]}"
                pte = out / f"{name}.pte"
                export(model, x, pte, model_kind, inputs)
                (out / f"{name}.in.bin").write_bytes(x.contiguous().view(torch.uint8).numpy().tobytes())
                (out / f"{name}.expected.bin").write_bytes(expected.numpy().tobytes())
                entry = {
                    "name": name, "set": "combinations", "model": model_kind, "io": inputs,
                    "dtype": dtype_name, "pte": pte.name, "input_file": f"{name}.in.bin",
                    "expected_file": f"{name}.expected.bin", "expected_dtype": "float32",
                    "tolerance": TOLERANCE[dtype_name],
                }
                entry.update(describe(pte))
                entries.append(entry)
                print(f"{name}: {entry['delegates']} copies/execute {entry['copies_per_execute']}")
    return entries


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / ".device-programs"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in list(out.glob("*.pte")) + list(out.glob("*.bin")):
        stale.unlink()
    entries = combinations(out)
    import executorch
    import ember

    manifest = {
        "torch": torch.__version__,
        "executorch": getattr(executorch, "__version__", "?"),
        "ember": ember.__version__,
        "programs": entries,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p.stat().st_size for p in out.iterdir())
    print(f"{len(entries)} programs, {total / 2**20:.1f} MiB in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Print what a saved .pte holds, from the file itself rather than from export flags.

    python -m ember.inspect MODEL.pte [--expect-device-resident] [--expect-delegate ID]

For each method: its delegates (backend id, size of the processed blob, and for Ember
the number of operations in the plan), a delegation line (Ember partitions, their plan
ops, and how many operator calls run outside any delegate), the operator table (what runs
outside delegates), and every method input and output with dtype, shape and device.

--expect-device-resident  exit 1 unless no operator is one of ExecuTorch's boundary copies
                          (et_copy::_h2d_copy, et_copy::_d2h_copy) and every method input
                          and output is recorded as a CUDA tensor.
--expect-delegate ID      exit 1 unless every method holds a delegate with that id.
"""

from __future__ import annotations

import argparse
import struct
import sys
from dataclasses import dataclass, field

BOUNDARY_COPY_OPERATORS = ("et_copy::_h2d_copy", "et_copy::_d2h_copy")

# exir.scalar_type.ScalarType codes to names; kept here so the tool reads any .pte without
# importing torch.
SCALAR_TYPE_NAMES = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
    7: "float64", 11: "bool", 15: "bfloat16",
}
DEVICE_NAMES = {0: "cpu", 1: "cuda"}


@dataclass
class TensorSummary:
    dtype: str
    shape: list[int]
    device: str


@dataclass
class DelegateSummary:
    backend_id: str
    size: int
    plan_ops: int | None = None


@dataclass
class MethodSummary:
    name: str
    operators: list[str] = field(default_factory=list)
    delegates: list[DelegateSummary] = field(default_factory=list)
    inputs: list[TensorSummary] = field(default_factory=list)
    outputs: list[TensorSummary] = field(default_factory=list)
    operator_calls: int = 0  # kernel calls outside delegates (ExecuTorch prim ops aside)


def _ember_plan_op_count(blob: bytes) -> int | None:
    # Header fields of docs/plan-format.md: magic at 0, num_ops (u32) at 40.
    if len(blob) < 44 or blob[:8] != b"EMBRPLAN":
        return None
    return struct.unpack_from("<I", blob, 40)[0]


def _delegate_blob(program, pte, reference) -> bytes | None:
    # DataLocation.INLINE = 0 (program.backend_delegate_data), SEGMENT = 1.
    if int(reference.location) == 0:
        return bytes(program.backend_delegate_data[reference.index].data)
    segments = getattr(pte, "segments", None) or getattr(program, "segments", None)
    if segments is not None and reference.index < len(segments):
        segment = segments[reference.index]
        data = getattr(segment, "data", None)
        return bytes(data) if data is not None else None
    return None


def _delegate_size(program, reference, blob) -> int:
    if blob is not None:
        return len(blob)
    return program.segments[reference.index].size


def _tensor_summary(value) -> TensorSummary:
    info = getattr(value, "extra_tensor_info", None)
    device = DEVICE_NAMES.get(int(info.device_type), str(info.device_type)) if info else "cpu"
    dtype = SCALAR_TYPE_NAMES.get(int(value.scalar_type), f"scalar_type {int(value.scalar_type)}")
    return TensorSummary(dtype=dtype, shape=list(value.sizes), device=device)


def summarize(path: str) -> list[MethodSummary]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    with open(path, "rb") as f:
        data = f.read()
    pte = deserialize_pte_binary(data)
    program = getattr(pte, "program", pte)
    methods = []
    for plan in program.execution_plan:
        summary = MethodSummary(name=plan.name)
        summary.operators = [
            f"{op.name}.{op.overload}" if op.overload else op.name for op in plan.operators
        ]
        for delegate in plan.delegates:
            blob = _delegate_blob(program, pte, delegate.processed)
            summary.delegates.append(
                DelegateSummary(
                    backend_id=delegate.id,
                    size=_delegate_size(program, delegate.processed, blob),
                    plan_ops=_ember_plan_op_count(blob) if blob is not None else None,
                )
            )
        summary.operator_calls = _operator_calls(plan)
        for index_list, target in ((plan.inputs, summary.inputs), (plan.outputs, summary.outputs)):
            for index in index_list:
                value = plan.values[index].val
                if hasattr(value, "sizes"):
                    target.append(_tensor_summary(value))
        methods.append(summary)
    return methods


def _operator_calls(plan) -> int:
    from executorch.exir.schema import KernelCall

    calls = 0
    for chain in plan.chains:
        for instruction in chain.instructions:
            args = instruction.instr_args
            if isinstance(args, KernelCall) and \
                    not plan.operators[args.op_index].name.startswith("executorch_prim::"):
                calls += 1
    return calls


def delegation_line(method: MethodSummary) -> str:
    """"delegated: 1 Ember partition (35 plan ops), 0 operator calls outside delegates"."""
    ember = [d for d in method.delegates if d.backend_id == "EmberBackend"]
    plan_ops = sum(d.plan_ops or 0 for d in ember)
    others = len(method.delegates) - len(ember)
    return (f"delegated: {len(ember)} Ember partition{'s' * (len(ember) != 1)} "
            f"({plan_ops} plan ops), {method.operator_calls} operator "
            f"call{'s' * (method.operator_calls != 1)} outside delegates"
            + (f", {others} other delegate{'s' * (others != 1)}" if others else ""))


def device_resident_problems(methods: list[MethodSummary]) -> list[str]:
    problems = []
    for method in methods:
        for op in method.operators:
            if op.split(".")[0] in BOUNDARY_COPY_OPERATORS:
                problems.append(f"{method.name}: operator table holds {op}")
        for kind, tensors in (("input", method.inputs), ("output", method.outputs)):
            for i, tensor in enumerate(tensors):
                if tensor.device != "cuda":
                    problems.append(f"{method.name}: {kind} {i} is recorded on {tensor.device}")
    return problems


def _format(methods: list[MethodSummary]) -> str:
    lines = []
    for method in methods:
        lines.append(f"method {method.name}")
        lines.append(f"  delegates: {len(method.delegates)}")
        for d in method.delegates:
            ops = f", {d.plan_ops} plan ops" if d.plan_ops is not None else ""
            lines.append(f"    {d.backend_id}: {d.size} bytes{ops}")
        lines.append(f"  {delegation_line(method)}")
        lines.append(f"  operators: {len(method.operators)}")
        for op in method.operators:
            lines.append(f"    {op}")
        for kind, tensors in (("input", method.inputs), ("output", method.outputs)):
            for i, t in enumerate(tensors):
                lines.append(f"  {kind} {i}: {t.dtype} {t.shape} on {t.device}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ember.inspect", description=__doc__)
    parser.add_argument("model")
    parser.add_argument("--expect-device-resident", action="store_true")
    parser.add_argument("--expect-delegate", metavar="ID")
    args = parser.parse_args(argv)

    methods = summarize(args.model)
    print(_format(methods))
    failures = []
    if args.expect_device_resident:
        failures += device_resident_problems(methods)
    if args.expect_delegate:
        for method in methods:
            if not any(d.backend_id == args.expect_delegate for d in method.delegates):
                failures.append(f"{method.name}: no delegate with id {args.expect_delegate}")
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""How much of a program Ember runs: per method, the Ember partitions (delegate calls) and
the operator nodes inside them against those left outside.

    from ember.report import delegation_report
    edge = to_edge_transform_and_lower(ep, partitioner=[EmberPartitioner()])
    for method, r in delegation_report(edge).items():
        print(method, r.partitions, r.delegated_nodes, r.outside)

Two sources, two levels of detail:

- A program still in memory (an EdgeProgramManager or ExecutorchProgramManager from
  to_edge_transform_and_lower, or an ExportedProgram of one method): the graph is there,
  so nodes are counted. `delegated_nodes` counts the operator nodes of the edge graph that
  each Ember delegate took (constant folds included: they are work the delegate absorbed),
  `outside` lists the operator nodes left to ExecuTorch's kernels or other backends.
  Tuple indexing (getitem) and SymInt arithmetic that computes shapes are bookkeeping and
  not counted; neither are ExecuTorch's own memory-planning nodes.
- A .pte file (`pte_delegation_report`): the graph is gone; what remains is each
  delegate's plan (whose op count is given as `plan_ops`) and the kernel calls of the
  instruction chains (`outside`, one entry per call).

`python -m ember.inspect MODEL.pte` prints the .pte form per method.
"""

from __future__ import annotations

import operator
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List

BACKEND_ID = "EmberBackend"

__all__ = ["MethodDelegation", "delegation_report", "pte_delegation_report"]


@dataclass
class MethodDelegation:
    method: str
    partitions: int = 0                 # Ember delegate calls in the method
    delegated_nodes: int = 0            # operator nodes inside Ember delegates (graph form)
    plan_ops: int = 0                   # ops in the Ember plans
    outside: List[str] = field(default_factory=list)  # operators not run by Ember
    other_delegates: int = 0            # delegate calls of other backends

    @property
    def total_nodes(self) -> int:
        return self.delegated_nodes + len(self.outside)

    @property
    def fully_delegated(self) -> bool:
        """Every operator of the method runs in Ember, in one partition."""
        return self.partitions == 1 and not self.outside and self.other_delegates == 0

    def summary(self) -> str:
        share = f"{self.delegated_nodes}/{self.total_nodes} operator nodes delegated, " \
            if self.total_nodes else ""
        return (f"{self.method}: {self.partitions} Ember partition(s), {share}"
                f"{self.plan_ops} plan ops, {len(self.outside)} operator call(s) outside"
                + (f", {self.other_delegates} other delegate(s)" if self.other_delegates
                   else ""))


def _counts_as_operator(node) -> bool:
    """Operator calls ExecuTorch would run (or a delegate took), not bookkeeping."""
    if node.op != "call_function":
        return False
    target = node.target
    if target is operator.getitem or getattr(target, "__module__", "") == "_operator":
        return False
    name = str(getattr(target, "_op", target))
    if name.startswith(("aten.sym_size", "aten.sym_numel", "aten.sym_stride",
                        "aten._assert", "executorch_prim::", "memory.", "executorch.exir")):
        return False
    return "higher_order.executorch_call_delegate" not in name


def _op_label(node) -> str:
    return str(getattr(node.target, "_op", node.target))


def _plan_op_count(blob: bytes) -> int:
    # docs/plan-format.md header: magic at 0, num_ops (u32) at 40.
    if len(blob) < 44 or blob[:8] != b"EMBRPLAN":
        return 0
    return struct.unpack_from("<I", blob, 40)[0]


def _method_from_graph(method: str, ep) -> MethodDelegation:
    import torch
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    report = MethodDelegation(method)
    gm = ep.graph_module
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is torch.ops.higher_order.executorch_call_delegate:
            module = getattr(gm, node.args[0].target)
            if not isinstance(module, LoweredBackendModule) or module.backend_id != BACKEND_ID:
                report.other_delegates += 1
                continue
            report.partitions += 1
            report.plan_ops += _plan_op_count(bytes(module.processed_bytes))
            inner = module.original_module.graph_module.graph
            report.delegated_nodes += sum(1 for n in inner.nodes if _counts_as_operator(n))
        elif _counts_as_operator(node):
            report.outside.append(_op_label(node))
    return report


def delegation_report(program: Any) -> Dict[str, MethodDelegation]:
    """Per method: Ember partitions and delegated against outside operator nodes, for an
    EdgeProgramManager, an ExecutorchProgramManager or one method's ExportedProgram."""
    from torch.export import ExportedProgram

    if isinstance(program, ExportedProgram):
        return {"forward": _method_from_graph("forward", program)}
    methods = getattr(program, "methods", None)
    if methods is None:
        raise TypeError("delegation_report takes an EdgeProgramManager, an "
                        "ExecutorchProgramManager or an ExportedProgram, got "
                        f"{type(program).__name__}")
    return {name: _method_from_graph(name, program.exported_program(name))
            for name in sorted(methods)}


def pte_delegation_report(pte: "str | bytes") -> Dict[str, MethodDelegation]:
    """Per method of a .pte (path or bytes): Ember delegates, their plan ops, and the
    operator kernel calls left outside delegates."""
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import KernelCall

    data = pte if isinstance(pte, (bytes, bytearray)) else open(pte, "rb").read()
    parsed = deserialize_pte_binary(bytes(data))
    program = getattr(parsed, "program", parsed)
    reports = {}
    for plan in program.execution_plan:
        report = MethodDelegation(plan.name)
        for delegate in plan.delegates:
            if delegate.id != BACKEND_ID:
                report.other_delegates += 1
                continue
            report.partitions += 1
            if int(delegate.processed.location) == 0:  # inline
                blob = bytes(program.backend_delegate_data[delegate.processed.index].data)
                report.plan_ops += _plan_op_count(blob)
        for chain in plan.chains:
            for instruction in chain.instructions:
                args = instruction.instr_args
                if isinstance(args, KernelCall):
                    op = plan.operators[args.op_index]
                    name = f"{op.name}.{op.overload}" if op.overload else op.name
                    if not name.startswith("executorch_prim::"):
                        report.outside.append(name)
        reports[plan.name] = report
    return reports

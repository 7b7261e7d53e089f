"""EmberPartitioner: which parts of an edge program Ember runs.

Ember claims a node exactly when `ember.lowering` can lower it (`unsupported_reason` is
None): the check and the lowering are written side by side, so what is claimed is what
lowers. Claimed nodes are grouped by torch.fx's CapabilityBasedPartitioner into connected
partitions; each becomes one delegate call running one plan. Anything unclaimed stays
outside and runs on ExecuTorch's own kernels (or on a later partitioner's backend, such as
XNNPACK, when several are passed to to_edge_transform_and_lower).

A partition is also refused as a whole when a value crossing its boundary is not a
tensor (a SymInt that computes a view's size belongs inside, with the view), has a dtype
a plan cannot hold, a dynamic shape a plan cannot record (docs/plan-format.md "Dynamic
dims"), or is not contiguous; and when it only folds constants or computes shapes, which
is no work for a delegate. The node checks already make most of that impossible; the
partition check states the delegate's calling contract in one place and keeps it true if
a node check is ever loosened.

ops_to_not_decompose keeps aten.linear, aten.matmul, aten.silu and
aten.scaled_dot_product_attention whole, but only for an op every one of whose calls in
the program Ember will claim: ExecuTorch refuses a program in which a kept-whole op is
left undelegated, and an op that is not kept whole decomposes into core ops that Ember
may still claim (linear into permute_copy + addmm, for one).
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import torch
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from torch.export import ExportedProgram
from torch.fx import Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupportBase

from .backend import BACKEND_ID, EmberBackend  # noqa: F401  (registers the backend class)
from .lowering import (
    KEEP_WHOLE_OPS,
    PLAN_DTYPES,
    GraphContext,
    _is_symint_node,
    op_name,
    plan_shape,
    unsupported_reason,
)

__all__ = ["EmberPartitioner", "EmberOperatorSupport"]

logger = logging.getLogger(__name__)


def _normalize_op_name(op: Union[str, torch._ops.OpOverload]) -> str:
    name = str(op._op if hasattr(op, "_op") else op).strip()
    for prefix in ("torch.ops.", "edge."):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name.replace("::", ".")


def _skipped(name: Optional[str], skip_ops: frozenset) -> bool:
    """skip_ops entries name an overload ("aten.gelu.default") or every overload of an
    op ("aten.gelu")."""
    if name is None or not skip_ops:
        return False
    return name in skip_ops or name.rsplit(".", 1)[0] in skip_ops


class EmberOperatorSupport(OperatorSupportBase):
    """Says yes to a node exactly when Ember lowers it and skip_ops does not name it.
    Reasons for each refusal are kept in `rejected` (node name -> reason) for debugging."""

    def __init__(self, ep: ExportedProgram, skip_ops: Iterable[str] = ()) -> None:
        super().__init__()
        self.ctx = GraphContext(ep)
        self.skip_ops = frozenset(skip_ops)
        self.rejected: Dict[str, str] = {}

    def reason(self, node: Node) -> Optional[str]:
        if node.op != "call_function":
            return "not an operator call"
        name = op_name(node)
        if _skipped(name, self.skip_ops):
            return f"{name} is in skip_ops"
        return unsupported_reason(node, self.ctx)

    def is_node_supported(self, submodules: Mapping[str, torch.nn.Module], node: Node) -> bool:
        reason = self.reason(node)
        if reason is not None:
            if node.op == "call_function":
                self.rejected[node.name] = reason
                logger.debug("Ember does not claim %s: %s", node.name, reason)
            return False
        return True


def _boundary_problem(partition: Partition, ctx: GraphContext) -> Optional[str]:
    nodes = set(partition.nodes)
    if all(ctx.is_constant_valued(n) or _is_symint_node(n) for n in nodes):
        return "it only folds constants or computes shapes"
    crossing = []
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg not in nodes and not ctx.is_constant_placeholder(arg):
                crossing.append(("input", arg))
        if any(user not in nodes for user in node.users):
            crossing.append(("output", node))
    for kind, node in crossing:
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            return f"{kind} {node.name} is not a tensor"
        if val.dtype not in PLAN_DTYPES:
            return f"{kind} {node.name} has dtype {val.dtype}"
        if plan_shape(val, ctx.ep) is None:
            return f"{kind} {node.name} has a dynamic shape a plan cannot record"
        try:
            contiguous = bool(val.is_contiguous())
        except Exception:  # a symbolic stride the fake tensor cannot decide
            contiguous = False
        if not contiguous:
            return f"{kind} {node.name} is not contiguous"
    return None


def _untag_returned_constants(ep: ExportedProgram) -> None:
    """A parameter or buffer that the program also returns stays out of Ember's partitions:
    tag_constant_data gives a constant the tag of the delegate that reads it, and
    ExecuTorch then refused a tagged constant with an untagged user, the graph's output
    (`return x + self.pe, self.pe`). Untagged, the delegate takes it as an input."""
    for node in ep.graph.nodes:
        if node.op == "placeholder" and "delegation_tag" in node.meta and any(
                user.op == "output" for user in node.users):
            del node.meta["delegation_tag"]


class EmberPartitioner(Partitioner):
    """Partitions an edge program for EmberBackend.

    Args:
        compile_specs: recorded with each Ember delegate in the .pte and handed to the
            runtime's init unchanged.
        skip_ops: operator names Ember must not take, as edge graphs spell them without
            the "edge." prefix, e.g. {"aten.gelu.default"} or {"aten.gelu"} (all
            overloads). Used to leave ops to another backend (XNNPACK) in a coalesced
            program. Skipping one of the ops Ember keeps whole (aten.linear.default,
            aten.matmul.default, aten.silu.default) lets it decompose as usual; skip its
            pieces too (aten.addmm, aten.mm, aten.permute_copy, ...) to keep them away
            from Ember.
    """

    def __init__(
        self,
        compile_specs: Optional[List[CompileSpec]] = None,
        skip_ops: Iterable[Union[str, torch._ops.OpOverload]] = (),
    ) -> None:
        super().__init__()
        if isinstance(skip_ops, (str, torch._ops.OpOverload)):
            skip_ops = [skip_ops]
        self.compile_specs: List[CompileSpec] = list(compile_specs or [])
        self.skip_ops = frozenset(_normalize_op_name(op) for op in skip_ops)
        self.delegation_spec = DelegationSpec(BACKEND_ID, self.compile_specs)

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> Tuple[List[torch._ops.OpOverload], Optional[Callable[[Node], bool]]]:
        support = EmberOperatorSupport(ep, self.skip_ops)
        claimable: Dict[torch._ops.OpOverload, bool] = {}
        for node in ep.graph.nodes:
            # Only plain ATen calls: after lowering the graph holds edge ops, and this
            # answers nothing, which is what ExecuTorch's final check then needs.
            target = node.target
            if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
                continue
            if str(target) not in KEEP_WHOLE_OPS:
                continue
            ok = support.reason(node) is None
            claimable[target] = claimable.get(target, True) and ok
        return [op for op, ok in claimable.items() if ok], None

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        support = EmberOperatorSupport(exported_program, self.skip_ops)
        proposed = CapabilityBasedPartitioner(
            exported_program.graph_module,
            support,
            allows_single_node_partition=True,
        ).propose_partitions()

        partition_tags: Dict[str, DelegationSpec] = {}
        for partition in proposed:
            problem = _boundary_problem(partition, support.ctx)
            if problem is not None:
                logger.info("Ember leaves partition %s undelegated: %s", partition.id, problem)
                continue
            tag = f"ember_{partition.id}"
            for node in partition.nodes:
                node.meta["delegation_tag"] = tag
            partition_tags[tag] = self.delegation_spec

        tag_constant_data(exported_program)
        _untag_returned_constants(exported_program)
        return PartitionResult(
            tagged_exported_program=exported_program, partition_tags=partition_tags
        )

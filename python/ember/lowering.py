"""Lowering: an edge-dialect subgraph to an Ember plan (docs/plan-format.md).

This module is the one table of what Ember runs. Each supported operator has two
functions side by side: a *check* that says why a node cannot be lowered (or None when it
can) and a *lower* that writes its plan ops. The partitioner claims a node exactly when
its check passes (`unsupported_reason`), so what is claimed is what lowers.

What the table holds (edge op -> plan op):

    aten.linear                               LINEAR, weight_layout 0 (w is [N, K])
    aten.addmm(b, x, w), aten.mm(x, w)        LINEAR, weight_layout 1 (w is [K, N]); when w is
                                              permute_copy(W, [1, 0]) the permute is folded and
                                              the op is LINEAR weight_layout 0 on W itself
    aten.bmm, aten.matmul (both rank >= 2)    MATMUL
    aten.relu / sigmoid / tanh / silu         RELU / SIGMOID / TANH / SILU
    aten.gelu (approximate none or tanh)      GELU [0 or 1]
    aten.add / sub (alpha 1), mul,            ADD / SUB / MUL / DIV; a Python scalar operand
    div (rounding_mode None), Tensor and      becomes a 0-d plan constant of the op's dtype
    Scalar variants
    view_copy, _unsafe_view, squeeze_copy,    RESHAPE (bytes copied in order)
    unsqueeze_copy, clone-likes
    permute_copy, transpose_copy, t_copy      PERMUTE [perm]
    aten._softmax (half_to_float False),      SOFTMAX [dim]
    aten.softmax.int (dtype None)
    aten.native_layer_norm (mean and rstd     LAYER_NORM [normalized_ndim, eps, has_w, has_b]
    unused), aten.layer_norm
    a graph output that is an input, a        COPY
    constant or a repeated output

Constants. Placeholders that are parameters, buffers (not mutated) or lifted tensor
constants become plan constants. A chain of casts, clones, views and permutes applied to
a constant is folded here, at lowering, into one constant (ExecuTorch writes scalars as
0-d constants followed by a `_to_dim_order_copy`); such a cast is claimed only when its
input is constant. A constant operand whose dtype differs from the op's is cast to the
op's dtype, which is what PyTorch's type promotion computes for 0-d tensors.

Every tensor Ember computes on is float32, float16 or bfloat16, has a static shape of
rank <= 8, and all non-constant operands of one op share the output's dtype.
"""

from __future__ import annotations

import operator
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch._export.utils import (
    get_buffer,
    get_lifted_tensor_constant,
    get_param,
    is_buffer,
    is_lifted_tensor_constant,
    is_param,
)
from torch.export import ExportedProgram
from torch.fx import Node
from torch.fx.node import map_arg

from .plan_writer import MAX_RANK, Dtype, Op, PlanWriter, f64_bits

__all__ = [
    "EmberLoweringError",
    "GraphContext",
    "FLOAT_DTYPES",
    "KEEP_WHOLE_OPS",
    "lower_to_plan",
    "op_name",
    "supported_op_names",
    "unsupported_reason",
]

FLOAT_DTYPES: Dict[torch.dtype, Dtype] = {
    torch.float32: Dtype.FLOAT32,
    torch.float16: Dtype.FLOAT16,
    torch.bfloat16: Dtype.BFLOAT16,
}

# Constants may have any of these dtypes; they are cast to the op's dtype when lowered.
_CASTABLE_DTYPES = frozenset(
    [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
     torch.int16, torch.int8, torch.uint8, torch.bool]
)

# Composite ATen ops that Ember runs whole; the partitioner asks ExecuTorch not to
# decompose them (ops_to_not_decompose). Everything else Ember takes is core ATen.
KEEP_WHOLE_OPS: Tuple[str, ...] = (
    "aten.linear.default",
    "aten.matmul.default",
    "aten.silu.default",
)


class EmberLoweringError(RuntimeError):
    """A subgraph handed to EmberBackend holds something Ember cannot lower."""


def op_name(node: Node) -> Optional[str]:
    """The operator's name as "namespace.op.overload" ("aten.linear.default") for ATen and
    edge nodes alike, "getitem" for tuple indexing, None for anything else."""
    if node.op != "call_function":
        return None
    target = node.target
    if target is operator.getitem:
        return "getitem"
    inner = getattr(target, "_op", None)  # edge dialect: EdgeOpOverload wraps the ATen op
    if isinstance(inner, torch._ops.OpOverload):
        target = inner
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return None


def _val(node) -> Optional[torch.Tensor]:
    if not isinstance(node, Node):
        return None
    val = node.meta.get("val")
    return val if isinstance(val, torch.Tensor) else None


def _static_shape(val: torch.Tensor) -> Optional[List[int]]:
    dims = []
    for d in val.shape:
        if type(d) is not int:  # a SymInt: the shape is dynamic
            return None
        dims.append(d)
    return dims


def _is_number(x) -> bool:
    return isinstance(x, (int, float, bool)) and not isinstance(x, torch.SymInt)


class GraphContext:
    """What a check needs to know about the program around a node: which placeholders
    hold constant data, and which nodes compute a value from constants alone."""

    def __init__(self, ep: ExportedProgram) -> None:
        self.ep = ep
        sig = ep.graph_signature
        self._mutated_buffers = set(sig.buffers_to_mutate.values())
        self._constant_valued: Dict[Node, bool] = {}

    def is_constant_placeholder(self, node: Node) -> bool:
        if not isinstance(node, Node) or node.op != "placeholder":
            return False
        if is_param(self.ep, node) or is_lifted_tensor_constant(self.ep, node):
            return True
        if is_buffer(self.ep, node):
            target = self.ep.graph_signature.inputs_to_buffers[node.name]
            return target not in self._mutated_buffers
        return False

    def placeholder_tensor(self, node: Node) -> torch.Tensor:
        for is_kind, get in ((is_param, get_param), (is_buffer, get_buffer),
                             (is_lifted_tensor_constant, get_lifted_tensor_constant)):
            if is_kind(self.ep, node):
                return get(self.ep, node)
        raise EmberLoweringError(f"placeholder {node.name} holds no constant data")

    def is_constant_valued(self, node) -> bool:
        """True if the node is a constant placeholder or a fold op (cast, clone, view,
        permute) whose tensor input is constant-valued."""
        if not isinstance(node, Node):
            return False
        known = self._constant_valued.get(node)
        if known is not None:
            return known
        if node.op == "placeholder":
            result = self.is_constant_placeholder(node)
        elif op_name(node) in _FOLDABLE_OPS and node.args:
            data = node.args[0]
            others = list(node.args[1:]) + list(node.kwargs.values())
            result = (
                isinstance(data, Node)
                and not any(isinstance(a, Node) for a in others)
                and self.is_constant_valued(data)
                and _FOLDABLE_OPS[op_name(node)](node) is None
            )
        else:
            result = False
        self._constant_valued[node] = result
        return result


# --------------------------------------------------------------------------------------
# Checks. Each returns None when the node lowers, else a short reason.


def _check_tensor(val, what: str, *, float_only: bool = True) -> Optional[str]:
    if val is None:
        return f"{what} has no tensor metadata"
    dims = _static_shape(val)
    if dims is None:
        return f"{what} has a dynamic shape {tuple(val.shape)}"
    if len(dims) > MAX_RANK:
        return f"{what} has rank {len(dims)} > {MAX_RANK}"
    if float_only and val.dtype not in FLOAT_DTYPES:
        return f"{what} has dtype {val.dtype}; Ember computes on float32, float16, bfloat16"
    return None


def _check_output(node: Node) -> Optional[str]:
    return _check_tensor(_val(node), "output")


def _check_operands(node: Node, ctx: GraphContext, operands: Sequence) -> Optional[str]:
    """Every tensor operand: static shape; a non-constant one has the output's dtype (and,
    if it is a method input, is contiguous); a constant one is castable."""
    out = _val(node)
    problem = _check_output(node)
    if problem:
        return problem
    for i, arg in enumerate(operands):
        what = f"operand {i}"
        if not isinstance(arg, Node):
            return f"{what} is not a tensor"
        val = _val(arg)
        if ctx.is_constant_valued(arg):
            problem = _check_tensor(val, what, float_only=False)
            if problem:
                return problem
            if val.dtype not in _CASTABLE_DTYPES:
                return f"{what} is a constant of dtype {val.dtype}"
            continue
        problem = _check_tensor(val, what)
        if problem:
            return problem
        if val.dtype != out.dtype:
            return f"{what} has dtype {val.dtype}, the output {out.dtype}"
        if arg.op == "placeholder" and not val.is_contiguous():
            return f"{what} is a non-contiguous method input"
    return None


def _check_no_extra_kwargs(node: Node, allowed: Dict[str, Callable]) -> Optional[str]:
    for key, value in node.kwargs.items():
        ok = allowed.get(key)
        if ok is None or not ok(value):
            return f"unsupported argument {key}={value!r}"
    return None


def _arg(node: Node, index: int, name: str, default=None):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _check_unary(node, ctx):
    return _check_operands(node, ctx, node.args[:1])


def _check_gelu(node, ctx):
    if _arg(node, 1, "approximate", "none") not in ("none", "tanh"):
        return f"gelu approximate={_arg(node, 1, 'approximate')!r}"
    return _check_operands(node, ctx, node.args[:1])


def _check_binary(node, ctx):
    name = op_name(node)
    a, b = node.args[0], node.args[1]
    if name.startswith(("aten.add.", "aten.sub.")):
        alpha = _arg(node, 2, "alpha", 1)
        if isinstance(alpha, Node) or alpha != 1:
            return f"alpha={alpha!r}; Ember supports alpha 1 only"
        extra = {k: v for k, v in node.kwargs.items() if k != "alpha"}
    elif name.startswith("aten.div."):
        mode = _arg(node, 2, "rounding_mode", None)
        if mode is not None:
            return f"rounding_mode={mode!r}; Ember supports None only"
        extra = {k: v for k, v in node.kwargs.items() if k != "rounding_mode"}
    else:
        extra = dict(node.kwargs)
    if extra:
        return f"unsupported arguments {sorted(extra)}"
    if not isinstance(a, Node):
        return "first operand is not a tensor"
    operands = [a] if _is_number(b) else [a, b]
    if not isinstance(b, Node) and not _is_number(b):
        return f"second operand {b!r} is neither a tensor nor a number"
    return _check_operands(node, ctx, operands)


def _check_linear(node, ctx):
    x, w = node.args[0], node.args[1]
    b = _arg(node, 2, "bias", None)
    operands = [x, w] + ([b] if b is not None else [])
    problem = _check_operands(node, ctx, operands)
    if problem:
        return problem
    xs, ws = _val(x).shape, _val(w).shape
    if len(xs) < 1 or len(ws) != 2 or ws[1] != xs[-1]:
        return f"linear shapes x {tuple(xs)}, w {tuple(ws)}"
    if b is not None and tuple(_val(b).shape) != (ws[0],):
        return f"linear bias shape {tuple(_val(b).shape)}"
    return None


def _check_addmm(node, ctx):
    bias, x, w = node.args[0], node.args[1], node.args[2]
    for key in ("beta", "alpha"):
        value = node.kwargs.get(key, 1)
        if isinstance(value, Node) or value != 1:
            return f"addmm {key}={value!r}; Ember supports 1 only"
    problem = _check_operands(node, ctx, [bias, x, w])
    if problem:
        return problem
    n = _val(w).shape[1]
    if tuple(_val(bias).shape) not in ((n,), (1, n)):
        return f"addmm bias shape {tuple(_val(bias).shape)}; Ember takes [N] or [1, N]"
    return None


def _check_mm(node, ctx):
    if node.kwargs:
        return f"unsupported arguments {sorted(node.kwargs)}"
    return _check_operands(node, ctx, node.args[:2])


def _check_matmul(node, ctx):
    problem = _check_operands(node, ctx, node.args[:2])
    if problem:
        return problem
    if _val(node.args[0]).dim() < 2 or _val(node.args[1]).dim() < 2:
        return "matmul with a rank-1 operand"
    return None


def _check_reshape(node, ctx):
    return _check_operands(node, ctx, node.args[:1])


def _dim_order_ok(value, node) -> bool:
    val = _val(node)
    return value is None or list(value) in ([], list(range(val.dim() if val is not None else 0)))


def _check_clone(node, ctx):
    name = op_name(node)
    if name == "dim_order_ops._clone_dim_order.default":
        allowed = {"non_blocking": lambda v: True,
                   "dim_order": lambda v: _dim_order_ok(v, node)}
    elif name == "aten.clone.default":
        allowed = {"memory_format": lambda v: v in (None, torch.preserve_format,
                                                    torch.contiguous_format)}
    else:
        allowed = {}
    return _check_no_extra_kwargs(node, allowed) or _check_operands(node, ctx, node.args[:1])


def _check_permute(node, ctx):
    return _check_operands(node, ctx, node.args[:1])


def _check_softmax(node, ctx):
    name = op_name(node)
    if name == "aten._softmax.default":
        if _arg(node, 2, "half_to_float", False):
            return "_softmax with half_to_float=True"
    elif _arg(node, 2, "dtype", None) is not None:
        return "softmax with a dtype argument"
    problem = _check_operands(node, ctx, node.args[:1])
    if problem:
        return problem
    if _val(node.args[0]).dim() < 1:
        return "softmax of a 0-d tensor"
    return None


def _layer_norm_parts(node):
    x, shape = node.args[0], list(node.args[1])
    w = _arg(node, 2, "weight", None)
    b = _arg(node, 3, "bias", None)
    eps = _arg(node, 4, "eps", 1e-5)
    return x, shape, w, b, eps


def _check_layer_norm(node, ctx):
    x, shape, w, b, eps = _layer_norm_parts(node)
    if op_name(node) == "aten.native_layer_norm.default":
        users = list(node.users)
        if len(users) != 1 or op_name(users[0]) != "getitem" or users[0].args[1] != 0:
            return "native_layer_norm whose mean or rstd output is used"
        result = users[0]  # the normalized tensor
    else:
        result = node
    operands = [x] + [t for t in (w, b) if t is not None]
    problem = _check_operands(result, ctx, operands)
    if problem:
        return problem
    xs = list(_val(x).shape)
    if not shape or len(shape) > len(xs) or xs[len(xs) - len(shape):] != shape:
        return f"normalized_shape {shape} does not match input {xs}"
    for t in (w, b):
        if t is not None and list(_val(t).shape) != shape:
            return f"weight/bias shape {list(_val(t).shape)} != normalized_shape {shape}"
    if isinstance(eps, Node) or not _is_number(eps):
        return "eps is not a number"
    return None


def _check_getitem(node, ctx):
    source = node.args[0]
    if (isinstance(source, Node) and op_name(source) == "aten.native_layer_norm.default"
            and node.args[1] == 0 and _check_layer_norm(source, ctx) is None):
        return None
    return "getitem of an op Ember does not run"


def _check_fold_only(node, ctx):
    if not ctx.is_constant_valued(node):
        return "a cast Ember folds only when its input is a constant"
    return _check_output(node)


# Fold checks: may this op be folded at lowering when its input is constant? (The value is
# computed by calling the op on the constant, so the only question is whether the result
# is an ordinary dense tensor.)
def _fold_cast(node) -> Optional[str]:
    dim_order = node.kwargs.get("dim_order")
    if not _dim_order_ok(dim_order, node):
        return "non-contiguous dim_order"
    if node.kwargs.get("memory_format") not in (None, torch.preserve_format,
                                                torch.contiguous_format):
        return "memory_format"
    device = node.kwargs.get("device")
    if device is not None and torch.device(device).type != "cpu":
        return "device"
    return None


def _fold_always(node) -> Optional[str]:
    return None


def _fold_clone(node) -> Optional[str]:
    return _check_no_extra_kwargs(node, {
        "non_blocking": lambda v: True,
        "dim_order": lambda v: _dim_order_ok(v, node),
        "memory_format": lambda v: v in (None, torch.preserve_format, torch.contiguous_format),
    })


_CAST_OPS = (
    "dim_order_ops._to_dim_order_copy.default",
    "aten._to_copy.default",
)
_RESHAPE_OPS = (
    "aten.view_copy.default",
    "aten.view.default",
    "aten._unsafe_view.default",
    "aten.reshape.default",
    "aten.squeeze_copy.default",
    "aten.squeeze_copy.dim",
    "aten.squeeze_copy.dims",
    "aten.squeeze.default",
    "aten.squeeze.dim",
    "aten.squeeze.dims",
    "aten.unsqueeze_copy.default",
    "aten.unsqueeze.default",
    "aten.flatten.using_ints",
)
_CLONE_OPS = (
    "aten.clone.default",
    "dim_order_ops._clone_dim_order.default",
    "aten.alias_copy.default",
    "aten.detach_copy.default",
    "aten.lift_fresh_copy.default",
)
_PERMUTE_OPS = (
    "aten.permute_copy.default",
    "aten.permute.default",
    "aten.transpose_copy.int",
    "aten.transpose.int",
    "aten.t_copy.default",
    "aten.t.default",
)

_FOLDABLE_OPS: Dict[str, Callable[[Node], Optional[str]]] = {}
_FOLDABLE_OPS.update({name: _fold_cast for name in _CAST_OPS})
_FOLDABLE_OPS.update({name: _fold_always for name in _RESHAPE_OPS + _PERMUTE_OPS})
_FOLDABLE_OPS.update({name: _fold_clone for name in _CLONE_OPS})


# --------------------------------------------------------------------------------------
# Lowering.


class _Lowerer:
    def __init__(self, ep: ExportedProgram) -> None:
        self.ep = ep
        self.ctx = GraphContext(ep)
        self.w = PlanWriter()
        self.tensors: Dict[Node, int] = {}        # node -> plan tensor holding its value
        self.out_tensors: Dict[Node, int] = {}    # node -> the plan output it writes
        self.constants: Dict[Tuple[Node, Optional[torch.dtype]], int] = {}
        self.values: Dict[Node, torch.Tensor] = {}
        self.names: set = set()

    # -- names and tensors --

    def name(self, base: str) -> str:
        base = base[:200] or "t"
        name, i = base, 1
        while name in self.names:
            name, i = f"{base}_{i}", i + 1
        self.names.add(name)
        return name

    def constant_value(self, node: Node) -> torch.Tensor:
        value = self.values.get(node)
        if value is None:
            if node.op == "placeholder":
                value = self.ctx.placeholder_tensor(node)
            else:
                args = map_arg(node.args, self.constant_value)
                kwargs = map_arg(node.kwargs, self.constant_value)
                with torch.no_grad():
                    value = node.target(*args, **kwargs)
            value = value.detach()
            self.values[node] = value
        return value

    def add_constant(self, tensor: torch.Tensor, dtype: torch.dtype, base: str) -> int:
        tensor = tensor.detach().to("cpu", dtype).contiguous()
        data = tensor.reshape(-1).view(torch.uint8).numpy().tobytes()
        return self.w.add_constant(self.name(base), FLOAT_DTYPES[dtype], list(tensor.shape),
                                   data)

    def operand(self, node: Node, dtype: torch.dtype) -> int:
        """The plan tensor for `node`'s value as an operand of an op computing in `dtype`."""
        if self.ctx.is_constant_valued(node):
            key = (node, dtype)
            if key not in self.constants:
                self.constants[key] = self.add_constant(self.constant_value(node), dtype,
                                                        node.name)
            return self.constants[key]
        index = self.tensors.get(node)
        if index is None:
            if node.op == "call_function" and op_name(node) in _PERMUTE_OPS:
                self.lower_node(node)  # a permute deferred in case it folded into a LINEAR
                return self.tensors[node]
            raise EmberLoweringError(
                f"node {node.name} ({node.op} {node.target}) is read before Ember computed it")
        return index

    def result(self, node: Node) -> int:
        """The plan tensor an op writes for `node`: its method output, or an intermediate."""
        if node in self.tensors:
            raise EmberLoweringError(f"node {node.name} is computed twice")
        index = self.out_tensors.get(node)
        if index is None:
            val = _val(node)
            index = self.w.add_intermediate(self.name(node.name), FLOAT_DTYPES[val.dtype],
                                            list(val.shape))
        self.tensors[node] = index
        return index

    # -- the walk --

    def run(self) -> bytes:
        graph = self.ep.graph
        sig = self.ep.graph_signature
        user_inputs = list(sig.user_inputs)
        placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
        for name in user_inputs:
            node = placeholders[name]
            val = _val(node)
            problem = _check_tensor(val, f"method input {name}")
            if problem:
                raise EmberLoweringError(problem)
            self.tensors[node] = self.w.add_input(self.name(name), FLOAT_DTYPES[val.dtype],
                                                  list(val.shape))

        output_node = next(n for n in graph.nodes if n.op == "output")
        outputs = list(output_node.args[0]) if isinstance(output_node.args[0], (list, tuple)) \
            else [output_node.args[0]]
        copies: List[Tuple[int, Node]] = []
        for i, node in enumerate(outputs):
            val = _val(node)
            problem = _check_tensor(val, f"method output {i}")
            if problem:
                raise EmberLoweringError(problem)
            index = self.w.add_output(self.name(f"output_{i}"), FLOAT_DTYPES[val.dtype],
                                      list(val.shape))
            computed_here = (node.op == "call_function"
                             and not self.ctx.is_constant_valued(node)
                             and node not in self.out_tensors)
            if computed_here:
                self.out_tensors[node] = index
            else:
                copies.append((index, node))

        for node in graph.nodes:
            if node.op != "call_function" or node in self.tensors:
                continue
            if self.ctx.is_constant_valued(node):
                continue  # folded; becomes a constant where an op reads it
            if op_name(node) in _PERMUTE_OPS and node not in self.out_tensors:
                continue  # lowered when first read, unless a LINEAR folded it away
            self.lower_node(node)

        for node, index in self.out_tensors.items():
            if node not in self.tensors:
                self.lower_node(node)
        for index, node in copies:
            val = _val(node)
            source = self.operand(node, val.dtype)
            self.w.add_op(Op.COPY, [source], [index])
        return self.w.to_bytes()

    def lower_node(self, node: Node) -> None:
        name = op_name(node)
        entry = _TABLE.get(name)
        if entry is None:
            raise EmberLoweringError(f"Ember has no lowering for {node.name} ({node.target})")
        problem = entry[0](node, self.ctx)
        if problem:
            raise EmberLoweringError(f"cannot lower {node.name} ({name}): {problem}")
        entry[1](self, node)


def _out_dtype(node: Node) -> torch.dtype:
    return _val(node).dtype


def _lower_unary(opcode: Op, attrs_fn=None):
    def lower(lw: _Lowerer, node: Node) -> None:
        dtype = _out_dtype(node)
        x = lw.operand(node.args[0], dtype)
        attrs = attrs_fn(node) if attrs_fn else ()
        lw.w.add_op(opcode, [x], [lw.result(node)], attrs)
    return lower


def _gelu_attrs(node):
    return [1 if _arg(node, 1, "approximate", "none") == "tanh" else 0]


def _lower_binary(opcode: Op):
    def lower(lw: _Lowerer, node: Node) -> None:
        dtype = _out_dtype(node)
        a = lw.operand(node.args[0], dtype)
        other = node.args[1]
        if isinstance(other, Node):
            b = lw.operand(other, dtype)
        else:
            b = lw.add_constant(torch.tensor(other), dtype, f"{node.name}_scalar")
        lw.w.add_op(opcode, [a, b], [lw.result(node)])
    return lower


def _lower_linear(lw: _Lowerer, node: Node) -> None:
    dtype = _out_dtype(node)
    x, w = node.args[0], node.args[1]
    b = _arg(node, 2, "bias", None)
    inputs = [lw.operand(x, dtype), lw.operand(w, dtype)]
    if b is not None:
        inputs.append(lw.operand(b, dtype))
    lw.w.add_op(Op.LINEAR, inputs, [lw.result(node)], [0])


def _transposed_source(node) -> Optional[Node]:
    """If `node` is a 2-D transpose of another node, that node."""
    if not isinstance(node, Node) or op_name(node) not in _PERMUTE_OPS:
        return None
    src = node.args[0]
    val = _val(src)
    if not isinstance(src, Node) or val is None or val.dim() != 2:
        return None
    name = op_name(node)
    if name.startswith(("aten.permute_copy.", "aten.permute.")):
        perm = [d % 2 for d in node.args[1]]
        return src if perm == [1, 0] else None
    if name.startswith(("aten.transpose",)):
        return src if {node.args[1] % 2, node.args[2] % 2} == {0, 1} else None
    return src  # t / t_copy of a 2-D tensor


def _lower_matmul_as_linear(lw: _Lowerer, node: Node, bias, x, w) -> None:
    dtype = _out_dtype(node)
    source = _transposed_source(w)
    if source is not None:
        layout, weight = 0, lw.operand(source, dtype)  # y = x · sourceᵀ
    else:
        layout, weight = 1, lw.operand(w, dtype)
    inputs = [lw.operand(x, dtype), weight]
    if bias is not None:
        b = lw.operand(bias, dtype)
        if list(_val(bias).shape) != [_val(node).shape[-1]]:
            if lw.ctx.is_constant_valued(bias):
                b = lw.add_constant(lw.constant_value(bias).reshape(-1), dtype,
                                    f"{bias.name}_flat")
            else:
                flat = lw.w.add_intermediate(lw.name(f"{bias.name}_flat"), FLOAT_DTYPES[dtype],
                                             [_val(node).shape[-1]])
                lw.w.add_op(Op.RESHAPE, [b], [flat])
                b = flat
        inputs.append(b)
    lw.w.add_op(Op.LINEAR, inputs, [lw.result(node)], [layout])


def _lower_addmm(lw: _Lowerer, node: Node) -> None:
    _lower_matmul_as_linear(lw, node, node.args[0], node.args[1], node.args[2])


def _lower_mm(lw: _Lowerer, node: Node) -> None:
    _lower_matmul_as_linear(lw, node, None, node.args[0], node.args[1])


def _lower_matmul(lw: _Lowerer, node: Node) -> None:
    dtype = _out_dtype(node)
    a = lw.operand(node.args[0], dtype)
    b = lw.operand(node.args[1], dtype)
    lw.w.add_op(Op.MATMUL, [a, b], [lw.result(node)])


def _lower_reshape(lw: _Lowerer, node: Node) -> None:
    x = lw.operand(node.args[0], _out_dtype(node))
    lw.w.add_op(Op.RESHAPE, [x], [lw.result(node)])


def _permutation(node: Node) -> List[int]:
    rank = _val(node.args[0]).dim()
    name = op_name(node)
    if name.startswith(("aten.permute_copy.", "aten.permute.")):
        return [d % rank for d in node.args[1]] if rank else []
    perm = list(range(rank))
    if name.startswith("aten.transpose"):
        d0, d1 = node.args[1] % max(rank, 1), node.args[2] % max(rank, 1)
    else:  # t: transposes a 2-D tensor, leaves 0-d and 1-d alone
        d0, d1 = (0, 1) if rank == 2 else (0, 0)
    if rank:
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return perm


def _lower_permute(lw: _Lowerer, node: Node) -> None:
    x = lw.operand(node.args[0], _out_dtype(node))
    perm = _permutation(node)
    if perm == list(range(len(perm))):
        lw.w.add_op(Op.RESHAPE, [x], [lw.result(node)])
    else:
        lw.w.add_op(Op.PERMUTE, [x], [lw.result(node)], perm)


def _lower_softmax(lw: _Lowerer, node: Node) -> None:
    x = lw.operand(node.args[0], _out_dtype(node))
    dim = node.args[1] % _val(node.args[0]).dim()
    lw.w.add_op(Op.SOFTMAX, [x], [lw.result(node)], [dim])


def _lower_layer_norm(lw: _Lowerer, node: Node) -> None:
    x, shape, w, b, eps = _layer_norm_parts(node)
    result_node = node
    if op_name(node) == "aten.native_layer_norm.default":
        result_node = next(iter(node.users))
    dtype = _out_dtype(result_node)
    inputs = [lw.operand(x, dtype)]
    inputs += [lw.operand(t, dtype) for t in (w, b) if t is not None]
    attrs = [len(shape), f64_bits(float(eps)), int(w is not None), int(b is not None)]
    lw.w.add_op(Op.LAYER_NORM, inputs, [lw.result(result_node)], attrs)


def _lower_getitem(lw: _Lowerer, node: Node) -> None:
    source = node.args[0]
    if source not in lw.tensors and node not in lw.tensors:
        _lower_layer_norm(lw, source)
        lw.tensors[source] = lw.tensors[node]


def _lower_source_via_getitem(lw: _Lowerer, node: Node) -> None:
    # native_layer_norm writes its result through its getitem user.
    if node not in lw.tensors:
        getitem = next(iter(node.users))
        _lower_layer_norm(lw, node)
        lw.tensors[node] = lw.tensors[getitem]


def _lower_not_folded(lw: _Lowerer, node: Node) -> None:
    raise EmberLoweringError(
        f"{node.name} ({op_name(node)}) was claimed as a constant fold, but its input is "
        f"not a constant in the subgraph handed to EmberBackend")


_Entry = Tuple[Callable[[Node, GraphContext], Optional[str]], Callable[[_Lowerer, Node], None]]
_TABLE: Dict[str, _Entry] = {
    "aten.linear.default": (_check_linear, _lower_linear),
    "aten.addmm.default": (_check_addmm, _lower_addmm),
    "aten.mm.default": (_check_mm, _lower_mm),
    "aten.bmm.default": (_check_matmul, _lower_matmul),
    "aten.matmul.default": (_check_matmul, _lower_matmul),
    "aten.relu.default": (_check_unary, _lower_unary(Op.RELU)),
    "aten.sigmoid.default": (_check_unary, _lower_unary(Op.SIGMOID)),
    "aten.tanh.default": (_check_unary, _lower_unary(Op.TANH)),
    "aten.silu.default": (_check_unary, _lower_unary(Op.SILU)),
    "aten.gelu.default": (_check_gelu, _lower_unary(Op.GELU, _gelu_attrs)),
    "aten._softmax.default": (_check_softmax, _lower_softmax),
    "aten.softmax.int": (_check_softmax, _lower_softmax),
    "aten.native_layer_norm.default": (_check_layer_norm, _lower_source_via_getitem),
    "aten.layer_norm.default": (_check_layer_norm, _lower_layer_norm),
    "getitem": (_check_getitem, _lower_getitem),
}
for _name, _opcode in (("add", Op.ADD), ("sub", Op.SUB), ("mul", Op.MUL), ("div", Op.DIV)):
    for _overload in ("Tensor", "Scalar"):
        _TABLE[f"aten.{_name}.{_overload}"] = (_check_binary, _lower_binary(_opcode))
_TABLE["aten.div.Tensor_mode"] = (_check_binary, _lower_binary(Op.DIV))
_TABLE["aten.div.Scalar_mode"] = (_check_binary, _lower_binary(Op.DIV))
for _name in _RESHAPE_OPS:
    _TABLE[_name] = (_check_reshape, _lower_reshape)
for _name in _CLONE_OPS:
    _TABLE[_name] = (_check_clone, _lower_reshape)
for _name in _PERMUTE_OPS:
    _TABLE[_name] = (_check_permute, _lower_permute)
for _name in _CAST_OPS:
    _TABLE[_name] = (_check_fold_only, _lower_not_folded)


def supported_op_names() -> List[str]:
    """Every operator name (as `op_name` spells it) that Ember may claim."""
    return sorted(_TABLE)


def unsupported_reason(node: Node, ctx: GraphContext) -> Optional[str]:
    """None if Ember lowers `node` (a call_function of an ATen or edge graph), else why not."""
    name = op_name(node)
    if name is None:
        return f"{node.op} {node.target} is not an operator call"
    entry = _TABLE.get(name)
    if entry is None:
        return f"{name} is not an Ember op"
    try:
        return entry[0](node, ctx)
    except (IndexError, KeyError, TypeError, AttributeError, ValueError) as e:
        return f"{name}: unexpected arguments ({type(e).__name__}: {e})"


def lower_to_plan(edge_program: ExportedProgram) -> bytes:
    """Lower an edge-dialect subgraph (what ExecuTorch hands EmberBackend.preprocess) to
    plan bytes. Raises EmberLoweringError naming the node it cannot lower."""
    return _Lowerer(edge_program).run()

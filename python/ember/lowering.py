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
    aten.convolution (2-D; 1-D through        CONV2D; a batch norm that follows it is folded
    reshapes; not transposed)                 into its weight and bias
    aten._native_batch_norm_legit_no_training MUL and ADD by per-channel constants, when it
    (inference batch norm)                    does not fold into the convolution before it
    aten.max_pool2d(_with_indices),           MAX_POOL2D, AVG_POOL2D, ADAPTIVE_AVG_POOL2D
    avg_pool2d, (_)adaptive_avg_pool2d
    aten.mean / sum / amax                    REDUCE_MEAN / REDUCE_SUM / REDUCE_MAX
    aten.relu / sigmoid / tanh / silu / gelu  RELU / SIGMOID / TANH / SILU / GELU [0 or 1]
    aten.neg / exp / log / sqrt / rsqrt /     NEG / EXP / LOG / SQRT / RSQRT / ABS / RECIPROCAL
    abs / reciprocal
    aten.clamp (scalar bounds), hardtanh      CLAMP [min, max]
    aten.add / sub (alpha 1), mul,            ADD / SUB / MUL / DIV / MAXIMUM / MINIMUM; a
    div (rounding_mode None), maximum,        Python scalar operand becomes a 0-d plan
    minimum, Tensor and Scalar variants       constant of the op's dtype
    aten.pow                                  MUL (x * x for exponent 2) or POW
    aten.where.self                           WHERE (condition bool)
    view_copy, _unsafe_view, squeeze_copy,    RESHAPE (bytes copied in order)
    unsqueeze_copy, clone-likes
    permute_copy, transpose_copy, t_copy      PERMUTE [perm]
    expand_copy                               EXPAND
    slice_copy, select_copy, split_copy,      SLICE [dim, start, step] (select and unbind:
    split_with_sizes_copy, unbind_copy        then RESHAPE)
    aten.cat                                  CAT [dim]
    aten.embedding                            EMBEDDING (int64 or int32 indices)
    aten.scaled_dot_product_attention         SDPA [is_causal, scale]
    _to_dim_order_copy / _to_copy             CAST (COPY when the dtype is unchanged)
    aten._softmax, aten.softmax.int           SOFTMAX [dim]
    aten.native_layer_norm, aten.layer_norm   LAYER_NORM [normalized_ndim, eps, has_w, has_b]
    a graph output that is an input, a        COPY
    constant or a repeated output

Constants. Placeholders that are parameters, buffers (not mutated) or lifted tensor
constants become plan constants. Any node computed from constants alone (casts, views,
permutes, `full`, `arange`, comparisons, ...: every deterministic op whose tensor inputs
are constant and whose result has a static shape) is folded here, at lowering, by running
the op; the result becomes a plan constant where an op reads it (a causal mask built with
`torch.tril(torch.ones(T, T))` becomes one bool constant). A constant operand whose dtype
differs from the op's is cast to the op's dtype, which is what PyTorch's type promotion
computes for 0-d tensors.

Dtypes. Ops that compute (everything but layout ops, WHERE's condition, EMBEDDING's
indices and CAST) take float32, float16 or bfloat16, and all non-constant operands of one
op share the output's dtype. Layout ops (reshapes, permutes, expand, slices, cat) and
WHERE's values move any of float32, float16, bfloat16, int64, int32 and bool.

Dynamic shapes. A dim that torch.export made symbolic is lowered when it is `c * s` for a
symbol `s` with finite bounds in the program's range constraints (a dynamic batch, or
batch x sequence after a flatten). The plan records it at its largest value with the
symbol's bounds (docs/plan-format.md "Dynamic dims"). The SymInt nodes that compute
shapes for views (`sym_size`, `*`, `+`, ...) are claimed with the ops that use them and
lower to nothing: every plan shape comes from the nodes' metadata.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

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
    "PLAN_DTYPES",
    "KEEP_WHOLE_OPS",
    "lower_to_plan",
    "op_name",
    "plan_shape",
    "supported_op_names",
    "unsupported_reason",
]

FLOAT_DTYPES: Dict[torch.dtype, Dtype] = {
    torch.float32: Dtype.FLOAT32,
    torch.float16: Dtype.FLOAT16,
    torch.bfloat16: Dtype.BFLOAT16,
}

# Every dtype a plan tensor may have.
PLAN_DTYPES: Dict[torch.dtype, Dtype] = {
    **FLOAT_DTYPES,
    torch.int64: Dtype.INT64,
    torch.int32: Dtype.INT32,
    torch.bool: Dtype.BOOL,
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
    "aten.scaled_dot_product_attention.default",
)

# Python operators on SymInts that compute shapes (view sizes) in graphs with dynamic dims.
_SYMINT_OPERATORS = {
    operator.mul: "sym.mul", operator.add: "sym.add", operator.sub: "sym.sub",
    operator.floordiv: "sym.floordiv", operator.mod: "sym.mod", operator.neg: "sym.neg",
}
_SYM_SIZE_OPS = ("aten.sym_size.int", "aten.sym_numel.default")


class EmberLoweringError(RuntimeError):
    """A subgraph handed to EmberBackend holds something Ember cannot lower."""


def op_name(node: Node) -> Optional[str]:
    """The operator's name as "namespace.op.overload" ("aten.linear.default") for ATen and
    edge nodes alike, "getitem" for tuple indexing, "sym.mul" (and the like) for Python
    arithmetic on SymInts, None for anything else."""
    if node.op != "call_function":
        return None
    target = node.target
    if target is operator.getitem:
        return "getitem"
    if target in _SYMINT_OPERATORS:
        return _SYMINT_OPERATORS[target]
    inner = getattr(target, "_op", None)  # edge dialect: EdgeOpOverload wraps the ATen op
    if isinstance(inner, torch._ops.OpOverload):
        target = inner
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return None


def _overload(node: Node) -> Optional[torch._ops.OpOverload]:
    target = getattr(node.target, "_op", node.target)
    return target if isinstance(target, torch._ops.OpOverload) else None


def _val(node) -> Optional[torch.Tensor]:
    if not isinstance(node, Node):
        return None
    val = node.meta.get("val")
    return val if isinstance(val, torch.Tensor) else None


def _static_shape(val: torch.Tensor) -> Optional[List[int]]:
    dims = []
    for d in val.shape:
        if type(d) is int:
            dims.append(d)
        elif isinstance(d, torch.SymInt) and getattr(d.node.expr, "is_number", False):
            dims.append(int(d))  # specialized by torch: a number in a SymInt
        else:
            return None  # a symbolic dim: the shape is dynamic
    return dims


def _is_number(x) -> bool:
    return isinstance(x, (int, float, bool)) and not isinstance(x, torch.SymInt)


def _is_symint_node(node) -> bool:
    return isinstance(node, Node) and isinstance(node.meta.get("val"), (torch.SymInt, int)) \
        and not isinstance(node.meta.get("val"), bool)


# A plan dim: its value (for a dynamic dim, at the symbol's largest value) and its symbol
# (a sympy Symbol, or None for a static dim). Two dims are equal when both parts are.
PlanDim = Tuple[int, Any]


def plan_shape(val: torch.Tensor, ep: Optional[ExportedProgram]) -> Optional[List[PlanDim]]:
    """The shape of a tensor as a plan records it, or None when a dim is neither static nor
    `c * s` for a symbol `s` with finite bounds in `ep`'s range constraints."""
    dims: List[PlanDim] = []
    for d in val.shape:
        if type(d) is int or _specialized(d):
            dims.append((int(d), None))
            continue
        bounds = _dim_bounds(d, ep)
        if bounds is None:
            return None
        coefficient, symbol, _, high = bounds
        dims.append((coefficient * high, symbol))
    return dims


def _specialized(d) -> bool:
    """A SymInt whose expression is a number (torch specialized the symbol)."""
    return isinstance(d, torch.SymInt) and bool(getattr(d.node.expr, "is_number", False))


def _dim_bounds(d, ep) -> Optional[Tuple[int, Any, int, int]]:
    """(coefficient, symbol, min, max) of a SymInt dim `coefficient * symbol`."""
    import sympy

    if ep is None or not isinstance(d, torch.SymInt):
        return None
    expr = d.node.expr
    coefficient, rest = expr.as_coeff_Mul()
    if not isinstance(rest, sympy.Symbol) or not coefficient.is_Integer or coefficient < 1:
        return None
    ranges = ep.range_constraints.get(rest)
    if ranges is None:
        return None
    try:
        low, high = int(ranges.lower), int(ranges.upper)
    except (TypeError, ValueError, OverflowError):
        return None  # unbounded (int_oo): the plan could not size memory for it
    if low < 0 or high < max(low, 1):
        return None
    return int(coefficient), rest, low, high


class GraphContext:
    """What a check needs to know about the program around a node: which placeholders
    hold constant data, which nodes compute a value from constants alone, and the bounds of
    symbolic dims."""

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

    def shape(self, node_or_val) -> Optional[List[PlanDim]]:
        val = node_or_val if isinstance(node_or_val, torch.Tensor) else _val(node_or_val)
        return None if val is None else plan_shape(val, self.ep)

    def is_constant_valued(self, node) -> bool:
        """True if the node is a constant placeholder, or a deterministic op whose tensor
        inputs are all constant-valued and whose result is a tensor (or tuple of tensors)
        of static shape: its value is computed at lowering."""
        if not isinstance(node, Node):
            return False
        known = self._constant_valued.get(node)
        if known is not None:
            return known
        self._constant_valued[node] = False  # cycles cannot happen; this guards recursion
        if node.op == "placeholder":
            result = self.is_constant_placeholder(node)
        elif node.op == "call_function":
            result = self._foldable(node)
        else:
            result = False
        self._constant_valued[node] = result
        return result

    def _foldable(self, node: Node) -> bool:
        name = op_name(node)
        if name is None or name.startswith("sym.") or name in _SYM_SIZE_OPS:
            return False
        overload = _overload(node)
        if overload is not None and torch.Tag.nondeterministic_seeded in overload.tags:
            return False
        vals = node.meta.get("val")
        vals = list(vals) if isinstance(vals, (list, tuple)) else [vals]
        for val in vals:
            if not isinstance(val, torch.Tensor) or _static_shape(val) is None \
                    or val.dtype not in _CASTABLE_DTYPES:
                return False
        fold_check = _FOLD_CHECKS.get(name)
        if fold_check is not None and fold_check(node) is not None:
            return False
        if name in _SHAPE_ONLY_OPS:  # the value depends on the input's shape only
            others = list(node.args[1:]) + list(node.kwargs.values())
            return not any(isinstance(a, Node) for a in others)
        inputs: List[Node] = []
        map_arg((node.args, node.kwargs), lambda n: inputs.append(n))
        return all(self.is_constant_valued(n) for n in inputs)


# --------------------------------------------------------------------------------------
# Checks. Each returns None when the node lowers, else a short reason.


def _check_tensor(val, what: str, ctx: Optional[GraphContext] = None, *,
                  float_only: bool = True) -> Optional[str]:
    if val is None:
        return f"{what} has no tensor metadata"
    shape = plan_shape(val, ctx.ep if ctx is not None else None)
    if shape is None:
        return f"{what} has a dynamic shape {tuple(val.shape)} that is not c * s with bounds"
    if len(shape) > MAX_RANK:
        return f"{what} has rank {len(shape)} > {MAX_RANK}"
    if float_only and val.dtype not in FLOAT_DTYPES:
        return f"{what} has dtype {val.dtype}; Ember computes on float32, float16, bfloat16"
    if not float_only and val.dtype not in PLAN_DTYPES:
        return f"{what} has dtype {val.dtype}, which a plan cannot hold"
    return None


def _check_output(node: Node, ctx: GraphContext, *, float_only: bool = True) -> Optional[str]:
    return _check_tensor(_val(node), "output", ctx, float_only=float_only)


def _check_operands(node: Node, ctx: GraphContext, operands: Sequence, *,
                    float_only: bool = True, result: Optional[Node] = None) -> Optional[str]:
    """Every tensor operand: representable shape; a non-constant one has the output's
    dtype (and, if it is a method input, is contiguous); a constant one is castable.
    float_only=False: layout ops, which move any plan dtype."""
    result = result if result is not None else node
    out = _val(result)
    problem = _check_output(result, ctx, float_only=float_only)
    if problem:
        return problem
    for i, arg in enumerate(operands):
        what = f"operand {i}"
        if not isinstance(arg, Node):
            return f"{what} is not a tensor"
        val = _val(arg)
        if ctx.is_constant_valued(arg):
            if val is None:
                return f"{what} has no tensor metadata"
            if val.dtype not in _CASTABLE_DTYPES:
                return f"{what} is a constant of dtype {val.dtype}"
            if val.dim() > MAX_RANK:
                return f"{what} has rank {val.dim()} > {MAX_RANK}"
            continue
        problem = _check_tensor(val, what, ctx, float_only=float_only)
        if problem:
            return problem
        if val.dtype != out.dtype:
            return f"{what} has dtype {val.dtype}, the output {out.dtype}"
        if arg.op == "placeholder" and not _contiguous(val):
            return f"{what} is a non-contiguous method input"
    return None


def _contiguous(val: torch.Tensor) -> bool:
    try:
        return bool(val.is_contiguous())
    except Exception:  # a symbolic stride the fake tensor cannot decide
        return False


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


def _static_dims(ctx: GraphContext, node, dims: Sequence[int], what: str) -> Optional[str]:
    shape = ctx.shape(node)
    if shape is None:
        return f"{what} has an unsupported shape"
    for d in dims:
        if d < len(shape) and shape[d][1] is not None:
            return f"{what} dims[{d}] is dynamic; Ember needs it static here"
    return None


def _check_unary(node, ctx):
    return _check_operands(node, ctx, node.args[:1])


def _check_gelu(node, ctx):
    if _arg(node, 1, "approximate", "none") not in ("none", "tanh"):
        return f"gelu approximate={_arg(node, 1, 'approximate')!r}"
    return _check_operands(node, ctx, node.args[:1])


def _check_clamp(node, ctx):
    name = op_name(node)
    if name.startswith("aten.hardtanh"):
        bounds = [_arg(node, 1, "min_val", -1.0), _arg(node, 2, "max_val", 1.0)]
    else:
        bounds = [_arg(node, 1, "min", None), _arg(node, 2, "max", None)]
    if all(b is None for b in bounds):
        return "clamp without bounds"
    for b in bounds:
        if b is not None and (not _is_number(b) or math.isnan(float(b))):
            return f"clamp bound {b!r} is not a number"
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
    if name == "aten.pow.Scalar":  # pow(number, tensor)
        if not _is_number(a):
            return "pow.Scalar base is not a number"
        return _check_operands(node, ctx, [b])
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
    xs, ws = ctx.shape(x), ctx.shape(w)
    if len(xs) < 1 or len(ws) != 2 or ws[1] != xs[-1]:
        return f"linear shapes x {tuple(_val(x).shape)}, w {tuple(_val(w).shape)}"
    if b is not None and ctx.shape(b) != [ws[0]]:
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
    n = ctx.shape(w)[1]
    if ctx.shape(bias) not in ([n], [(1, None), n]):
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


def _check_layout(node, ctx):
    return _check_operands(node, ctx, node.args[:1], float_only=False)


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
    return _check_no_extra_kwargs(node, allowed) or \
        _check_operands(node, ctx, node.args[:1], float_only=False)


def _check_cast(node, ctx):
    problem = _fold_cast(node)
    if problem:
        return f"cast with {problem}"
    src = node.args[0]
    if not isinstance(src, Node):
        return "cast of a non-tensor"
    return _check_output(node, ctx, float_only=False) or \
        _check_tensor(_val(src), "operand 0", ctx, float_only=False)


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


def _getitem_users(node: Node) -> Optional[Dict[int, Node]]:
    """The getitem users of a multi-output node by index; None if another kind of node
    uses it."""
    users: Dict[int, Node] = {}
    for user in node.users:
        if op_name(user) != "getitem" or not isinstance(user.args[1], int):
            return None
        users[user.args[1]] = user
    return users


def _first_result(node: Node) -> Optional[Node]:
    """For ops whose only used result is output 0 (native_layer_norm, batch norm,
    max_pool2d_with_indices): that getitem, or None if other outputs are used."""
    users = _getitem_users(node)
    if users is None or set(users) != {0} or len(node.users) != 1:
        return None
    return users[0]


def _check_layer_norm(node, ctx):
    x, shape, w, b, eps = _layer_norm_parts(node)
    if op_name(node) == "aten.native_layer_norm.default":
        result = _first_result(node)
        if result is None:
            return "native_layer_norm whose mean or rstd output is used"
    else:
        result = node
    operands = [x] + [t for t in (w, b) if t is not None]
    problem = _check_operands(node, ctx, operands, result=result)
    if problem:
        return problem
    xs = ctx.shape(x)
    norm = [(d, None) for d in shape]
    if not shape or len(shape) > len(xs) or xs[len(xs) - len(shape):] != norm:
        return f"normalized_shape {shape} does not match input {tuple(_val(x).shape)}"
    for t in (w, b):
        if t is not None and ctx.shape(t) != norm:
            return f"weight/bias shape {list(_val(t).shape)} != normalized_shape {shape}"
    if isinstance(eps, Node) or not _is_number(eps):
        return "eps is not a number"
    return None


def _pair(value, default=None) -> Optional[List[int]]:
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        return default
    if isinstance(value, int):
        return [value, value]
    value = list(value)
    if not all(isinstance(v, int) for v in value):
        return None
    return value * 2 if len(value) == 1 else value


def _conv_parts(node):
    x, w = node.args[0], node.args[1]
    b = _arg(node, 2, "bias", None)
    stride, padding, dilation = (_arg(node, 3, "stride"), _arg(node, 4, "padding"),
                                 _arg(node, 5, "dilation"))
    transposed = _arg(node, 6, "transposed", False)
    groups = _arg(node, 8, "groups", 1)
    return x, w, b, stride, padding, dilation, transposed, groups


def _check_convolution(node, ctx):
    x, w, b, stride, padding, dilation, transposed, groups = _conv_parts(node)
    if transposed:
        return "transposed convolution"
    operands = [x, w] + ([b] if b is not None else [])
    problem = _check_operands(node, ctx, operands)
    if problem:
        return problem
    xr, wr = _val(x).dim(), _val(w).dim()
    if (xr, wr) not in ((4, 4), (3, 3)):
        return f"convolution of a rank-{xr} input with a rank-{wr} weight (Ember: 1-D, 2-D)"
    spatial = wr - 2
    for what, value in (("stride", stride), ("padding", padding), ("dilation", dilation)):
        if not isinstance(value, (list, tuple)) or len(value) != spatial or \
                not all(isinstance(v, int) for v in value):
            return f"convolution {what} {value!r}"
    if not isinstance(groups, int) or groups < 1:
        return f"convolution groups {groups!r}"
    return _static_dims(ctx, x, range(1, xr), "convolution input") or \
        _static_dims(ctx, w, range(wr), "convolution weight")


def _batch_norm_parts(node):
    x, w, b, mean, var = node.args[:5]
    eps = node.args[6] if len(node.args) > 6 else 1e-5
    return x, w, b, mean, var, eps


def _check_batch_norm(node, ctx):
    x, w, b, mean, var, eps = _batch_norm_parts(node)
    result = _first_result(node)
    if result is None:
        return "batch norm whose saved statistics are used"
    problem = _check_operands(node, ctx, [x], result=result)
    if problem:
        return problem
    for t in (w, b, mean, var):
        if t is not None and not ctx.is_constant_valued(t):
            return "batch norm with non-constant parameters or statistics"
    if _val(x).dim() < 2:
        return "batch norm of a rank < 2 input"
    if not _is_number(eps):
        return "batch norm eps is not a number"
    return _static_dims(ctx, x, [1], "batch norm input")


def _pool_parts(node):
    name = op_name(node)
    x = node.args[0]
    kernel = _pair(_arg(node, 1, "kernel_size"))
    stride = _pair(_arg(node, 2, "stride", None), kernel)
    padding = _pair(_arg(node, 3, "padding", 0))
    if name.startswith("aten.max_pool2d"):
        dilation = _pair(_arg(node, 4, "dilation", 1))
        return x, kernel, stride, padding, dilation, bool(_arg(node, 5, "ceil_mode", False))
    return x, kernel, stride, padding, [1, 1], bool(_arg(node, 4, "ceil_mode", False))


def _check_pool(node, ctx):
    name = op_name(node)
    result = node
    if name == "aten.max_pool2d_with_indices.default":
        result = _first_result(node)
        if result is None:
            return "max_pool2d whose indices are used"
    x, kernel, stride, padding, dilation, _ = _pool_parts(node)
    if None in (kernel, stride, padding, dilation) or \
            not all(len(v) == 2 for v in (kernel, stride, padding, dilation)):
        return "pool arguments are not pairs of ints"
    if name.startswith("aten.avg_pool2d"):
        divisor = _arg(node, 6, "divisor_override", None)
        if divisor is not None and (not isinstance(divisor, int) or divisor < 1):
            return f"divisor_override={divisor!r}"
    problem = _check_operands(node, ctx, [x], result=result)
    if problem:
        return problem
    if _val(x).dim() != 4:
        return "pool of a rank other than 4"
    for k, p, d in zip(kernel, padding, dilation):
        if k < 1 or 2 * p > d * (k - 1) + 1:
            return "pool padding larger than half the kernel"
    return _static_dims(ctx, x, [2, 3], "pool input")


def _check_adaptive_pool(node, ctx):
    size = _pair(_arg(node, 1, "output_size"))
    if size is None or len(size) != 2 or min(size) < 1:
        return f"adaptive pool output size {_arg(node, 1, 'output_size')!r}"
    problem = _check_operands(node, ctx, node.args[:1])
    if problem:
        return problem
    if _val(node.args[0]).dim() != 4:
        return "adaptive pool of a rank other than 4"
    problem = _static_dims(ctx, node.args[0], [2, 3], "adaptive pool input")
    if problem:
        return problem
    if min(_val(node.args[0]).shape[2:]) < 1:
        return "adaptive pool of an empty plane"
    return None


def _reduce_dims(node) -> Optional[List[int]]:
    """The dims a reduction reduces, normalized and sorted; None if not a list of ints."""
    rank = _val(node.args[0]).dim()
    name = op_name(node)
    if name in ("aten.mean.default", "aten.sum.default"):
        dims = None
    else:
        dims = _arg(node, 1, "dim", None)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    if not all(isinstance(d, int) for d in dims):
        return None
    return sorted({d % rank for d in dims}) if rank else None


def _reduce_keepdim(node) -> bool:
    if op_name(node) in ("aten.mean.default", "aten.sum.default"):
        return False
    return bool(_arg(node, 2, "keepdim", False))


def _check_reduce(node, ctx):
    name = op_name(node)
    if name != "aten.amax.default":
        dtype_index = 1 if name in ("aten.mean.default", "aten.sum.default") else 3
        dtype = _arg(node, dtype_index, "dtype", None)
        if dtype is not None and dtype != _val(node).dtype:
            return f"reduction with dtype={dtype}"
    problem = _check_operands(node, ctx, node.args[:1])
    if problem:
        return problem
    if _val(node.args[0]).dim() < 1:
        return "reduction of a 0-d tensor"
    dims = _reduce_dims(node)
    if dims is None:
        return "reduction dims are not ints"
    if name == "aten.amax.default":
        shape = ctx.shape(node.args[0])
        for d in dims:
            value, symbol = shape[d]
            low = value if symbol is None else _symbol_min(ctx, symbol)
            if low < 1:
                return "amax over a dim that can be empty"
    return None


def _symbol_min(ctx, symbol) -> int:
    return int(ctx.ep.range_constraints[symbol].lower)


def _check_where(node, ctx):
    cond, a, b = node.args[0], node.args[1], node.args[2]
    if not isinstance(cond, Node) or _val(cond) is None or _val(cond).dtype != torch.bool:
        return "where with a condition that is not a bool tensor"
    problem = _check_tensor(_val(cond), "condition", ctx, float_only=False)
    if problem:
        return problem
    operands = [t for t in (a, b) if not _is_number(t)]
    if any(not isinstance(t, Node) for t in operands):
        return "where operand is neither a tensor nor a number"
    return _check_operands(node, ctx, operands, float_only=False)


def _check_expand(node, ctx):
    problem = _check_layout(node, ctx)
    if problem:
        return problem
    if _val(node.args[0]).dim() > _val(node).dim():
        return "expand to a lower rank"
    return None


def _slice_range(node) -> Optional[Tuple[int, int, int, int]]:
    """(dim, start, step, length) of a slice_copy with static ints."""
    x = _val(node.args[0])
    rank = x.dim()
    dim = _arg(node, 1, "dim", 0)
    start, end, step = _arg(node, 2, "start", None), _arg(node, 3, "end", None), \
        _arg(node, 4, "step", 1)
    if rank == 0 or not isinstance(dim, int):
        return None
    dim %= rank
    size = x.shape[dim]
    if type(size) is not int:
        return None
    if any(v is not None and type(v) is not int for v in (start, end)) or \
            type(step) is not int or step < 1:
        return None
    start = 0 if start is None else start
    end = size if end is None else end
    start = min(max(start + size if start < 0 else start, 0), size)
    end = min(max(end + size if end < 0 else end, 0), size)
    length = max(0, (end - start + step - 1) // step)
    if _val(node).shape[dim] != length:
        return None
    return dim, start, step, length


def _check_slice(node, ctx):
    problem = _check_layout(node, ctx)
    if problem:
        return problem
    if _slice_range(node) is None:
        return "slice with non-static bounds or a dynamic sliced dim"
    return _static_dims(ctx, node, [_slice_range(node)[0]], "slice")


def _check_select(node, ctx):
    problem = _check_layout(node, ctx)
    if problem:
        return problem
    x = _val(node.args[0])
    dim, index = node.args[1], node.args[2]
    if x.dim() == 0 or not isinstance(dim, int) or not isinstance(index, int):
        return "select with non-int arguments"
    size = x.shape[dim % x.dim()]
    if type(size) is not int or not -size <= index < size:
        return "select of a dynamic dim or an index out of range"
    return None


def _check_cat(node, ctx):
    tensors = list(node.args[0])
    dim = _arg(node, 1, "dim", 0)
    if not tensors or not all(isinstance(t, Node) for t in tensors) or not isinstance(dim, int):
        return "cat of non-tensors"
    problem = _check_operands(node, ctx, tensors, float_only=False)
    if problem:
        return problem
    rank = _val(node).dim()
    if rank == 0 or any(_val(t).dim() != rank for t in tensors):
        return "cat of tensors of different ranks"
    dim %= rank
    for t in tensors:
        problem = _static_dims(ctx, t, [dim], "cat input")
        if problem:
            return problem
    return None


def _split_sizes(node) -> Optional[Tuple[int, List[int]]]:
    """(dim, sizes of the pieces) of split_copy / split_with_sizes_copy / unbind_copy."""
    name = op_name(node)
    x = _val(node.args[0])
    rank = x.dim()
    if rank == 0:
        return None
    if name == "aten.unbind_copy.int":
        dim = _arg(node, 1, "dim", 0)
        if not isinstance(dim, int) or type(x.shape[dim % rank]) is not int:
            return None
        return dim % rank, [1] * x.shape[dim % rank]
    dim = _arg(node, 2, "dim", 0)
    if not isinstance(dim, int):
        return None
    size = x.shape[dim % rank]
    if type(size) is not int:
        return None
    if name == "aten.split_copy.Tensor":
        piece = node.args[1]
        if not isinstance(piece, int) or piece < 1:
            return None
        sizes = [min(piece, size - s) for s in range(0, size, piece)] or [0]
    else:
        sizes = list(node.args[1])
        if not all(isinstance(s, int) for s in sizes) or sum(sizes) != size:
            return None
    return dim % rank, sizes


def _check_split(node, ctx):
    users = _getitem_users(node)
    if users is None:
        return "split whose pieces are used other than by indexing"
    if _split_sizes(node) is None:
        return "split of a dynamic dim or with non-int sizes"
    x = node.args[0]
    problem = _check_tensor(_val(x), "operand 0", ctx, float_only=False)
    if problem:
        return problem
    for user in users.values():
        problem = _check_operands(user, ctx, [x], float_only=False)
        if problem:
            return problem
    return None


def _check_embedding(node, ctx):
    w, idx = node.args[0], node.args[1]
    padding_idx = _arg(node, 2, "padding_idx", -1)
    if not isinstance(idx, Node) or _val(idx) is None or \
            _val(idx).dtype not in (torch.int64, torch.int32):
        return "embedding indices that are not an int64 or int32 tensor"
    if not isinstance(padding_idx, int):
        return "embedding padding_idx"
    problem = _check_operands(node, ctx, [w]) or \
        _check_tensor(_val(idx), "indices", ctx, float_only=False)
    if problem:
        return problem
    if _val(w).dim() != 2 or _val(idx).dim() >= MAX_RANK:
        return "embedding weight of rank other than 2"
    return _static_dims(ctx, w, [0, 1], "embedding weight")


def _sdpa_parts(node):
    q, k, v = node.args[:3]
    mask = _arg(node, 3, "attn_mask", None)
    dropout = _arg(node, 4, "dropout_p", 0.0)
    is_causal = _arg(node, 5, "is_causal", False)
    scale = node.kwargs.get("scale", node.args[6] if len(node.args) > 6 else None)
    gqa = node.kwargs.get("enable_gqa", node.args[7] if len(node.args) > 7 else False)
    return q, k, v, mask, dropout, is_causal, scale, gqa


def _check_sdpa(node, ctx):
    q, k, v, mask, dropout, is_causal, scale, gqa = _sdpa_parts(node)
    if dropout != 0.0:
        return f"scaled_dot_product_attention with dropout_p={dropout!r}"
    if gqa:
        return "scaled_dot_product_attention with enable_gqa"
    if not isinstance(is_causal, bool) or (scale is not None and not _is_number(scale)):
        return "scaled_dot_product_attention with non-constant is_causal or scale"
    problem = _check_operands(node, ctx, [q, k, v])
    if problem:
        return problem
    qs, ks, vs = ctx.shape(q), ctx.shape(k), ctx.shape(v)
    rank = len(qs)
    if rank < 2 or len(ks) != rank or len(vs) != rank or ks[:-2] != qs[:-2] or \
            vs[:-2] != qs[:-2] or ks[-1] != qs[-1] or vs[-2] != ks[-2]:
        return "scaled_dot_product_attention shapes Ember does not take (batch dims differ)"
    if scale is None and qs[-1][1] is not None:
        return "scaled_dot_product_attention with a dynamic head dim and no scale"
    if mask is not None:
        if is_causal:
            return "scaled_dot_product_attention with a mask and is_causal"
        mval = _val(mask)
        if mval is None or mval.dtype not in (torch.bool, _val(q).dtype):
            return "attention mask that is neither bool nor of q's dtype"
        problem = _check_tensor(mval, "mask", ctx, float_only=False)
        if problem:
            return problem
        if not ctx.is_constant_valued(mask) and mval.dtype != torch.bool and \
                mval.dtype != _val(node).dtype:
            return "attention mask dtype"
        if mval.dim() > rank:
            return "attention mask of a higher rank than q"
    return None


def _check_getitem(node, ctx):
    source = node.args[0]
    if not isinstance(source, Node) or not isinstance(node.args[1], int):
        return "getitem of an op Ember does not run"
    name = op_name(source)
    if name in _FIRST_RESULT_OPS and node.args[1] == 0:
        return _TABLE[name][0](source, ctx)
    if name in _SPLIT_OPS:
        return _check_split(source, ctx)
    return "getitem of an op Ember does not run"


def _check_multi_output(node, ctx):
    """Ops whose results are read through getitem: claimed with their getitems."""
    return _TABLE_MULTI[op_name(node)](node, ctx)


def _check_symint(node, ctx):
    if not _is_symint_node(node):
        return "not a SymInt computation"
    return None


# Fold checks: may this op be folded at lowering when its input is constant? (The value is
# computed by calling the op on the constant, so the question is whether the result is an
# ordinary dense tensor on the CPU.)
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


def _fold_clone(node) -> Optional[str]:
    return _check_no_extra_kwargs(node, {
        "non_blocking": lambda v: True,
        "dim_order": lambda v: _dim_order_ok(v, node),
        "memory_format": lambda v: v in (None, torch.preserve_format, torch.contiguous_format),
    })


def _fold_on_cpu(node) -> Optional[str]:
    device = node.kwargs.get("device")
    if device is not None and torch.device(device).type != "cpu":
        return "device"
    return None


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
# Their value depends on the input's shape (static) and dtype only, not on its data.
_SHAPE_ONLY_OPS = (
    "aten.full_like.default",
    "aten.zeros_like.default",
    "aten.ones_like.default",
)
_FIRST_RESULT_OPS = (
    "aten.native_layer_norm.default",
    "aten._native_batch_norm_legit_no_training.default",
    "aten.max_pool2d_with_indices.default",
)
_SPLIT_OPS = (
    "aten.split_copy.Tensor",
    "aten.split_with_sizes_copy.default",
    "aten.unbind_copy.int",
    "aten.split.Tensor",
    "aten.split_with_sizes.default",
    "aten.unbind.int",
)

_FOLD_CHECKS: Dict[str, Callable[[Node], Optional[str]]] = {}
_FOLD_CHECKS.update({name: _fold_cast for name in _CAST_OPS})
_FOLD_CHECKS.update({name: _fold_clone for name in _CLONE_OPS})
for _name in ("aten.full.default", "aten.arange.start_step", "aten.arange.default",
              "aten.arange.start", "aten.scalar_tensor.default", "aten.ones.default",
              "aten.zeros.default", "aten.full_like.default", "aten.zeros_like.default",
              "aten.ones_like.default"):
    _FOLD_CHECKS[_name] = _fold_on_cpu


# --------------------------------------------------------------------------------------
# Lowering.


# The compile spec through which ember.save hands the lowering the exported program's own
# lower bounds of its dynamic dims ("s77=1;s12=1": symbol names, as in range_constraints).
SYMBOL_LOWER_BOUNDS_KEY = "symbol_lower_bounds"


def symbol_lower_bounds_value(ep: ExportedProgram) -> Optional[bytes]:
    """The symbol_lower_bounds spec's value for an exported program: its symbols whose
    lower bound is below 2 (the ones the edge program raises), or None if there are none."""
    bounds = []
    for symbol, ranges in ep.range_constraints.items():
        try:
            low = int(ranges.lower)
        except (TypeError, ValueError, OverflowError):
            continue
        if low < 2:
            bounds.append(f"{symbol}={low}")
    return ";".join(bounds).encode() if bounds else None


def parse_symbol_lower_bounds(value: bytes) -> Dict[str, int]:
    """The symbol_lower_bounds spec's value back as {symbol name: lower bound}."""
    bounds = {}
    for item in bytes(value).decode(errors="replace").split(";"):
        name, _, low = item.partition("=")
        if name and low.lstrip("-").isdigit():
            bounds[name] = int(low)
    return bounds


class _Lowerer:
    def __init__(self, ep: ExportedProgram,
                 lower_bounds: Optional[Dict[str, int]] = None) -> None:
        self.ep = ep
        self.lower_bounds = dict(lower_bounds or {})
        self.ctx = GraphContext(ep)
        self.w = PlanWriter()
        self.tensors: Dict[Node, int] = {}        # node -> plan tensor holding its value
        self.out_tensors: Dict[Node, int] = {}    # node -> the plan output it writes
        self.done: set = set()                    # nodes lowered as part of another
        self.constants: Dict[Tuple[Node, Optional[torch.dtype]], int] = {}
        self.values: Dict[Node, Any] = {}
        self.names: set = set()
        self.symbols: Dict[Any, int] = {}         # sympy Symbol -> plan symbol index

    # -- names, shapes and tensors --

    def name(self, base: str) -> str:
        base = base[:200] or "t"
        name, i = base, 1
        while name in self.names:
            name, i = f"{base}_{i}", i + 1
        self.names.add(name)
        return name

    def shape(self, val: torch.Tensor) -> Tuple[List[int], List[Optional[int]]]:
        """Plan dims and per-dim symbol indices of a tensor (declaring its symbols)."""
        dims, syms = [], []
        for d in val.shape:
            if type(d) is int or _specialized(d):
                dims.append(int(d))
                syms.append(None)
                continue
            bounds = _dim_bounds(d, self.ep)
            if bounds is None:
                raise EmberLoweringError(f"dim {d} is not c * s with finite bounds")
            coefficient, symbol, low, high = bounds
            if symbol not in self.symbols:
                self.symbols[symbol] = self.w.add_symbol(self._lower_bound(symbol, low), high)
            dims.append(coefficient * high)
            syms.append(self.symbols[symbol])
        return dims, syms

    def _lower_bound(self, symbol, low: int) -> int:
        """torch.export traces a dynamic dim as if it were at least 2 (sizes 0 and 1
        specialize), and the edge program ExecuTorch lowers carries that raised bound even
        where the user's Dim allowed 1: a batch of 1 would be refused at run time, though
        the exported program and ExecuTorch's own kernels take it. A bound of 2 goes back
        to the exported program's (lower_bounds, from ember.save), never below 1."""
        user = self.lower_bounds.get(str(symbol))
        return max(1, user) if low == 2 and user is not None and user < 2 else low

    def constant_value(self, node: Node) -> Any:
        value = self.values.get(node)
        if value is None:
            if node.op == "placeholder":
                value = self.ctx.placeholder_tensor(node)
            else:
                if op_name(node) in _SHAPE_ONLY_OPS:
                    # Only the input's shape and dtype matter (it may be a method input).
                    src = _val(node.args[0])
                    args = (torch.zeros(_static_shape(src), dtype=src.dtype),) + \
                        tuple(node.args[1:])
                    kwargs = dict(node.kwargs)
                else:
                    args = map_arg(node.args, self.constant_value)
                    kwargs = map_arg(node.kwargs, self.constant_value)
                with torch.no_grad():
                    value = node.target(*args, **kwargs)
            if isinstance(value, torch.Tensor):
                value = value.detach()
            self.values[node] = value
        return value

    def add_constant(self, tensor: torch.Tensor, dtype: torch.dtype, base: str) -> int:
        tensor = tensor.detach().to("cpu", dtype).contiguous()
        data = tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        return self.w.add_constant(self.name(base), PLAN_DTYPES[dtype], list(tensor.shape),
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

    def own_operand(self, node: Node) -> int:
        """An operand in its own dtype (indices, conditions)."""
        return self.operand(node, _val(node).dtype)

    def intermediate(self, base: str, dtype: torch.dtype, shape) -> int:
        """A new intermediate: with a tensor's (possibly dynamic) shape, a (dims, symbols)
        pair from `shape`, or a list of static dims."""
        if isinstance(shape, torch.Tensor):
            dims, syms = self.shape(shape)
        elif isinstance(shape, tuple):
            dims, syms = shape
        else:
            dims, syms = list(shape), None
        return self.w.add_intermediate(self.name(base), PLAN_DTYPES[dtype], dims, symbols=syms)

    def shape_with(self, val: torch.Tensor, dim: int, size: Optional[int] = None,
                   insert: bool = False) -> Tuple[List[int], List[Optional[int]]]:
        """`val`'s plan shape with dims[dim] set to a static `size`, or a static 1 inserted
        at `dim` (insert=True)."""
        dims, syms = self.shape(val)
        if insert:
            dims.insert(dim, 1)
            syms.insert(dim, None)
        else:
            dims[dim], syms[dim] = size, None
        return dims, syms

    def result(self, node: Node) -> int:
        """The plan tensor an op writes for `node`: its method output, or an intermediate."""
        if node in self.tensors:
            raise EmberLoweringError(f"node {node.name} is computed twice")
        index = self.out_tensors.get(node)
        if index is None:
            val = _val(node)
            index = self.intermediate(node.name, val.dtype, val)
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
            problem = _check_tensor(val, f"method input {name}", self.ctx, float_only=False)
            if problem:
                raise EmberLoweringError(problem)
            dims, syms = self.shape(val)
            self.tensors[node] = self.w.add_input(self.name(name), PLAN_DTYPES[val.dtype], dims,
                                                  symbols=syms)

        output_node = next(n for n in graph.nodes if n.op == "output")
        outputs = list(output_node.args[0]) if isinstance(output_node.args[0], (list, tuple)) \
            else [output_node.args[0]]
        copies: List[Tuple[int, Node]] = []
        for i, node in enumerate(outputs):
            val = _val(node)
            problem = _check_tensor(val, f"method output {i}", self.ctx, float_only=False)
            if problem:
                raise EmberLoweringError(problem)
            dims, syms = self.shape(val)
            index = self.w.add_output(self.name(f"output_{i}"), PLAN_DTYPES[val.dtype], dims,
                                      symbols=syms)
            computed_here = (node.op == "call_function"
                             and not self.ctx.is_constant_valued(node)
                             and node not in self.out_tensors)
            if computed_here:
                self.out_tensors[node] = index
            else:
                copies.append((index, node))

        for node in graph.nodes:
            if node.op != "call_function" or node in self.tensors or node in self.done:
                continue
            if self.ctx.is_constant_valued(node):
                continue  # folded; becomes a constant where an op reads it
            if _is_symint_node(node) and op_name(node) is not None and \
                    (op_name(node).startswith("sym.") or op_name(node) in _SYM_SIZE_OPS):
                continue  # shape arithmetic: plan shapes come from metadata
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


def _clamp_attrs(node):
    if op_name(node).startswith("aten.hardtanh"):
        low, high = _arg(node, 1, "min_val", -1.0), _arg(node, 2, "max_val", 1.0)
    else:
        low, high = _arg(node, 1, "min", None), _arg(node, 2, "max", None)
    low = -math.inf if low is None else float(low)
    high = math.inf if high is None else float(high)
    return [f64_bits(low), f64_bits(high)]


def _scalar_constant(lw: _Lowerer, value, dtype: torch.dtype, base: str) -> int:
    return lw.add_constant(torch.tensor(value), dtype, base)


def _lower_binary(opcode: Op):
    def lower(lw: _Lowerer, node: Node) -> None:
        dtype = _out_dtype(node)
        first, other = node.args[0], node.args[1]
        if isinstance(first, Node):
            a = lw.operand(first, dtype)
        else:
            a = _scalar_constant(lw, first, dtype, f"{node.name}_scalar")
        if isinstance(other, Node):
            b = lw.operand(other, dtype)
        else:
            b = _scalar_constant(lw, other, dtype, f"{node.name}_scalar")
        lw.w.add_op(opcode, [a, b], [lw.result(node)])
    return lower


def _lower_pow(lw: _Lowerer, node: Node) -> None:
    exponent = node.args[1]
    if op_name(node) == "aten.pow.Tensor_Scalar" and exponent == 2:
        x = lw.operand(node.args[0], _out_dtype(node))
        lw.w.add_op(Op.MUL, [x, x], [lw.result(node)])  # as PyTorch computes x ** 2
        return
    _lower_binary(Op.POW)(lw, node)


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
        n = _val(node).shape[-1]
        if list(_val(bias).shape) != [n]:
            if lw.ctx.is_constant_valued(bias):
                b = lw.add_constant(lw.constant_value(bias).reshape(-1), dtype,
                                    f"{bias.name}_flat")
            else:
                flat = lw.intermediate(f"{bias.name}_flat", dtype, [n])
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


def _lower_cast(lw: _Lowerer, node: Node) -> None:
    src = node.args[0]
    x = lw.own_operand(src)
    same = _val(src).dtype == _out_dtype(node)
    lw.w.add_op(Op.RESHAPE if same else Op.CAST, [x], [lw.result(node)])


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


def _keeps_memory_order(shape, perm: List[int]) -> bool:
    """Whether permuting by perm only moves dims of size 1: then the elements stay in the
    same order in memory and the permute is a reshape (a [1, L, D] -> [L, 1, D] transpose
    of a batch of one, say)."""
    moved = [d for d in perm if not (isinstance(shape[d], int) and shape[d] == 1)]
    return moved == sorted(moved)


def _lower_permute(lw: _Lowerer, node: Node) -> None:
    x = lw.operand(node.args[0], _out_dtype(node))
    perm = _permutation(node)
    if _keeps_memory_order(list(_val(node.args[0]).shape), perm):
        lw.w.add_op(Op.RESHAPE, [x], [lw.result(node)])
    else:
        lw.w.add_op(Op.PERMUTE, [x], [lw.result(node)], perm)


def _lower_softmax(lw: _Lowerer, node: Node) -> None:
    x = lw.operand(node.args[0], _out_dtype(node))
    dim = node.args[1] % _val(node.args[0]).dim()
    lw.w.add_op(Op.SOFTMAX, [x], [lw.result(node)], [dim])


def _result_node(node: Node) -> Node:
    """Where a multi-output op writes: its getitem 0 for native_layer_norm, batch norm and
    max_pool2d_with_indices; the node itself otherwise."""
    if op_name(node) in _FIRST_RESULT_OPS:
        return _first_result(node)
    return node


def _lower_layer_norm(lw: _Lowerer, node: Node) -> None:
    x, shape, w, b, eps = _layer_norm_parts(node)
    result_node = _result_node(node)
    dtype = _out_dtype(result_node)
    inputs = [lw.operand(x, dtype)]
    inputs += [lw.operand(t, dtype) for t in (w, b) if t is not None]
    attrs = [len(shape), f64_bits(float(eps)), int(w is not None), int(b is not None)]
    lw.w.add_op(Op.LAYER_NORM, inputs, [lw.result(result_node)], attrs)
    lw.done.add(node)


def _lower_getitem(lw: _Lowerer, node: Node) -> None:
    source = node.args[0]
    name = op_name(source)
    if name in _FIRST_RESULT_OPS:
        if node not in lw.tensors:
            _TABLE[name][1](lw, source)
        return
    # A piece of a split: a SLICE of the split's input (and a RESHAPE for unbind).
    dim, sizes = _split_sizes(source)
    i = node.args[1]
    dtype = _out_dtype(node)
    x = lw.operand(source.args[0], dtype)
    start = sum(sizes[:i])
    if name.startswith("aten.unbind"):
        piece = lw.intermediate(f"{node.name}_slice", dtype,
                                lw.shape_with(_val(source.args[0]), dim, 1))
        lw.w.add_op(Op.SLICE, [x], [piece], [dim, start, 1])
        lw.w.add_op(Op.RESHAPE, [piece], [lw.result(node)])
    else:
        lw.w.add_op(Op.SLICE, [x], [lw.result(node)], [dim, start, 1])


def _lower_nothing(lw: _Lowerer, node: Node) -> None:
    """Split-like ops: their getitems lower the pieces."""
    lw.done.add(node)


def _folded_batch_norm(lw: _Lowerer, conv: Node) -> Optional[Tuple[Node, Node]]:
    """(batch norm, its getitem) when the convolution's only user is an inference batch
    norm that Ember claims, whose statistics fold into the convolution's weights."""
    users = list(conv.users)
    if len(users) != 1 or op_name(users[0]) != \
            "aten._native_batch_norm_legit_no_training.default":
        return None
    bn = users[0]
    if bn.args[0] is not conv or _check_batch_norm(bn, lw.ctx) is not None:
        return None
    w = conv.args[1]
    b = _arg(conv, 2, "bias", None)
    if not lw.ctx.is_constant_valued(w) or (b is not None and not lw.ctx.is_constant_valued(b)):
        return None
    return bn, _first_result(bn)


def _batch_norm_scale_shift(lw: _Lowerer, bn: Node) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per channel, in float64: scale = weight / sqrt(var + eps), shift = bias - mean * scale."""
    _, w, b, mean, var, eps = _batch_norm_parts(bn)
    mean = lw.constant_value(mean).double()
    var = lw.constant_value(var).double()
    scale = 1.0 / torch.sqrt(var + float(eps))
    if w is not None:
        scale = scale * lw.constant_value(w).double()
    shift = -mean * scale
    if b is not None:
        shift = shift + lw.constant_value(b).double()
    return scale, shift


def _lower_convolution(lw: _Lowerer, node: Node) -> None:
    x, w, b, stride, padding, dilation, _, groups = _conv_parts(node)
    folded = _folded_batch_norm(lw, node)
    result_node = folded[1] if folded is not None else node
    dtype = _out_dtype(result_node)
    one_d = _val(w).dim() == 3
    if folded is not None:
        scale, shift = _batch_norm_scale_shift(lw, folded[0])
        weight = lw.constant_value(w).double()
        weight = weight * scale.reshape([-1] + [1] * (weight.dim() - 1))
        bias = shift if b is None else lw.constant_value(b).double() * scale + shift
        if one_d:
            weight = weight.unsqueeze(2)
        w_index = lw.add_constant(weight, dtype, f"{w.name}_folded")
        b_index = lw.add_constant(bias, dtype, f"{node.name}_folded_bias")
    else:
        if one_d and lw.ctx.is_constant_valued(w):
            w_index = lw.add_constant(lw.constant_value(w).unsqueeze(2), dtype, f"{w.name}_2d")
        elif one_d:
            w_index = lw.intermediate(f"{w.name}_2d", dtype, lw.shape_with(_val(w), 2, insert=True))
            lw.w.add_op(Op.RESHAPE, [lw.operand(w, dtype)], [w_index])
        else:
            w_index = lw.operand(w, dtype)
        b_index = lw.operand(b, dtype) if b is not None else None
    x_index = lw.operand(x, dtype)
    if one_d:
        stride, padding, dilation = [1, stride[0]], [0, padding[0]], [1, dilation[0]]
        x4 = lw.intermediate(f"{x.name}_2d", dtype, lw.shape_with(_val(x), 2, insert=True))
        lw.w.add_op(Op.RESHAPE, [x_index], [x4])
        x_index = x4
    inputs = [x_index, w_index] + ([b_index] if b_index is not None else [])
    attrs = [*stride, *padding, *dilation, groups]
    if one_d:
        y4 = lw.intermediate(f"{node.name}_2d", dtype,
                             lw.shape_with(_val(result_node), 2, insert=True))
        lw.w.add_op(Op.CONV2D, inputs, [y4], attrs)
        lw.w.add_op(Op.RESHAPE, [y4], [lw.result(result_node)])
    else:
        lw.w.add_op(Op.CONV2D, inputs, [lw.result(result_node)], attrs)
    if folded is not None:
        lw.done.update((node, folded[0]))


def _lower_batch_norm(lw: _Lowerer, node: Node) -> None:
    """An inference batch norm that did not fold into a convolution: x * scale + shift,
    per channel (dim 1). In float32 for a 16-bit x, cast back at the end, as PyTorch
    computes it: with scale, shift and the product each rounded to float16, the result was
    tens of ulps off where the running mean is large against x's spread."""
    x = node.args[0]
    result_node = _first_result(node)
    dtype = _out_dtype(result_node)
    wide = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    scale, shift = _batch_norm_scale_shift(lw, node)
    rank = _val(x).dim()
    shape = [-1] + [1] * (rank - 2)
    s = lw.add_constant(scale.reshape(shape), wide, f"{node.name}_scale")
    t = lw.add_constant(shift.reshape(shape), wide, f"{node.name}_shift")
    xi = lw.operand(x, dtype)
    if wide is not dtype:
        xw = lw.intermediate(f"{node.name}_x", wide, _val(result_node))
        lw.w.add_op(Op.CAST, [xi], [xw])
        xi = xw
    scaled = lw.intermediate(f"{node.name}_scaled", wide, _val(result_node))
    lw.w.add_op(Op.MUL, [xi, s], [scaled])
    if wide is dtype:
        lw.w.add_op(Op.ADD, [scaled, t], [lw.result(result_node)])
    else:
        shifted = lw.intermediate(f"{node.name}_shifted", wide, _val(result_node))
        lw.w.add_op(Op.ADD, [scaled, t], [shifted])
        lw.w.add_op(Op.CAST, [shifted], [lw.result(result_node)])
    lw.done.add(node)


def _lower_pool(lw: _Lowerer, node: Node) -> None:
    x, kernel, stride, padding, dilation, ceil_mode = _pool_parts(node)
    result_node = _result_node(node)
    dtype = _out_dtype(result_node)
    xi = lw.operand(x, dtype)
    if op_name(node).startswith("aten.max_pool2d"):
        attrs = [*kernel, *stride, *padding, *dilation, int(ceil_mode)]
        lw.w.add_op(Op.MAX_POOL2D, [xi], [lw.result(result_node)], attrs)
    else:
        include_pad = bool(_arg(node, 5, "count_include_pad", True))
        divisor = _arg(node, 6, "divisor_override", None) or 0
        attrs = [*kernel, *stride, *padding, int(ceil_mode), int(include_pad), divisor]
        lw.w.add_op(Op.AVG_POOL2D, [xi], [lw.result(result_node)], attrs)
    lw.done.add(node)


def _lower_adaptive_pool(lw: _Lowerer, node: Node) -> None:
    x = lw.operand(node.args[0], _out_dtype(node))
    lw.w.add_op(Op.ADAPTIVE_AVG_POOL2D, [x], [lw.result(node)])


_REDUCE_OPCODES = {"mean": Op.REDUCE_MEAN, "sum": Op.REDUCE_SUM, "amax": Op.REDUCE_MAX}


def _lower_reduce(lw: _Lowerer, node: Node) -> None:
    opcode = _REDUCE_OPCODES[op_name(node).split(".")[1]]
    x = lw.operand(node.args[0], _out_dtype(node))
    mask = sum(1 << d for d in _reduce_dims(node))
    lw.w.add_op(opcode, [x], [lw.result(node)], [mask, int(_reduce_keepdim(node))])


def _lower_where(lw: _Lowerer, node: Node) -> None:
    dtype = _out_dtype(node)
    cond = lw.own_operand(node.args[0])
    values = []
    for t in node.args[1:3]:
        if isinstance(t, Node):
            values.append(lw.operand(t, dtype))
        else:
            values.append(_scalar_constant(lw, t, dtype, f"{node.name}_scalar"))
    lw.w.add_op(Op.WHERE, [cond] + values, [lw.result(node)])


def _lower_expand(lw: _Lowerer, node: Node) -> None:
    x = lw.operand(node.args[0], _out_dtype(node))
    same = list(_val(node.args[0]).shape) == list(_val(node).shape)
    lw.w.add_op(Op.RESHAPE if same else Op.EXPAND, [x], [lw.result(node)])


def _lower_slice(lw: _Lowerer, node: Node) -> None:
    dim, start, step, length = _slice_range(node)
    x = lw.operand(node.args[0], _out_dtype(node))
    if start == 0 and step == 1 and length == _val(node.args[0]).shape[dim]:
        lw.w.add_op(Op.RESHAPE, [x], [lw.result(node)])
    else:
        lw.w.add_op(Op.SLICE, [x], [lw.result(node)], [dim, start, step])


def _lower_select(lw: _Lowerer, node: Node) -> None:
    x_node = node.args[0]
    dtype = _out_dtype(node)
    rank = _val(x_node).dim()
    dim = node.args[1] % rank
    index = node.args[2] % _val(x_node).shape[dim]
    piece = lw.intermediate(f"{node.name}_slice", dtype, lw.shape_with(_val(x_node), dim, 1))
    lw.w.add_op(Op.SLICE, [lw.operand(x_node, dtype)], [piece], [dim, index, 1])
    lw.w.add_op(Op.RESHAPE, [piece], [lw.result(node)])


def _lower_cat(lw: _Lowerer, node: Node) -> None:
    dtype = _out_dtype(node)
    tensors = [lw.operand(t, dtype) for t in node.args[0]]
    dim = _arg(node, 1, "dim", 0) % _val(node).dim()
    lw.w.add_op(Op.CAT, tensors, [lw.result(node)], [dim])


def _lower_embedding(lw: _Lowerer, node: Node) -> None:
    dtype = _out_dtype(node)
    w = lw.operand(node.args[0], dtype)
    idx = lw.own_operand(node.args[1])
    lw.w.add_op(Op.EMBEDDING, [w, idx], [lw.result(node)])


def _lower_sdpa(lw: _Lowerer, node: Node) -> None:
    q, k, v, mask, _, is_causal, scale, _ = _sdpa_parts(node)
    dtype = _out_dtype(node)
    if scale is None:
        scale = 1.0 / math.sqrt(_val(q).shape[-1])
    inputs = [lw.operand(q, dtype), lw.operand(k, dtype), lw.operand(v, dtype)]
    if mask is not None:
        mask_dtype = _val(mask).dtype
        inputs.append(lw.operand(mask, torch.bool if mask_dtype == torch.bool else dtype))
    lw.w.add_op(Op.SDPA, inputs, [lw.result(node)], [int(bool(is_causal)), f64_bits(scale)])


_Entry = Tuple[Callable[[Node, GraphContext], Optional[str]], Callable[[_Lowerer, Node], None]]
_TABLE: Dict[str, _Entry] = {
    "aten.linear.default": (_check_linear, _lower_linear),
    "aten.addmm.default": (_check_addmm, _lower_addmm),
    "aten.mm.default": (_check_mm, _lower_mm),
    "aten.bmm.default": (_check_matmul, _lower_matmul),
    "aten.matmul.default": (_check_matmul, _lower_matmul),
    "aten.convolution.default": (_check_convolution, _lower_convolution),
    "aten._native_batch_norm_legit_no_training.default": (_check_batch_norm,
                                                          _lower_batch_norm),
    "aten.max_pool2d_with_indices.default": (_check_pool, _lower_pool),
    "aten.max_pool2d.default": (_check_pool, _lower_pool),
    "aten.avg_pool2d.default": (_check_pool, _lower_pool),
    "aten._adaptive_avg_pool2d.default": (_check_adaptive_pool, _lower_adaptive_pool),
    "aten.adaptive_avg_pool2d.default": (_check_adaptive_pool, _lower_adaptive_pool),
    "aten.mean.dim": (_check_reduce, _lower_reduce),
    "aten.mean.default": (_check_reduce, _lower_reduce),
    "aten.sum.dim_IntList": (_check_reduce, _lower_reduce),
    "aten.sum.default": (_check_reduce, _lower_reduce),
    "aten.amax.default": (_check_reduce, _lower_reduce),
    "aten.relu.default": (_check_unary, _lower_unary(Op.RELU)),
    "aten.sigmoid.default": (_check_unary, _lower_unary(Op.SIGMOID)),
    "aten.tanh.default": (_check_unary, _lower_unary(Op.TANH)),
    "aten.silu.default": (_check_unary, _lower_unary(Op.SILU)),
    "aten.gelu.default": (_check_gelu, _lower_unary(Op.GELU, _gelu_attrs)),
    "aten.neg.default": (_check_unary, _lower_unary(Op.NEG)),
    "aten.exp.default": (_check_unary, _lower_unary(Op.EXP)),
    "aten.log.default": (_check_unary, _lower_unary(Op.LOG)),
    "aten.sqrt.default": (_check_unary, _lower_unary(Op.SQRT)),
    "aten.rsqrt.default": (_check_unary, _lower_unary(Op.RSQRT)),
    "aten.abs.default": (_check_unary, _lower_unary(Op.ABS)),
    "aten.reciprocal.default": (_check_unary, _lower_unary(Op.RECIPROCAL)),
    "aten.clamp.default": (_check_clamp, _lower_unary(Op.CLAMP, _clamp_attrs)),
    "aten.hardtanh.default": (_check_clamp, _lower_unary(Op.CLAMP, _clamp_attrs)),
    "aten.maximum.default": (_check_binary, _lower_binary(Op.MAXIMUM)),
    "aten.minimum.default": (_check_binary, _lower_binary(Op.MINIMUM)),
    "aten.pow.Tensor_Scalar": (_check_binary, _lower_pow),
    "aten.pow.Tensor_Tensor": (_check_binary, _lower_pow),
    "aten.pow.Scalar": (_check_binary, _lower_pow),
    "aten.where.self": (_check_where, _lower_where),
    "aten.expand_copy.default": (_check_expand, _lower_expand),
    "aten.expand.default": (_check_expand, _lower_expand),
    "aten.slice_copy.Tensor": (_check_slice, _lower_slice),
    "aten.slice.Tensor": (_check_slice, _lower_slice),
    "aten.select_copy.int": (_check_select, _lower_select),
    "aten.select.int": (_check_select, _lower_select),
    "aten.cat.default": (_check_cat, _lower_cat),
    "aten.embedding.default": (_check_embedding, _lower_embedding),
    "aten.scaled_dot_product_attention.default": (_check_sdpa, _lower_sdpa),
    "aten._softmax.default": (_check_softmax, _lower_softmax),
    "aten.softmax.int": (_check_softmax, _lower_softmax),
    "aten.native_layer_norm.default": (_check_layer_norm, _lower_layer_norm),
    "aten.layer_norm.default": (_check_layer_norm, _lower_layer_norm),
    "getitem": (_check_getitem, _lower_getitem),
}
for _name, _opcode in (("add", Op.ADD), ("sub", Op.SUB), ("mul", Op.MUL), ("div", Op.DIV)):
    for _overload_name in ("Tensor", "Scalar"):
        _TABLE[f"aten.{_name}.{_overload_name}"] = (_check_binary, _lower_binary(_opcode))
_TABLE["aten.div.Tensor_mode"] = (_check_binary, _lower_binary(Op.DIV))
_TABLE["aten.div.Scalar_mode"] = (_check_binary, _lower_binary(Op.DIV))
for _name in _RESHAPE_OPS:
    _TABLE[_name] = (_check_layout, _lower_reshape)
for _name in _CLONE_OPS:
    _TABLE[_name] = (_check_clone, _lower_reshape)
for _name in _PERMUTE_OPS:
    _TABLE[_name] = (_check_layout, _lower_permute)
for _name in _CAST_OPS:
    _TABLE[_name] = (_check_cast, _lower_cast)
_TABLE_MULTI: Dict[str, Callable[[Node, GraphContext], Optional[str]]] = {
    name: _check_split for name in _SPLIT_OPS}
for _name in _SPLIT_OPS:
    _TABLE[_name] = (_check_multi_output, _lower_nothing)


def supported_op_names() -> List[str]:
    """Every operator name (as `op_name` spells it) that Ember may claim, beside constant
    folds of any deterministic op and the SymInt arithmetic of dynamic shapes."""
    return sorted(_TABLE)


def unsupported_reason(node: Node, ctx: GraphContext) -> Optional[str]:
    """None if Ember lowers `node` (a call_function of an ATen or edge graph), else why not."""
    name = op_name(node)
    if name is None:
        return f"{node.op} {node.target} is not an operator call"
    try:
        if ctx.is_constant_valued(node):
            return None  # folded at lowering
        if name.startswith("sym.") or name in _SYM_SIZE_OPS:
            return _check_symint(node, ctx)
        entry = _TABLE.get(name)
        if entry is None:
            return f"{name} is not an Ember op"
        return entry[0](node, ctx)
    except (IndexError, KeyError, TypeError, AttributeError, ValueError) as e:
        return f"{name}: unexpected arguments ({type(e).__name__}: {e})"


def lower_to_plan(edge_program: ExportedProgram,
                  lower_bounds: Optional[Dict[str, int]] = None) -> bytes:
    """Lower an edge-dialect subgraph (what ExecuTorch hands EmberBackend.preprocess) to
    plan bytes; lower_bounds: the exported program's lower bounds of dynamic dims below 2,
    by symbol name (_Lowerer._lower_bound). Raises EmberLoweringError naming the node it
    cannot lower."""
    return _Lowerer(edge_program, lower_bounds).run()

"""What Ember claims and what plan it writes for it.

Each test exports a tiny model, runs to_edge_transform_and_lower with EmberPartitioner,
and checks (1) which ops landed in an EmberBackend delegate and which stayed outside, and
(2) the plan bytes of the delegate, decoded here from docs/plan-format.md with struct (not
with ember's own writer), for op codes, attributes and weight layouts.
"""

from __future__ import annotations

import math
import operator
import struct
from dataclasses import dataclass, field
from typing import Dict, List

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.exir")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from executorch.exir import to_edge, to_edge_transform_and_lower  # noqa: E402
from executorch.exir.lowered_backend_module import LoweredBackendModule  # noqa: E402
from torch.export import Dim  # noqa: E402

import ember  # noqa: E402  (tests/conftest.py points this at python/ember)
from ember.lowering import lower_to_plan  # noqa: E402
from ember.partitioner import EmberPartitioner  # noqa: E402

# ---- plan decoding, straight from docs/plan-format.md ----------------------------------

OPS = {1: "LINEAR", 2: "MATMUL", 3: "RELU", 4: "GELU", 5: "SIGMOID", 6: "TANH", 7: "SILU",
       8: "ADD", 9: "SUB", 10: "MUL", 11: "DIV", 12: "RESHAPE", 13: "PERMUTE", 14: "SOFTMAX",
       15: "LAYER_NORM", 16: "COPY", 17: "CONV2D", 18: "MAX_POOL2D", 19: "AVG_POOL2D",
       20: "ADAPTIVE_AVG_POOL2D", 21: "REDUCE_SUM", 22: "REDUCE_MEAN", 23: "REDUCE_MAX",
       24: "POW", 25: "NEG", 26: "EXP", 27: "LOG", 28: "SQRT", 29: "RSQRT", 30: "ABS",
       31: "RECIPROCAL", 32: "CLAMP", 33: "WHERE", 34: "EXPAND", 35: "SLICE", 36: "CAT",
       37: "EMBEDDING", 38: "SDPA", 39: "CAST", 40: "MAXIMUM", 41: "MINIMUM"}
DTYPES = {1: torch.float32, 2: torch.float16, 3: torch.bfloat16, 4: torch.int64, 5: torch.int32,
          6: torch.bool}
STORAGE = {0: "input", 1: "output", 2: "intermediate", 3: "constant"}


@dataclass
class PlanTensor:
    name: str
    dtype: int
    storage: str
    dims: List[int]
    data: bytes = b""
    symbols: List[int] = field(default_factory=list)  # per dim: 0 static, k symbol k - 1
    data_offset: int = 0  # intermediates: in the arena; constants: in their section
    nbytes: int = 0

    def value(self) -> "torch.Tensor":
        t = torch.frombuffer(bytearray(self.data), dtype=DTYPES[self.dtype]) \
            if self.data else torch.empty(0, dtype=DTYPES[self.dtype])
        return t.reshape(self.dims)


@dataclass
class PlanOp:
    name: str
    inputs: List[int]
    outputs: List[int]
    attrs: List[int]


@dataclass
class Plan:
    tensors: List[PlanTensor] = field(default_factory=list)
    ops: List[PlanOp] = field(default_factory=list)
    inputs: List[int] = field(default_factory=list)
    outputs: List[int] = field(default_factory=list)
    symbols: List[tuple] = field(default_factory=list)  # (min, max) per symbol
    arena_size: int = 0

    def op_names(self) -> List[str]:
        return [op.name for op in self.ops]

    def the(self, name: str) -> PlanOp:
        found = [op for op in self.ops if op.name == name]
        assert len(found) == 1, f"expected one {name} in {self.op_names()}"
        return found[0]


def decode_plan(blob: bytes) -> Plan:
    (magic, version, header_size, plan_size, flags, tensor_rec, op_rec, num_tensors, num_ops,
     num_inputs, num_outputs, num_operands, arena_size) = struct.unpack_from(
        "<8sIIQIIIIIIIIQ", blob, 0)
    assert magic == b"EMBRPLAN"
    assert version == 1 and header_size >= 176 and flags == 0
    assert plan_size == len(blob)
    sections = [struct.unpack_from("<QQ", blob, 64 + 16 * i)
                for i in range(8 if header_size >= 192 else 7)]
    strings, tensors, io, ops, operands, attrs, constants = sections[:7]
    assert constants[0] % 64 == 0
    plan = Plan(arena_size=arena_size)
    if len(sections) == 8:
        off, size = sections[7]
        plan.symbols = [struct.unpack_from("<qq", blob, off + 16 * k) for k in range(size // 16)]
    for i in range(num_tensors):
        (name_off, name_len, dtype, storage, rank, _, _, data_off, nbytes, *dims) = \
            struct.unpack_from("<IIBBBBIQQ8q", blob, tensors[0] + i * tensor_rec)
        name = blob[strings[0] + name_off:strings[0] + name_off + name_len].decode()
        t = PlanTensor(name, dtype, STORAGE[storage], list(dims[:rank]), data_offset=data_off,
                       nbytes=nbytes)
        if tensor_rec >= 104:
            t.symbols = list(blob[tensors[0] + i * tensor_rec + 96:][:rank])
        if t.storage == "constant":
            start = constants[0] + data_off
            t.data = blob[start:start + nbytes]
        plan.tensors.append(t)
    io_words = struct.unpack_from(f"<{num_inputs + num_outputs}I", blob, io[0])
    plan.inputs, plan.outputs = list(io_words[:num_inputs]), list(io_words[num_inputs:])
    operand_words = struct.unpack_from(f"<{num_operands}I", blob, operands[0])
    attr_words = struct.unpack_from(f"<{attrs[1] // 8}q", blob, attrs[0])
    for i in range(num_ops):
        opcode, first, n_in, n_out, first_attr, n_attr, _ = struct.unpack_from(
            "<IIHHIII", blob, ops[0] + i * op_rec)
        ids = list(operand_words[first:first + n_in + n_out])
        plan.ops.append(PlanOp(OPS[opcode], ids[:n_in], ids[n_in:],
                               list(attr_words[first_attr:first_attr + n_attr])))
    return plan


def f64_bits(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


def run_plan(plan: Plan, inputs: List["torch.Tensor"]) -> List["torch.Tensor"]:
    """Runs a decoded plan with PyTorch ops, following the semantics table of
    docs/plan-format.md: a check of the lowering's meaning that needs no runtime."""
    env: Dict[int, torch.Tensor] = {}
    for i, t in enumerate(plan.tensors):
        if t.storage == "constant":
            env[i] = t.value()
    for index, value in zip(plan.inputs, inputs):
        env[index] = value
    unary = {"RELU": torch.relu, "SIGMOID": torch.sigmoid, "TANH": torch.tanh,
             "SILU": F.silu, "COPY": torch.clone}
    binary = {"ADD": torch.add, "SUB": torch.sub, "MUL": torch.mul, "DIV": torch.div}
    for op in plan.ops:
        ins = [env[i] for i in op.inputs]
        out = plan.tensors[op.outputs[0]]
        if op.name == "LINEAR":
            x, w = ins[0], ins[1]
            y = F.linear(x, w) if op.attrs[0] == 0 else x @ w
            y = y + ins[2] if len(ins) == 3 else y
        elif op.name == "MATMUL":
            y = torch.matmul(*ins)
        elif op.name in unary:
            y = unary[op.name](ins[0])
        elif op.name == "GELU":
            y = F.gelu(ins[0], approximate="tanh" if op.attrs[0] else "none")
        elif op.name in binary:
            y = binary[op.name](*ins)
        elif op.name == "RESHAPE":
            y = ins[0].reshape(out.dims)
        elif op.name == "PERMUTE":
            y = ins[0].permute(op.attrs)
        elif op.name == "SOFTMAX":
            y = torch.softmax(ins[0], op.attrs[0])
        elif op.name == "LAYER_NORM":
            nd, eps_bits, has_w, has_b = op.attrs
            eps = struct.unpack("<d", struct.pack("<q", eps_bits))[0]
            rest = iter(ins[1:])
            w = next(rest) if has_w else None
            b = next(rest) if has_b else None
            y = F.layer_norm(ins[0], ins[0].shape[len(ins[0].shape) - nd:], w, b, eps)
        else:
            y = run_new_op(op, ins, out)
        assert list(y.shape) == out.dims and y.dtype == DTYPES[out.dtype], op
        env[op.outputs[0]] = y
    return [env[i] for i in plan.outputs]


def f64(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<q", bits))[0]


def run_new_op(op: PlanOp, ins: List["torch.Tensor"], out: PlanTensor) -> "torch.Tensor":
    """The ops of docs/plan-format.md from 17 on, with PyTorch."""
    a = op.attrs
    unary = {"NEG": torch.neg, "EXP": torch.exp, "LOG": torch.log, "SQRT": torch.sqrt,
             "RSQRT": torch.rsqrt, "ABS": torch.abs, "RECIPROCAL": torch.reciprocal}
    binary = {"POW": torch.pow, "MAXIMUM": torch.maximum, "MINIMUM": torch.minimum}
    reduce = {"REDUCE_SUM": torch.sum, "REDUCE_MEAN": torch.mean, "REDUCE_MAX": torch.amax}
    if op.name == "CONV2D":
        return F.conv2d(ins[0], ins[1], ins[2] if len(ins) == 3 else None, a[0:2], a[2:4],
                        a[4:6], a[6])
    if op.name == "MAX_POOL2D":
        return F.max_pool2d(ins[0], a[0:2], a[2:4], a[4:6], a[6:8], bool(a[8]))
    if op.name == "AVG_POOL2D":
        return F.avg_pool2d(ins[0], a[0:2], a[2:4], a[4:6], bool(a[6]), bool(a[7]), a[8] or None)
    if op.name == "ADAPTIVE_AVG_POOL2D":
        return F.adaptive_avg_pool2d(ins[0], out.dims[2:])
    if op.name in reduce:
        dims = [d for d in range(ins[0].dim()) if a[0] >> d & 1]
        return reduce[op.name](ins[0], dims, keepdim=bool(a[1]))
    if op.name in unary:
        return unary[op.name](ins[0])
    if op.name in binary:
        return binary[op.name](*ins)
    if op.name == "CLAMP":
        return torch.clamp(ins[0], f64(a[0]), f64(a[1]))
    if op.name == "WHERE":
        return torch.where(*ins)
    if op.name == "EXPAND":
        return ins[0].expand(out.dims).clone()
    if op.name == "SLICE":
        dim, start, step = a
        return ins[0].narrow(dim, start, ins[0].shape[dim] - start)[
            (slice(None),) * dim + (slice(None, None, step),)][
            (slice(None),) * dim + (slice(0, out.dims[dim]),)].clone()
    if op.name == "CAT":
        return torch.cat(ins, a[0])
    if op.name == "EMBEDDING":
        return F.embedding(ins[1], ins[0])
    if op.name == "SDPA":
        mask = ins[3] if len(ins) == 4 else None
        return F.scaled_dot_product_attention(ins[0], ins[1], ins[2], attn_mask=mask,
                                              is_causal=bool(a[0]), scale=f64(a[1]))
    if op.name == "CAST":
        return ins[0].to(DTYPES[out.dtype])
    raise AssertionError(op.name)


# ---- lowering helpers ---------------------------------------------------------------------


@dataclass
class Lowered:
    graph_module: "torch.fx.GraphModule"
    delegates: List[LoweredBackendModule]
    plans: List[Plan]
    outside: List[str]  # ops left to ExecuTorch's kernels, as "aten.cumsum.default"
    user_inputs: List[str] = field(default_factory=list)  # placeholder names of the inputs

    @property
    def plan(self) -> Plan:
        assert len(self.plans) == 1, f"expected one Ember delegate, got {len(self.plans)}"
        return self.plans[0]

    def all_plan_ops(self) -> List[str]:
        return [name for plan in self.plans for name in plan.op_names()]


def _edge_op_name(node) -> str:
    target = getattr(node.target, "_op", node.target)
    return str(target)


def lower(model, inputs, dynamic_shapes=None, **partitioner_kwargs) -> Lowered:
    ep = torch.export.export(model.eval(), tuple(inputs), dynamic_shapes=dynamic_shapes)
    edge = to_edge_transform_and_lower(ep, partitioner=[EmberPartitioner(**partitioner_kwargs)])
    gm = edge.exported_program().graph_module
    delegates, outside = [], []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is torch.ops.higher_order.executorch_call_delegate:
            module = getattr(gm, node.args[0].target)
            assert isinstance(module, LoweredBackendModule)
            delegates.append(module)
        elif _edge_op_name(node) != "<built-in function getitem>":
            outside.append(_edge_op_name(node))
    ember_delegates = [d for d in delegates if d.backend_id == "EmberBackend"]
    assert len(ember_delegates) == len(delegates)
    plans = [decode_plan(bytes(d.processed_bytes)) for d in ember_delegates]
    user_inputs = list(edge.exported_program().graph_signature.user_inputs)
    return Lowered(gm, ember_delegates, plans, outside, user_inputs)


def assert_plan_matches_eager(model, inputs, atol=1e-5, rtol=1e-5) -> Lowered:
    """For a model Ember takes whole (one delegate, nothing outside): the plan, run by
    run_plan on the delegate's arguments, gives the model's outputs."""
    low = lower(model, inputs)
    assert low.outside == [] and len(low.plans) == 1
    gm = low.graph_module
    by_name = dict(zip(low.user_inputs, inputs))
    call = next(n for n in gm.graph.nodes
                if n.target is torch.ops.higher_order.executorch_call_delegate)
    got = run_plan(low.plan, [by_name[a.name] for a in call.args[1:]])
    with torch.no_grad():
        expected = model(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    output_node = next(n for n in gm.graph.nodes if n.op == "output")
    for value, node in zip(expected, output_node.args[0]):
        assert node.target is operator.getitem and node.args[0] is call
        torch.testing.assert_close(got[node.args[1]], value, atol=atol, rtol=rtol)
    return low


def delegated(lowered: Lowered) -> bool:
    return any(node.op == "call_function"
               and node.target is torch.ops.higher_order.executorch_call_delegate
               for node in lowered.graph_module.graph.nodes)


class Fn(nn.Module):
    def __init__(self, fn, **params):
        super().__init__()
        self.fn = fn
        for name, value in params.items():
            setattr(self, name, nn.Parameter(value, requires_grad=False))

    def forward(self, *args):
        return self.fn(self, *args)


def x_(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


# ---- the backend id -------------------------------------------------------------------


def test_backend_id():
    assert ember.BACKEND_ID == "EmberBackend"
    assert ember.EmberBackend.__name__ == "EmberBackend"
    assert EmberPartitioner().delegation_spec.backend_id == "EmberBackend"


# ---- matrix products ------------------------------------------------------------------


def test_linear_is_kept_whole_with_weight_layout_0():
    lin = nn.Linear(8, 5)
    low = lower(lin, [x_(3, 8)])
    assert low.outside == []
    op = low.plan.the("LINEAR")
    assert op.attrs == [0]
    x, w, b = (low.plan.tensors[i] for i in op.inputs)
    assert (x.storage, w.storage, b.storage) == ("input", "constant", "constant")
    assert w.dims == [5, 8] and b.dims == [5]
    assert torch.equal(w.value(), lin.weight.detach())
    assert torch.equal(b.value(), lin.bias.detach())
    assert low.plan.tensors[op.outputs[0]].storage == "output"


def test_linear_rank3_without_bias_stays_one_linear():
    low = lower(nn.Linear(8, 5, bias=False), [x_(2, 3, 8)])
    assert low.plan.op_names() == ["LINEAR"]
    op = low.plan.the("LINEAR")
    assert len(op.inputs) == 2 and op.attrs == [0]
    assert low.plan.tensors[op.outputs[0]].dims == [2, 3, 5]


def test_addmm_of_permuted_constant_folds_to_layout_0_on_the_original_weight():
    w = torch.randn(5, 8)
    model = Fn(lambda m, x: torch.addmm(m.b, x, m.w.t()), w=w, b=torch.randn(5))
    low = lower(model, [x_(3, 8)])
    assert low.outside == []
    assert low.plan.op_names() == ["LINEAR"]  # no PERMUTE: folded
    op = low.plan.the("LINEAR")
    assert op.attrs == [0]
    weight = low.plan.tensors[op.inputs[1]]
    assert weight.dims == [5, 8] and torch.equal(weight.value(), w)


def test_addmm_of_kn_weight_is_layout_1():
    w = torch.randn(8, 5)
    model = Fn(lambda m, x: torch.addmm(m.b, x, m.w), w=w, b=torch.randn(5))
    low = lower(model, [x_(3, 8)])
    op = low.plan.the("LINEAR")
    assert op.attrs == [1]
    weight = low.plan.tensors[op.inputs[1]]
    assert weight.dims == [8, 5] and torch.equal(weight.value(), w)
    assert low.plan.tensors[op.inputs[2]].dims == [5]


def test_addmm_with_row_bias_is_flattened():
    model = Fn(lambda m, x: torch.addmm(m.b, x, m.w), w=torch.randn(8, 5), b=torch.randn(1, 5))
    low = lower(model, [x_(3, 8)])
    op = low.plan.the("LINEAR")
    assert low.plan.tensors[op.inputs[2]].dims == [5]


def test_addmm_with_beta_is_not_claimed():
    model = Fn(lambda m, x: torch.addmm(m.b, x, m.w, beta=0.5), w=torch.randn(8, 5),
               b=torch.randn(5))
    low = lower(model, [x_(3, 8)])
    assert not delegated(low)
    assert "aten.addmm.default" in low.outside


def test_decomposed_linear_is_claimed_as_addmm_folded_to_layout_0():
    # Told not to take aten.linear, Ember lets it decompose into permute_copy + addmm and
    # claims those, folding the weight's permute.
    lin = nn.Linear(8, 5)
    low = lower(lin, [x_(3, 8)], skip_ops={"aten.linear.default"})
    assert low.outside == []
    assert low.plan.op_names() == ["LINEAR"]
    op = low.plan.the("LINEAR")
    assert op.attrs == [0]
    assert torch.equal(low.plan.tensors[op.inputs[1]].value(), lin.weight.detach())


def test_mm_with_constant_weight_is_layout_1_without_bias():
    model = Fn(lambda m, x: torch.mm(x, m.w), w=torch.randn(8, 5))
    low = lower(model, [x_(3, 8)])
    op = low.plan.the("LINEAR")
    assert op.attrs == [1] and len(op.inputs) == 2
    assert low.plan.tensors[op.inputs[1]].storage == "constant"


def test_mm_of_two_inputs_is_linear_layout_1():
    low = lower(Fn(lambda m, a, b: torch.mm(a, b)), [x_(3, 8), x_(8, 4)])
    op = low.plan.the("LINEAR")
    assert op.attrs == [1]
    assert [low.plan.tensors[i].storage for i in op.inputs] == ["input", "input"]


def test_mm_of_transposed_input_uses_layout_0_on_the_source():
    low = lower(Fn(lambda m, a, b: torch.mm(a, b.t())), [x_(3, 8), x_(4, 8)])
    assert low.plan.op_names() == ["LINEAR"]
    op = low.plan.the("LINEAR")
    assert op.attrs == [0]
    assert low.plan.tensors[op.inputs[1]].dims == [4, 8]


def test_bmm_is_matmul():
    low = lower(Fn(lambda m, a, b: torch.bmm(a, b)), [x_(2, 3, 4), x_(2, 4, 5)])
    assert low.plan.op_names() == ["MATMUL"]
    assert low.plan.tensors[low.plan.the("MATMUL").outputs[0]].dims == [2, 3, 5]


def test_broadcasting_matmul_is_kept_whole():
    low = lower(Fn(lambda m, a, b: torch.matmul(a, b)), [x_(2, 3, 4), x_(4, 5)])
    assert low.outside == []
    assert low.plan.op_names() == ["MATMUL"]


def test_matmul_with_permuted_constant_folds_the_permute_into_the_constant():
    w = torch.randn(5, 4)
    low = lower(Fn(lambda m, a: torch.matmul(a, m.w.t()), w=w), [x_(2, 3, 4)])
    assert "PERMUTE" not in low.plan.op_names()
    op = low.plan.the("MATMUL")
    const = low.plan.tensors[op.inputs[1]]
    assert const.storage == "constant" and torch.equal(const.value(), w.t())


def test_matmul_with_a_vector_is_not_kept_whole():
    # MATMUL needs rank >= 2; matrix @ vector decomposes (into mul + sum), which Ember
    # takes as MUL and REDUCE_SUM.
    low = lower(Fn(lambda m, a, b: torch.matmul(a, b)), [x_(3, 4), x_(4)])
    assert "MATMUL" not in low.all_plan_ops()
    assert low.outside == []
    assert {"MUL", "REDUCE_SUM"} <= set(low.all_plan_ops())


# ---- elementwise ----------------------------------------------------------------------


@pytest.mark.parametrize("fn,name,attrs", [
    (torch.relu, "RELU", []),
    (torch.sigmoid, "SIGMOID", []),
    (torch.tanh, "TANH", []),
    (F.silu, "SILU", []),
    (F.gelu, "GELU", [0]),
    (lambda x: F.gelu(x, approximate="tanh"), "GELU", [1]),
])
def test_unary(fn, name, attrs):
    low = lower(Fn(lambda m, x: fn(x)), [x_(2, 7)])
    assert low.outside == []
    assert low.plan.op_names() == [name]
    assert low.plan.the(name).attrs == attrs


@pytest.mark.parametrize("fn,name", [
    (torch.add, "ADD"), (torch.sub, "SUB"), (torch.mul, "MUL"), (torch.div, "DIV"),
])
def test_binary_tensor_with_broadcast(fn, name):
    low = lower(Fn(lambda m, a, b: fn(a, b)), [x_(2, 3, 4), x_(3, 1)])
    assert low.plan.op_names() == [name]
    op = low.plan.the(name)
    assert [low.plan.tensors[i].dims for i in op.inputs] == [[2, 3, 4], [3, 1]]
    assert low.plan.tensors[op.outputs[0]].dims == [2, 3, 4]


@pytest.mark.parametrize("fn,name,value", [
    (lambda x: x + 2.5, "ADD", 2.5),
    (lambda x: x - 1.5, "SUB", 1.5),
    (lambda x: x * 3, "MUL", 3.0),  # an int scalar: cast folded at lowering
    (lambda x: x / 4.0, "DIV", 4.0),
    (lambda x: torch.ops.aten.add.Scalar(x, 0.5), "ADD", 0.5),
    (lambda x: torch.ops.aten.mul.Scalar(x, 2), "MUL", 2.0),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_scalar_operand_becomes_a_0d_constant(fn, name, value, dtype):
    low = lower(Fn(lambda m, x: fn(x)), [x_(2, 3, dtype=dtype)])
    assert low.outside == []
    assert low.plan.op_names() == [name]
    const = low.plan.tensors[low.plan.the(name).inputs[1]]
    assert const.storage == "constant" and const.dims == []
    assert DTYPES[const.dtype] == dtype
    assert const.value().item() == value


def test_reverse_scalar_sub():
    low = lower(Fn(lambda m, x: 2 - x), [x_(2, 3)])
    op = low.plan.the("SUB")
    a, b = (low.plan.tensors[i] for i in op.inputs)
    assert a.storage == "constant" and a.value().item() == 2.0 and b.storage == "input"


@pytest.mark.parametrize("fn,op", [
    (lambda a, b: torch.add(a, b, alpha=2), "aten.add.Tensor"),
    (lambda a, b: torch.sub(a, b, alpha=2), "aten.sub.Tensor"),
    (lambda a, b: torch.div(a, b, rounding_mode="floor"), "aten.div.Tensor_mode"),
])
def test_binary_variants_ember_does_not_run_stay_outside(fn, op):
    low = lower(Fn(lambda m, a, b: fn(a, b)), [x_(2, 3), x_(2, 3)])
    assert op in low.outside


def test_constant_tensor_operand_of_another_float_dtype_is_cast():
    # A 0-d float32 constant in a float16 op: PyTorch computes in float16.
    model = Fn(lambda m, x: x * m.s, s=torch.tensor(0.25))
    low = lower(model, [x_(2, 3, dtype=torch.float16)])
    const = low.plan.tensors[low.plan.the("MUL").inputs[1]]
    assert DTYPES[const.dtype] == torch.float16 and const.value().item() == 0.25


# ---- layout ops -----------------------------------------------------------------------


@pytest.mark.parametrize("fn,out_dims", [
    (lambda x: x.view(6, 4), [6, 4]),
    (lambda x: x.reshape(-1), [24]),
    (lambda x: x.flatten(1), [2, 12]),
    (lambda x: x.unsqueeze(1), [2, 1, 3, 4]),
    (lambda x: x[:, :1].squeeze(1), None),  # slice stays outside; squeeze is claimed
    (lambda x: x.clone(), [2, 3, 4]),
])
def test_reshapes(fn, out_dims):
    low = lower(Fn(lambda m, x: torch.relu(fn(x))), [x_(2, 3, 4)])
    assert "RESHAPE" in low.all_plan_ops()
    if out_dims is not None:
        reshape = low.plan.the("RESHAPE")
        assert low.plan.tensors[reshape.outputs[0]].dims == out_dims


def _views(plan: Plan) -> Dict[int, int]:
    """Per intermediate written by a RESHAPE of an intermediate at the same offset (a
    view, docs/plan-format.md "Memory plan"): the first tensor of its chain of views."""
    root: Dict[int, int] = {}
    for op in plan.ops:
        x, y = op.inputs[0], op.outputs[0]
        tx, ty = plan.tensors[x], plan.tensors[y]
        if (op.name == "RESHAPE" and tx.storage == ty.storage == "intermediate"
                and tx.data_offset == ty.data_offset):
            assert tx.nbytes == ty.nbytes
            root[y] = root.get(x, x)
    return root


def _assert_memory_plan(plan: Plan) -> None:
    """The verifier's memory rule: intermediates inside the arena, and no two live at once
    on shared bytes unless they are views of one tensor."""
    life: Dict[int, List[int]] = {}
    for i, op in enumerate(plan.ops):
        for t in op.inputs:
            if t in life:
                life[t][1] = i
        for t in op.outputs:
            if plan.tensors[t].storage == "intermediate":
                life[t] = [i, i]
    root = _views(plan)
    items = sorted(life.items())
    for a, (a0, a1) in items:
        ta = plan.tensors[a]
        assert ta.data_offset + ta.nbytes <= plan.arena_size
        for b, (b0, b1) in items:
            tb = plan.tensors[b]
            if b <= a or root.get(a, a) == root.get(b, b) or not ta.nbytes or not tb.nbytes:
                continue
            if a0 <= b1 and b0 <= a1:
                assert (ta.data_offset + ta.nbytes <= tb.data_offset
                        or tb.data_offset + tb.nbytes <= ta.data_offset), (ta.name, tb.name)


def test_reshape_chain_between_intermediates_shares_the_input_bytes():
    def chain(m, x):
        h = torch.relu(x)
        t = torch.tanh(h.reshape(6, 4).reshape(24))  # a reshape of a reshape
        return t.reshape(2, 3, 4) + h  # h is read after its views, t's view after t
    low = assert_plan_matches_eager(Fn(chain), [x_(2, 3, 4)])
    plan = low.plan
    reshapes = [op for op in plan.ops if op.name == "RESHAPE"]
    assert len(reshapes) == 3
    for op in reshapes:
        x, y = plan.tensors[op.inputs[0]], plan.tensors[op.outputs[0]]
        assert x.storage == y.storage == "intermediate"
        assert (y.data_offset, y.nbytes) == (x.data_offset, x.nbytes), (x.name, y.name)
    relu, tanh = plan.the("RELU").outputs[0], plan.the("TANH").outputs[0]
    assert sorted(_views(plan).values()) == [relu, relu, tanh]
    # tanh reads the chain, so it cannot land on it; nothing else shares bytes while live.
    assert plan.tensors[tanh].data_offset != plan.tensors[relu].data_offset
    _assert_memory_plan(plan)


def test_reshape_into_a_method_output_is_a_copy():
    # The control: the same reshape writing a method output, whose memory the caller binds.
    low = assert_plan_matches_eager(Fn(lambda m, x: torch.relu(x).reshape(24)), [x_(2, 3, 4)])
    plan = low.plan
    op = plan.the("RESHAPE")
    x, y = plan.tensors[op.inputs[0]], plan.tensors[op.outputs[0]]
    assert (x.storage, y.storage) == ("intermediate", "output")
    assert _views(plan) == {}
    _assert_memory_plan(plan)


@pytest.mark.parametrize("fn,perm", [
    (lambda x: x.permute(2, 0, 1), [2, 0, 1]),
    (lambda x: x.transpose(0, -1), [2, 1, 0]),
    (lambda x: x.permute(-1, -2, -3), [2, 1, 0]),
])
def test_permutes(fn, perm):
    low = lower(Fn(lambda m, x: torch.relu(fn(x))), [x_(2, 3, 4)])
    assert low.plan.the("PERMUTE").attrs == perm


@pytest.mark.parametrize("fn,shape", [
    (lambda x: x.transpose(0, 1), (1, 5, 4)),     # a batch of one, batch-first -> seq-first
    (lambda x: x.permute(1, 2, 0, 3), (1, 3, 1, 4)),  # only size-1 dims move
])
def test_permute_of_size_one_dims_is_a_reshape(fn, shape):
    low = lower(Fn(lambda m, x: torch.relu(fn(x))), [x_(*shape)])
    assert "PERMUTE" not in low.all_plan_ops()
    assert "RESHAPE" in low.all_plan_ops()
    # The control: the same permute with no size-1 dims moves elements.
    wider = tuple(d if d != 1 else 2 for d in shape)
    control = lower(Fn(lambda m, x: torch.relu(fn(x))), [x_(*wider)])
    assert "PERMUTE" in control.all_plan_ops()


def test_t_is_permute():
    low = lower(Fn(lambda m, x: torch.relu(x.t())), [x_(3, 4)])
    assert low.plan.the("PERMUTE").attrs == [1, 0]


# ---- softmax and layer norm -----------------------------------------------------------


@pytest.mark.parametrize("dim,expected", [(-1, 2), (1, 1), (0, 0)])
def test_softmax(dim, expected):
    low = lower(Fn(lambda m, x: torch.softmax(x, dim)), [x_(2, 3, 4)])
    assert low.plan.op_names() == ["SOFTMAX"]
    assert low.plan.the("SOFTMAX").attrs == [expected]


def test_softmax_to_another_dtype_is_a_cast_then_softmax():
    low = lower(Fn(lambda m, x: torch.softmax(x, -1, dtype=torch.float32)),
                [x_(2, 3, dtype=torch.float16)])
    assert low.outside == []
    assert low.plan.op_names() == ["CAST", "SOFTMAX"]
    op = low.plan.the("SOFTMAX")
    assert DTYPES[low.plan.tensors[op.inputs[0]].dtype] == torch.float32


def test_layer_norm():
    ln = nn.LayerNorm([3, 4], eps=1e-3)
    low = lower(ln, [x_(2, 3, 4)])
    assert low.outside == []
    op = low.plan.the("LAYER_NORM")
    assert op.attrs == [2, f64_bits(1e-3), 1, 1]
    assert [low.plan.tensors[i].storage for i in op.inputs] == ["input", "constant", "constant"]
    assert low.plan.tensors[op.inputs[1]].dims == [3, 4]


def test_layer_norm_without_affine():
    low = lower(nn.LayerNorm(4, elementwise_affine=False), [x_(2, 4)])
    op = low.plan.the("LAYER_NORM")
    assert op.attrs == [1, f64_bits(1e-5), 0, 0] and len(op.inputs) == 1


def test_native_layer_norm_with_mean_used_is_not_claimed():
    def fn(m, x):
        y, mean, rstd = torch.ops.aten.native_layer_norm(x, [4], None, None, 1e-5)
        return y, mean
    low = lower(Fn(fn), [x_(2, 4)])
    assert "aten.native_layer_norm.default" in low.outside


# ---- dtypes, shapes, and what stays outside --------------------------------------------


@pytest.mark.parametrize("dtype,code", [(torch.float32, 1), (torch.float16, 2),
                                        (torch.bfloat16, 3)])
def test_float_dtypes(dtype, code):
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU()).to(dtype)
    low = lower(model, [x_(2, 8, dtype=dtype)])
    assert low.plan.op_names() == ["LINEAR", "GELU"]
    assert {t.dtype for t in low.plan.tensors} == {code}


def test_float64_is_not_claimed():
    low = lower(nn.Sequential(nn.Linear(8, 8), nn.ReLU()).double(),
                [x_(2, 8, dtype=torch.float64)])
    assert not delegated(low)


def test_integer_ops_are_not_claimed():
    low = lower(Fn(lambda m, a, b: a * b + 1), [torch.arange(6).reshape(2, 3),
                                                 torch.arange(6).reshape(2, 3)])
    assert not delegated(low)


def test_mixed_dtype_inputs_are_cast_in_the_plan():
    # Type promotion's cast of a non-constant tensor is a CAST op.
    low = lower(Fn(lambda m, a, b: a + b), [x_(2, 3), x_(2, 3, dtype=torch.float16)])
    assert low.outside == []
    assert low.plan.op_names() == ["CAST", "ADD"]
    op = low.plan.the("ADD")
    assert {low.plan.tensors[i].dtype for i in op.inputs + op.outputs} == {1}


def test_dynamic_batch_is_claimed_with_its_bounds():
    batch = Dim("batch", min=2, max=64)
    low = lower(nn.Sequential(nn.Linear(8, 8), nn.ReLU()), [x_(4, 8)],
                dynamic_shapes=({0: batch},))
    assert low.outside == []
    plan = low.plan
    assert plan.symbols == [(2, 64)]
    x, y = plan.tensors[plan.inputs[0]], plan.tensors[plan.outputs[0]]
    assert (x.dims, x.symbols) == ([64, 8], [1, 0])  # recorded at the largest batch
    assert (y.dims, y.symbols) == ([64, 8], [1, 0])


def test_flattened_dynamic_batch_is_a_multiple_of_the_symbol():
    class M(nn.Module):
        def forward(self, x):
            b, t, d = x.shape
            return torch.relu(x.reshape(b * t, d)).reshape(b, t, d).sum(1)

    low = lower(M(), [x_(4, 3, 8)], dynamic_shapes=({0: Dim("batch", min=2, max=16)},))
    assert low.outside == []
    flat = [t for t in low.plan.tensors if t.dims == [48, 8]]
    assert flat and all(t.symbols == [1, 0] for t in flat)  # 3 * s0, at s0 = 16


def test_unbounded_dynamic_dims_are_not_claimed():
    low = lower(nn.Sequential(nn.Linear(8, 8), nn.ReLU()), [x_(4, 8)],
                dynamic_shapes=({0: Dim("batch", min=2)},))
    assert not delegated(low)


@pytest.mark.parametrize("fn,op", [
    (lambda x: torch.cumsum(x, 0), "aten.cumsum.default"),
    (torch.sin, "aten.sin.default"),
])
def test_unsupported_op_stays_outside_between_two_delegates(fn, op):
    model = nn.Sequential(nn.Linear(8, 8), Fn(lambda m, x: fn(x)), nn.Linear(8, 4), nn.ReLU())
    low = lower(model, [x_(2, 8)])
    assert low.outside == [op]
    assert len(low.plans) == 2
    assert low.plans[0].op_names() == ["LINEAR"]
    assert low.plans[1].op_names() == ["LINEAR", "RELU"]


def test_skip_ops_leaves_the_op_outside():
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))
    low = lower(model, [x_(2, 8)], skip_ops={"aten.gelu.default"})
    assert low.outside == ["aten.gelu.default"]
    assert [p.op_names() for p in low.plans] == [["LINEAR"], ["LINEAR"]]
    low = lower(model, [x_(2, 8)], skip_ops=["aten.gelu"])  # every overload
    assert low.outside == ["aten.gelu.default"]


def test_ops_to_not_decompose_keeps_only_ops_ember_claims_everywhere():
    lin = nn.Sequential(nn.Linear(8, 8), nn.SiLU())
    ep = torch.export.export(lin.eval(), (x_(2, 8),)).run_decompositions({})
    kept, filter_fn = EmberPartitioner().ops_to_not_decompose(ep)
    assert filter_fn is None
    assert set(map(str, kept)) == {"aten.linear.default", "aten.silu.default"}
    kept, _ = EmberPartitioner(skip_ops={"aten.linear.default"}).ops_to_not_decompose(ep)
    assert set(map(str, kept)) == {"aten.silu.default"}
    ep64 = torch.export.export(lin.double().eval(),
                               (x_(2, 8, dtype=torch.float64),)).run_decompositions({})
    assert EmberPartitioner().ops_to_not_decompose(ep64)[0] == []


def test_partition_with_a_boundary_dtype_a_plan_cannot_hold_is_refused(monkeypatch):
    # The node checks already refuse float64 ops; with them switched off, the partition
    # check alone must still keep a float64-crossing partition out of Ember.
    import ember.partitioner as partitioner_module

    monkeypatch.setattr(partitioner_module, "unsupported_reason", lambda node, ctx: None)
    low = lower(Fn(lambda m, a: a * 2), [torch.arange(6, dtype=torch.float64)])
    assert not delegated(low)


# ---- plan I/O: inputs in order, outputs that need a COPY --------------------------------


def test_delegate_inputs_and_outputs_are_in_call_order():
    model = Fn(lambda m, a, b, c: (torch.relu(b), torch.tanh(a) + c, torch.sigmoid(c)))
    low = lower(model, [x_(2, 3), x_(4, 5), x_(1, 3)])
    plan = low.plan
    call = next(n for n in low.graph_module.graph.nodes
                if n.target is torch.ops.higher_order.executorch_call_delegate)
    args = [list(a.meta["val"].shape) for a in call.args[1:]]
    results = sorted((u.args[1], list(u.meta["val"].shape)) for u in call.users)
    assert [plan.tensors[i].dims for i in plan.inputs] == args
    assert [plan.tensors[i].dims for i in plan.outputs] == [shape for _, shape in results]
    assert sorted(map(tuple, args)) == [(1, 3), (2, 3), (4, 5)]
    assert {plan.tensors[i].storage for i in plan.inputs} == {"input"}
    assert {plan.tensors[i].storage for i in plan.outputs} == {"output"}


def test_outputs_that_are_inputs_constants_or_repeats_are_copied():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(3), requires_grad=False)

        def forward(self, x):
            y = torch.relu(x)
            return y, x, y, self.w

    ep = to_edge(torch.export.export(M().eval(), (x_(3),))).exported_program()
    plan = decode_plan(lower_to_plan(ep))
    assert plan.op_names() == ["RELU", "COPY", "COPY", "COPY"]
    relu, *copies = plan.ops
    assert relu.outputs == [plan.outputs[0]]
    sources = [plan.tensors[c.inputs[0]].storage for c in copies]
    assert sources == ["input", "output", "constant"]
    assert [c.outputs[0] for c in copies] == plan.outputs[1:]


def test_mutated_buffer_is_a_delegate_input_not_a_constant():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("state", torch.zeros(2, 4))

        def forward(self, x):
            y = torch.relu(x + self.state)
            self.state.add_(y)
            return y

    with torch.no_grad():
        low = lower(M(), [x_(2, 4)])
    plan = low.plan  # (the mutation is a graph output; to_executorch adds the copy_)
    assert len(plan.inputs) == 2
    assert not [t for t in plan.tensors if t.storage == "constant"]


def test_shared_constant_across_two_delegates():
    lin = nn.Linear(8, 8)
    model = Fn(lambda m, x: lin(torch.cumsum(lin(x), 0)))
    model.lin = lin
    low = lower(model, [x_(2, 8)])
    assert len(low.plans) == 2
    for plan in low.plans:
        op = plan.the("LINEAR")
        assert torch.equal(plan.tensors[op.inputs[1]].value(), lin.weight.detach())


def test_transformer_block_is_one_delegate():
    class Block(nn.Module):
        def __init__(self, d=16, heads=2):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 4 * d)
            self.fc2 = nn.Linear(4 * d, d)

        def forward(self, x):
            b, s, d = x.shape
            h = self.ln1(x)
            q, k, v = self.qkv(h).reshape(b, s, 3, self.heads, d // self.heads) \
                .permute(2, 0, 3, 1, 4).unbind(0)
            att = torch.softmax(q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5, -1)
            y = (att @ v).transpose(1, 2).reshape(b, s, d)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    low = lower(Block(), [x_(2, 5, 16)])
    ops = low.all_plan_ops()
    for name in ("LAYER_NORM", "LINEAR", "MATMUL", "SOFTMAX", "GELU", "ADD", "MUL",
                 "PERMUTE", "RESHAPE"):
        assert name in ops, name
    # unbind lowers to slicing, which Ember runs as SLICE
    assert low.outside == []
    assert "SLICE" in ops


# ---- meaning: the plans compute what the models compute ---------------------------------


@pytest.mark.parametrize("make", [
    lambda: (nn.Linear(8, 5), [x_(3, 8)]),
    lambda: (nn.Linear(8, 5, bias=False), [x_(2, 3, 8)]),
    lambda: (Fn(lambda m, x: torch.addmm(m.b, x, m.w.t()), w=torch.randn(5, 8),
                b=torch.randn(5)), [x_(3, 8)]),
    lambda: (Fn(lambda m, x: torch.addmm(m.b, x, m.w), w=torch.randn(8, 5),
                b=torch.randn(1, 5)), [x_(3, 8)]),
    lambda: (Fn(lambda m, a, b: torch.mm(a, b.t())), [x_(3, 8), x_(4, 8)]),
    lambda: (Fn(lambda m, a: torch.matmul(a, m.w.t()), w=torch.randn(5, 4)), [x_(2, 3, 4)]),
    lambda: (Fn(lambda m, x: (2 - x) * 3 / 4.0 + x.permute(1, 0, 2).transpose(0, 1)),
             [x_(2, 3, 4)]),
    lambda: (Fn(lambda m, x: torch.softmax(x.reshape(3, 8), 0).t().unsqueeze(0)),
             [x_(2, 3, 4)]),
    lambda: (nn.Sequential(nn.LayerNorm([3, 4]), nn.GELU("tanh"), nn.SiLU(), nn.Tanh(),
                           nn.Sigmoid(), nn.ReLU()), [x_(2, 3, 4)]),
])
def test_plan_computes_the_model(make):
    torch.manual_seed(0)
    model, inputs = make()
    assert_plan_matches_eager(model, inputs)


def test_attention_block_plan_computes_the_model():
    class Attention(nn.Module):
        def __init__(self, d=16, heads=2):
            super().__init__()
            self.heads = heads
            self.ln = nn.LayerNorm(d)
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            b, s, d = x.shape
            h = self.ln(x)

            def split(t):
                return t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)

            q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
            att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, -1)
            y = (att @ v).transpose(1, 2).reshape(b, s, d)
            return x + self.proj(y), att

    torch.manual_seed(0)
    assert_plan_matches_eager(Attention(), [x_(2, 5, 16)])


# ---- the ops of convnets, transformers and decoders ---------------------------------------


def test_convolution_and_its_batch_norm_are_one_conv2d_with_folded_weights():
    conv, bn = nn.Conv2d(3, 4, 3, padding=1, stride=2), nn.BatchNorm2d(4)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    bn.weight.data.uniform_(0.5, 1.5)
    bn.bias.data.uniform_(-1, 1)
    model = nn.Sequential(conv, bn)
    low = assert_plan_matches_eager(model, [x_(2, 3, 8, 8)])
    assert low.plan.op_names() == ["CONV2D"]
    op = low.plan.the("CONV2D")
    assert op.attrs == [2, 2, 1, 1, 1, 1, 1]
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    w, b = (low.plan.tensors[i].value() for i in op.inputs[1:])
    torch.testing.assert_close(w, conv.weight * scale.reshape(-1, 1, 1, 1))
    torch.testing.assert_close(b, (conv.bias - bn.running_mean) * scale + bn.bias)


def test_batch_norm_after_another_op_is_a_mul_and_an_add():
    bn = nn.BatchNorm2d(3)
    bn.running_var.fill_(2.0)
    low = assert_plan_matches_eager(nn.Sequential(nn.ReLU(), bn), [x_(2, 3, 4, 4)])
    assert low.plan.op_names() == ["RELU", "MUL", "ADD"]
    assert low.plan.tensors[low.plan.the("MUL").inputs[1]].dims == [3, 1, 1]


def test_depthwise_and_one_dimensional_convolutions():
    model = nn.Sequential(nn.Conv2d(4, 4, 3, padding=2, dilation=2, groups=4), nn.ReLU())
    low = assert_plan_matches_eager(model, [x_(1, 4, 6, 6)])
    assert low.plan.the("CONV2D").attrs == [1, 1, 2, 2, 2, 2, 4]
    low = assert_plan_matches_eager(nn.Conv1d(3, 5, 3, stride=2), [x_(2, 3, 9)])
    assert low.plan.op_names() == ["RESHAPE", "CONV2D", "RESHAPE"]
    assert low.plan.the("CONV2D").attrs == [1, 2, 0, 0, 1, 1, 1]


def test_pools_and_reductions():
    model = Fn(lambda m, x: (F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
                             F.avg_pool2d(x, 2, count_include_pad=False, padding=1),
                             F.adaptive_avg_pool2d(x, (2, 3)), x.mean((2, 3), keepdim=True),
                             x.sum(1), x.amax(-1)))
    low = assert_plan_matches_eager(model, [x_(2, 3, 7, 6)])
    plan = low.plan
    assert plan.the("MAX_POOL2D").attrs == [3, 3, 2, 2, 1, 1, 1, 1, 1]
    assert plan.the("AVG_POOL2D").attrs == [2, 2, 2, 2, 1, 1, 0, 0, 0]
    assert plan.the("REDUCE_MEAN").attrs == [0b1100, 1]
    assert plan.the("REDUCE_SUM").attrs == [0b0010, 0]
    assert plan.the("REDUCE_MAX").attrs == [0b1000, 0]


def test_scaled_dot_product_attention_is_kept_whole():
    def fn(m, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    low = assert_plan_matches_eager(Fn(fn), [x_(2, 4, 6, 8), x_(2, 4, 6, 8), x_(2, 4, 6, 8)])
    assert low.plan.op_names() == ["SDPA"]
    assert low.plan.the("SDPA").attrs == [1, f64_bits(1 / math.sqrt(8))]  # as PyTorch


def test_causal_mask_built_in_forward_folds_to_one_bool_constant():
    def fn(m, s):
        t = s.shape[-1]
        allowed = torch.tril(torch.ones(t, t, dtype=torch.bool))
        return torch.softmax(s.masked_fill(~allowed, float("-inf")), -1)

    low = assert_plan_matches_eager(Fn(fn), [x_(2, 5, 5)])
    assert low.plan.op_names() == ["WHERE", "SOFTMAX"]
    cond = low.plan.tensors[low.plan.the("WHERE").inputs[0]]
    assert cond.storage == "constant" and DTYPES[cond.dtype] == torch.bool
    assert torch.equal(cond.value(), ~torch.tril(torch.ones(5, 5, dtype=torch.bool)))


def test_embedding_takes_int64_indices_from_the_method():
    emb = nn.Embedding(10, 4)
    low = assert_plan_matches_eager(emb, [torch.tensor([[1, 9, 0]])])
    op = low.plan.the("EMBEDDING")
    w, idx = (low.plan.tensors[i] for i in op.inputs)
    assert (w.storage, idx.storage, DTYPES[idx.dtype]) == ("constant", "input", torch.int64)


def test_split_select_slice_and_cat_are_slices_and_cats():
    def fn(m, x):
        a, b = x.chunk(2, -1)
        return torch.cat([b, a], -1), x[:, 1], x[..., 1::2]

    low = assert_plan_matches_eager(Fn(fn), [x_(2, 3, 4)])
    names = low.plan.op_names()
    assert names.count("SLICE") == 4 and names.count("CAT") == 1 and "RESHAPE" in names
    assert low.outside == []


def test_casts_of_computed_tensors_are_cast_ops():
    low = assert_plan_matches_eager(Fn(lambda m, x: (x.half() * 2).float()), [x_(2, 3)])
    assert low.plan.op_names() == ["CAST", "MUL", "CAST"]

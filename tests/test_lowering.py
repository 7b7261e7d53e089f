"""What Ember claims and what plan it writes for it.

Each test exports a tiny model, runs to_edge_transform_and_lower with EmberPartitioner,
and checks (1) which ops landed in an EmberBackend delegate and which stayed outside, and
(2) the plan bytes of the delegate, decoded here from docs/plan-format.md with struct (not
with ember's own writer), for op codes, attributes and weight layouts.
"""

from __future__ import annotations

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
       15: "LAYER_NORM", 16: "COPY"}
DTYPES = {1: torch.float32, 2: torch.float16, 3: torch.bfloat16}
STORAGE = {0: "input", 1: "output", 2: "intermediate", 3: "constant"}


@dataclass
class PlanTensor:
    name: str
    dtype: int
    storage: str
    dims: List[int]
    data: bytes = b""

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
    sections = [struct.unpack_from("<QQ", blob, 64 + 16 * i) for i in range(7)]
    strings, tensors, io, ops, operands, attrs, constants = sections
    assert constants[0] % 64 == 0
    plan = Plan()
    for i in range(num_tensors):
        (name_off, name_len, dtype, storage, rank, _, _, data_off, nbytes, *dims) = \
            struct.unpack_from("<IIBBBBIQQ8q", blob, tensors[0] + i * tensor_rec)
        name = blob[strings[0] + name_off:strings[0] + name_off + name_len].decode()
        t = PlanTensor(name, dtype, STORAGE[storage], list(dims[:rank]))
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
            raise AssertionError(op.name)
        assert list(y.shape) == out.dims and y.dtype == DTYPES[out.dtype], op
        env[op.outputs[0]] = y
    return [env[i] for i in plan.outputs]


# ---- lowering helpers ---------------------------------------------------------------------


@dataclass
class Lowered:
    graph_module: "torch.fx.GraphModule"
    delegates: List[LoweredBackendModule]
    plans: List[Plan]
    outside: List[str]  # ops left to ExecuTorch's kernels, as "aten.cumsum.default"

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
    return Lowered(gm, ember_delegates, plans, outside)


def assert_plan_matches_eager(model, inputs, atol=1e-5, rtol=1e-5) -> Lowered:
    """For a model Ember takes whole (one delegate, nothing outside): the plan, run by
    run_plan on the delegate's arguments, gives the model's outputs."""
    low = lower(model, inputs)
    assert low.outside == [] and len(low.plans) == 1
    gm = low.graph_module
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    by_name = {n.name: value for n, value in zip(placeholders, inputs)}
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
    # MATMUL needs rank >= 2; matrix @ vector decomposes (into mul + sum) instead.
    low = lower(Fn(lambda m, a, b: torch.matmul(a, b)), [x_(3, 4), x_(4)])
    assert "MATMUL" not in low.all_plan_ops()
    assert "aten.matmul.default" not in low.outside


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


@pytest.mark.parametrize("fn,perm", [
    (lambda x: x.permute(2, 0, 1), [2, 0, 1]),
    (lambda x: x.transpose(0, -1), [2, 1, 0]),
    (lambda x: x.permute(-1, -2, -3), [2, 1, 0]),
])
def test_permutes(fn, perm):
    low = lower(Fn(lambda m, x: torch.relu(fn(x))), [x_(2, 3, 4)])
    assert low.plan.the("PERMUTE").attrs == perm


def test_t_is_permute():
    low = lower(Fn(lambda m, x: torch.relu(x.t())), [x_(3, 4)])
    assert low.plan.the("PERMUTE").attrs == [1, 0]


# ---- softmax and layer norm -----------------------------------------------------------


@pytest.mark.parametrize("dim,expected", [(-1, 2), (1, 1), (0, 0)])
def test_softmax(dim, expected):
    low = lower(Fn(lambda m, x: torch.softmax(x, dim)), [x_(2, 3, 4)])
    assert low.plan.op_names() == ["SOFTMAX"]
    assert low.plan.the("SOFTMAX").attrs == [expected]


def test_softmax_to_another_dtype_leaves_the_cast_outside():
    low = lower(Fn(lambda m, x: torch.softmax(x, -1, dtype=torch.float32)),
                [x_(2, 3, dtype=torch.float16)])
    assert low.outside == ["dim_order_ops._to_dim_order_copy.default"]
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


def test_mixed_dtype_inputs_leave_the_cast_outside():
    # Ember has no cast of a non-constant tensor: type promotion's cast runs outside.
    low = lower(Fn(lambda m, a, b: a + b), [x_(2, 3), x_(2, 3, dtype=torch.float16)])
    assert low.outside == ["dim_order_ops._to_dim_order_copy.default"]
    op = low.plan.the("ADD")
    assert {low.plan.tensors[i].dtype for i in op.inputs + op.outputs} == {1}


def test_dynamic_shapes_are_not_claimed():
    batch = Dim("batch", min=2, max=64)
    low = lower(nn.Sequential(nn.Linear(8, 8), nn.ReLU()), [x_(4, 8)],
                dynamic_shapes=({0: batch},))
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


def test_partition_with_non_float_boundary_is_refused(monkeypatch):
    # The node checks already refuse integer ops; with them switched off, the partition
    # check alone must still keep an integer-crossing partition out of Ember.
    import ember.partitioner as partitioner_module

    monkeypatch.setattr(partitioner_module, "unsupported_reason", lambda node, ctx: None)
    low = lower(Fn(lambda m, a: a * 2), [torch.arange(6)])
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
    # unbind lowers to slicing, which Ember does not run
    assert set(low.outside) <= {"aten.select_copy.int", "aten.slice_copy.Tensor"}


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

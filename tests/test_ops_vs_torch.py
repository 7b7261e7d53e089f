"""The CPU reference executor against PyTorch, op by op.

Each test builds a small module out of one family of ops, exports it with ember.save
(every op must land in one Ember partition, or the comparison would test ExecuTorch's
kernels instead), runs the .pte through ExecuTorch's runtime and compares every output
with the same module run eagerly in the same dtype. Several ops share one module so that
the suite exports a few dozen programs, not hundreds.

Covered: every plan op in float32, float16 and bfloat16 where PyTorch's CPU kernels run
them; broadcasting (trailing, leading, size-1 on both sides, scalars); inputs permuted
in the graph (non-contiguous views that Ember materializes with PERMUTE); size-1 and
zero-size dims; and float16 overflow, where inf and NaN must come out where PyTorch puts
them (GELU of ±inf, softmax of rows holding inf or only -inf, exp overflowing).

Tolerances: the CPU executor computes each op in double and rounds once; PyTorch's CPU
kernels accumulate in float. float32: rtol 1e-5, atol 1e-5 (products of <= 64 terms);
float16: 2e-3 (two ulps); bfloat16: 1.6e-2 (two ulps). NaN and inf must match exactly.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.exir")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import ember  # noqa: E402  (tests/conftest.py points this at python/ember)
from ember.report import pte_delegation_report  # noqa: E402

TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3),
       torch.bfloat16: (1.6e-2, 1.6e-2)}
FLOATS = [torch.float32, torch.float16, torch.bfloat16]
FLOAT_IDS = ["f32", "f16", "bf16"]


@pytest.fixture(scope="module")
def runtime():
    pytest.importorskip("executorch.runtime")
    import ember_executorch_runtime  # noqa: F401  (registers EmberBackend)
    from executorch.runtime import Runtime

    return Runtime.get()


class Fn(nn.Module):
    """forward = fn(self, *inputs); keyword tensors become constant parameters."""

    def __init__(self, fn, **params):
        super().__init__()
        self.fn = fn
        for name, value in params.items():
            setattr(self, name, nn.Parameter(value, requires_grad=False))

    def forward(self, *args):
        out = self.fn(self, *args)
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)


def check(runtime, tmp_path, module, inputs, dtype=torch.float32, tol=None, name="m",
          settle=None):
    """Exports `module` (already in `dtype`), checks Ember took every op, runs it and
    compares each output with eager PyTorch (after `settle(expected)`, which may set the
    elements where PyTorch's own kernels disagree with each other)."""
    module = module.eval()
    with torch.no_grad():
        expected = module(*inputs)
    if settle is not None:
        settle(expected)
    path = ember.save(module, tmp_path / f"{name}.pte", tuple(inputs))
    report = pte_delegation_report(path)["forward"]
    assert report.partitions == 1 and report.outside == [], report.summary()
    got = runtime.load_program(str(path)).load_method("forward").execute(tuple(inputs))
    assert len(got) == len(expected)
    rtol, atol = tol if tol is not None else TOL.get(dtype, (0, 0))
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.dtype == e.dtype and g.shape == e.shape, (i, g.dtype, e.dtype, g.shape, e.shape)
        torch.testing.assert_close(g, e, rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m, i=i: f"output {i}: {m}")
    return got


def randn(*shape, dtype=torch.float32, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape) * 31 + len(shape))
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


# ---- elementwise ---------------------------------------------------------------------------


SPECIAL = [-30.0, -8.0, -3.5, -1.0, -0.25, -0.0, 0.0, 0.125, 0.5, 1.0, 2.75, 6.0, 7.5, 40.0]


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_unary(runtime, tmp_path, dtype):
    x = torch.tensor(SPECIAL, dtype=dtype).reshape(2, 7)

    def fn(m, x):
        return (torch.relu(x), F.gelu(x), F.gelu(x, approximate="tanh"), torch.sigmoid(x),
                torch.tanh(x), F.silu(x), -x, torch.exp(x / 8), torch.log(x), torch.sqrt(x),
                torch.rsqrt(x), torch.abs(x), torch.reciprocal(x), torch.clamp(x, -2, 3),
                torch.clamp(x, min=0.5), F.relu6(x), F.hardtanh(x, -1.5, 0.5))

    check(runtime, tmp_path, Fn(fn), [x], dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_binary_broadcasting(runtime, tmp_path, dtype):
    a = randn(2, 3, 4, dtype=dtype)
    b = randn(3, 1, dtype=dtype, seed=1)
    c = randn(4, dtype=dtype, seed=2)
    d = randn(1, 3, 1, dtype=dtype, seed=3)
    e = randn(2, 1, 4, dtype=dtype, seed=4)
    pos = randn(2, 3, 4, dtype=dtype, seed=5).abs() + 0.5

    # A comparison (a > 0) is not an Ember op: the condition comes in as a bool input.
    mask = a > 0

    def fn(m, a, b, c, d, e, pos, mask):
        return (a + b, a - c, a * d, a / pos, d * e, e - d, torch.maximum(a, b),
                torch.minimum(c, a), torch.pow(pos, b), pos ** 2, pos ** 0.5, 2 ** b,
                a + 1.5, 3 - a, a * m.w, a / 4, torch.where(mask, a, b),
                torch.where(mask, a, 0.25))

    check(runtime, tmp_path, Fn(fn, w=randn(4, dtype=dtype, seed=6)),
          [a, b, c, d, e, pos, mask], dtype)


def test_size_one_and_zero_size_dims(runtime, tmp_path):
    one = randn(1, 3, 1)
    zero = randn(0, 4)
    rows = randn(3, 4)

    def fn(m, one, zero, rows):
        return (torch.softmax(one, dim=2), F.layer_norm(one, [1]), one.sum(0), one + rows[:1],
                torch.relu(zero), F.linear(zero, m.w, m.b), torch.cat([zero, rows], 0),
                zero.sum(0), zero.mean(0), rows[:, 2:2], rows.expand(2, 3, 4)[:, :, :1])

    check(runtime, tmp_path, Fn(fn, w=randn(5, 4, seed=1), b=randn(5, seed=2)),
          [one, zero, rows])


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_permuted_inputs(runtime, tmp_path, dtype):
    x = randn(2, 3, 4, 5, dtype=dtype)
    y = randn(5, 3, dtype=dtype, seed=1)

    def fn(m, x, y):
        p = x.permute(0, 3, 1, 2)  # [2, 5, 3, 4], not contiguous
        t = x.transpose(1, 2)      # [2, 4, 3, 5]
        return (p + y.unsqueeze(-1), torch.softmax(p, dim=1), F.layer_norm(t, [5]),
                t @ y, torch.relu(x.mT), p.sum(dim=(1, 3)), x.permute(3, 2, 1, 0).contiguous())

    check(runtime, tmp_path, Fn(fn), [x, y], dtype)


# ---- float16 overflow: inf and NaN where PyTorch puts them ---------------------------------


def test_float16_overflow_gelu_and_softmax(runtime, tmp_path):
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[65504.0, -65504.0, inf, -inf, nan, 60000.0, -20.0, 11.5]],
                     dtype=torch.float16)
    rows = torch.tensor([[1.0, inf, 2.0, 0.0],
                         [-inf, -inf, -inf, -inf],
                         [65504.0, 65504.0, -65504.0, 0.0],
                         [nan, 1.0, 2.0, 3.0],
                         [-inf, 0.0, 1.0, -inf]], dtype=torch.float16)

    def fn(m, x, rows):
        return (F.gelu(x), F.gelu(x, approximate="tanh"), torch.softmax(rows, dim=-1),
                torch.softmax(rows, dim=0), torch.exp(x / 1000), x * 2, torch.sigmoid(x),
                F.silu(x))

    def settle(expected):
        # GELU's erf form at +inf: PyTorch's CPU kernels disagree with each other (torch
        # 2.13 on an AVX-512 machine: +inf in float16, NaN in float32's vectorized loop,
        # +inf for a single float32 element), so eager float16 is no oracle there; Ember
        # gives NaN, as float32's vectorized kernel, which the assert below pins.
        expected[0][0, 2] = nan

    got = check(runtime, tmp_path, Fn(fn), [x, rows], torch.float16, settle=settle)
    # The cases the test exists for, as PyTorch's CPU kernels give them: GELU at +inf is
    # NaN in the erf form (float32's vectorized kernel; above) and +inf in the tanh form,
    # at -inf NaN in both; a softmax row holding +inf, or only -inf, is NaN.
    assert torch.isnan(got[0][0, 2]) and torch.isinf(got[1][0, 2])
    assert torch.isnan(got[0][0, 3]) and torch.isnan(got[1][0, 3])
    assert torch.isnan(got[2][0]).all() and torch.isnan(got[2][1]).all()
    assert torch.isinf(got[4]).any() and torch.isinf(got[5][0, 0])


# ---- reductions, normalization, softmax ----------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_reductions_and_normalization(runtime, tmp_path, dtype):
    x = randn(2, 3, 4, 5, dtype=dtype)

    def fn(m, x):
        return (x.sum(1), x.mean((2, 3), keepdim=True), x.amax((0, 2)), x.sum(),
                x.mean(-1), torch.softmax(x, 0), torch.softmax(x, -1),
                F.layer_norm(x, [4, 5], m.w, m.b), F.layer_norm(x, [5]),
                x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    check(runtime, tmp_path, Fn(fn, w=randn(4, 5, dtype=dtype, seed=1),
                                b=randn(4, 5, dtype=dtype, seed=2)), [x], dtype)


# ---- matrix products and convolutions ------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_matrix_products(runtime, tmp_path, dtype):
    x = randn(2, 3, 16, dtype=dtype)
    y = randn(2, 16, 5, dtype=dtype, seed=1)
    z = randn(16, 7, dtype=dtype, seed=2)

    def fn(m, x, y, z):
        return (F.linear(x, m.w, m.b), F.linear(x, m.w), x @ y, x @ z, torch.bmm(x, y),
                torch.addmm(m.b2, x[0], z), torch.mm(x[1], z), x.matmul(m.w.t()))

    check(runtime, tmp_path, Fn(fn, w=randn(6, 16, dtype=dtype, seed=3),
                                b=randn(6, dtype=dtype, seed=4),
                                b2=randn(7, dtype=dtype, seed=5)), [x, y, z], dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_convolutions(runtime, tmp_path, dtype):
    x = randn(2, 4, 9, 8, dtype=dtype)
    s = randn(2, 4, 11, dtype=dtype, seed=1)

    def fn(m, x, s):
        return (F.conv2d(x, m.w3, m.b, 1, 1), F.conv2d(x, m.w3, None, (2, 1), (0, 2), (2, 1)),
                F.conv2d(x, m.dw, None, 1, 1, 1, 4), F.conv2d(x, m.g2, m.b2, 2, 1, 1, 2),
                F.conv2d(x, m.pw), F.conv1d(s, m.w1, m.b1, 2, 1))

    params = dict(w3=randn(6, 4, 3, 3, dtype=dtype, seed=2), b=randn(6, dtype=dtype, seed=3),
                  dw=randn(4, 1, 3, 3, dtype=dtype, seed=4),
                  g2=randn(6, 2, 3, 2, dtype=dtype, seed=5), b2=randn(6, dtype=dtype, seed=6),
                  pw=randn(3, 4, 1, 1, dtype=dtype, seed=7),
                  w1=randn(5, 4, 3, dtype=dtype, seed=8), b1=randn(5, dtype=dtype, seed=9))
    check(runtime, tmp_path, Fn(fn, **params), [x, s], dtype)


def test_batch_norm_without_a_convolution(runtime, tmp_path):
    # Not after a convolution: lowered as x * scale + shift per channel.
    bn2 = nn.BatchNorm2d(4)
    bn1 = nn.BatchNorm1d(3)
    for bn in (bn2, bn1):
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-1, 1)
    module = Fn(lambda m, x, y: (m.bn2(torch.relu(x)), m.bn1(y), m.bn1(y[..., 0])))
    module.bn2, module.bn1 = bn2, bn1
    check(runtime, tmp_path, module, [randn(2, 4, 3, 3), randn(5, 3, 6, seed=1)])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_batch_norm_in_16_bits_computes_in_float32(runtime, tmp_path, dtype):
    # A running mean far from 0 against x's spread: PyTorch computes x * scale + shift in
    # float32 and rounds once; in the 16-bit dtype the rounded scale, shift and product
    # were tens of ulps off (0.049 in float16 here).
    bn = nn.BatchNorm2d(4)
    g = torch.Generator().manual_seed(0)
    bn.running_mean.copy_(100.0 + torch.rand(4, generator=g))
    bn.running_var.copy_(2.0 + torch.rand(4, generator=g))
    bn.weight.data.copy_(0.5 + torch.rand(4, generator=g))
    bn.bias.data.copy_(torch.rand(4, generator=g) - 0.5)
    module = Fn(lambda m, x: m.bn(torch.relu(x)))
    module.bn = bn
    x = 100.0 + randn(2, 4, 3, 3)
    check(runtime, tmp_path, module.to(dtype), [x.to(dtype)], dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_pools(runtime, tmp_path, dtype):
    x = randn(2, 3, 9, 7, dtype=dtype)

    def fn(m, x):
        return (F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, (3, 2), 2, (1, 1), ceil_mode=True),
                F.max_pool2d(x, 2, 1, 1, dilation=2), F.avg_pool2d(x, 2),
                F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
                F.avg_pool2d(x, (3, 2), 2, 1, ceil_mode=True),
                F.avg_pool2d(x, 2, 3, 1, divisor_override=3),
                F.adaptive_avg_pool2d(x, 1), F.adaptive_avg_pool2d(x, (4, 3)),
                F.adaptive_avg_pool2d(x, (9, 7)))

    check(runtime, tmp_path, Fn(fn), [x], dtype)


# ---- layout ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_layout(runtime, tmp_path, dtype):
    x = randn(2, 6, 5, dtype=dtype)
    y = randn(3, 1, dtype=dtype, seed=1)

    def fn(m, x, y):
        a, b = x.chunk(2, dim=1)
        p, q, r = x.split([1, 2, 2], dim=2)
        u0, u1 = x.unbind(0)
        return (a * b, p, q + r, u0 - u1, x[:, 1], x[..., 1:5:2], x[1:, ::3, -2:],
                torch.cat([a, y.expand(2, 3, 5)], dim=2), y.expand(4, 3, 6),
                x.flatten(1), x.unsqueeze(2).squeeze(2), x.reshape(5, 12).t(),
                torch.stack([u0, u1], dim=-1))

    check(runtime, tmp_path, Fn(fn), [x, y], dtype)


def test_layout_of_integer_and_bool_tensors(runtime, tmp_path):
    idx = torch.arange(24).reshape(2, 3, 4)
    mask = torch.arange(12).reshape(3, 4) % 3 == 0

    def fn(m, idx, mask, x):
        return (idx.permute(2, 0, 1), idx[:, 1:, ::2], torch.cat([idx, idx], 0),
                mask.expand(2, 3, 4), torch.where(mask, x, -x), idx.to(torch.float32) * x,
                x.to(torch.int64), mask.t())

    check(runtime, tmp_path, Fn(fn), [idx, mask, randn(3, 4) * 3])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_embedding(runtime, tmp_path, dtype):
    w = randn(11, 6, dtype=dtype)
    emb = nn.Embedding(11, 6).to(dtype)
    emb.weight.data.copy_(w)
    module = Fn(lambda m, i, j: (m.emb(i), m.emb(j), F.embedding(i[0], m.emb.weight)))
    module.emb = emb
    check(runtime, tmp_path, module, [torch.tensor([[0, 10, 3], [3, 7, 1]]),
                                      torch.tensor([4, 2], dtype=torch.int32)], dtype)


def test_casts(runtime, tmp_path):
    x = torch.tensor([[-2.75, -1.0, -0.5, 0.0], [0.5, 1.5, 70000.0, 3.0]])

    def fn(m, x, h):
        return (x.half(), x.bfloat16(), h.float(), h.to(torch.bfloat16), x.long(), x.int(),
                x.bool(), (h.float() + x).half())

    check(runtime, tmp_path, Fn(fn), [x, x.half()], tol=(0, 0))


def test_a_parameter_read_by_ember_and_returned(runtime, tmp_path):
    # The delegate takes the parameter as an input rather than a constant it owns: tagged
    # as the delegate's, ExecuTorch refused it for its other user, the graph's output.
    fn = Fn(lambda m, x: (x + m.pe, m.pe, torch.relu(x * m.pe)), pe=randn(4, 3, seed=5))
    check(runtime, tmp_path, fn, [randn(2, 4, 3)])


def test_integer_to_float_casts_round_once(runtime, tmp_path):
    # An int64 past 2^53 goes to float32 rounded once, and a 16-bit float from that float32,
    # as PyTorch converts it (through double it was rounded twice, one ulp off).
    i = torch.tensor([2**60 + 2**36 + 1, -(2**62 + 2**38 + 3), 2**53 + 1, 2**24 + 1, 7, -3],
                     dtype=torch.int64)

    def fn(m, i):
        return (i.float(), i.half(), i.to(torch.bfloat16))

    check(runtime, tmp_path, Fn(fn), [i], tol=(0, 0))


# ---- attention -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_scaled_dot_product_attention(runtime, tmp_path, dtype):
    q = randn(2, 3, 5, 8, dtype=dtype)
    k = randn(2, 3, 7, 8, dtype=dtype, seed=1)
    v = randn(2, 3, 7, 4, dtype=dtype, seed=2)
    bool_mask = torch.rand(5, 7, generator=torch.Generator().manual_seed(3)) > 0.3
    bool_mask[2] = False  # a query with every key masked: zeros, as PyTorch
    float_mask = randn(2, 1, 5, 7, dtype=dtype, seed=4)

    def fn(m, q, k, v, bool_mask, float_mask):
        sdpa = F.scaled_dot_product_attention
        return (sdpa(q, k, v), sdpa(q, k, v, scale=0.3), sdpa(q, q, q, is_causal=True),
                sdpa(q, k, v, attn_mask=bool_mask), sdpa(q, k, v, attn_mask=float_mask),
                sdpa(q[0], k[0], v[0], is_causal=True))

    check(runtime, tmp_path, Fn(fn), [q, k, v, bool_mask, float_mask], dtype)

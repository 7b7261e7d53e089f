"""Writes the engine's test data: plans made by the real plan writer, their inputs and
expected outputs computed here in pure Python, a malformed-plan corpus made by mutating
writer output, and a table of float16/bfloat16 conversions.

Usage: make_test_plans.py PLAN_WRITER_PY OUT_DIR

Standard library only. The writer is loaded by file path, so the `ember` package (which
imports executorch) is never imported.

Out:
  OUT_DIR/valid/<case>.plan    a plan
  OUT_DIR/valid/<case>.case    its inputs and expected outputs (format below)
  OUT_DIR/valid/cases.txt      one case name a line
  OUT_DIR/malformed/<n>.plan   a malformed plan
  OUT_DIR/malformed/manifest.txt   "<name>\t<status code>\t<message substring>" a line
  OUT_DIR/float_formats.bin    see write_float_formats

.case format, little-endian: b"EMBRCASE", u32 num_inputs, u32 num_outputs, then per
tensor (inputs, then expected outputs): u32 dtype, u32 rank, i64 dims[rank], u64 nbytes,
f64 atol, f64 rtol, nbytes of data, zero padding to a multiple of 8.
"""

import importlib.util
import itertools
import math
import os
import random
import struct
import sys

# ---- the writer, by path -----------------------------------------------------------------


def load_writer(path):
    spec = importlib.util.spec_from_file_location("ember_plan_writer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pw = None  # set in main()
valid_cases_cache = None

# ---- dtype rounding (independent of the engine's C code) ---------------------------------


def round_f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f32_from_bits(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def f16_bits(x):
    """Round-to-nearest-even float16 bits of a double, via CPython's own packer."""
    try:
        return struct.unpack("<H", struct.pack("<e", x))[0]
    except OverflowError:
        return 0xFC00 if x < 0 else 0x7C00


def bf16_bits_of_f32(x32):
    """bfloat16 bits nearest to the float32 value x32 (ties to even), chosen by comparing
    exact distances between the two neighbouring bfloat16 values (no bit tricks)."""
    bits = f32_bits(x32)
    if math.isnan(x32):
        return None
    if math.isinf(x32):
        return bits >> 16
    low = bits >> 16
    low_value = f32_from_bits(low << 16)
    if low_value == x32:
        return low
    high = low + 1
    high_exp_bits = (high << 16) & 0x7F800000
    high_value = math.inf if high_exp_bits == 0x7F800000 else f32_from_bits(high << 16)
    if high_value == math.inf or high_value == -math.inf:
        # The next value up is infinity: the halfway point is max + half an ulp.
        ulp = abs(low_value - f32_from_bits((low - 1) << 16))
        halfway = abs(low_value) + ulp / 2
        if abs(x32) < halfway:
            return low
        if abs(x32) > halfway:
            return high
        return low if low % 2 == 0 else high
    d_low = abs(x32 - low_value)
    d_high = abs(high_value - x32)
    if d_low < d_high:
        return low
    if d_high < d_low:
        return high
    return low if low % 2 == 0 else high


INT_DTYPES = None  # set in main(): (INT64, INT32, BOOL)


def round_to(dtype, x):
    """x rounded to dtype, returned as a double (integers and bools stay exact)."""
    if dtype in INT_DTYPES:
        return x
    x32 = round_f32(x)
    if dtype == pw.Dtype.FLOAT32:
        return x32
    if dtype == pw.Dtype.FLOAT16:
        if math.isnan(x32):
            return x32
        return struct.unpack("<e", struct.pack("<H", f16_bits(x32)))[0]
    if math.isnan(x32):
        return x32
    return f32_from_bits(bf16_bits_of_f32(x32) << 16)


def encode(dtype, values):
    if dtype == pw.Dtype.INT64:
        return struct.pack(f"<{len(values)}q", *(int(v) for v in values))
    if dtype == pw.Dtype.INT32:
        return struct.pack(f"<{len(values)}i", *(int(v) for v in values))
    if dtype == pw.Dtype.BOOL:
        return struct.pack(f"<{len(values)}B", *(1 if v else 0 for v in values))
    if dtype == pw.Dtype.FLOAT32:
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == pw.Dtype.FLOAT16:
        return struct.pack(f"<{len(values)}H", *(f16_bits(v) for v in values))
    return struct.pack(f"<{len(values)}H", *(0x7FC0 if math.isnan(v) else
                                             bf16_bits_of_f32(round_f32(v)) for v in values))


TOLERANCE = {  # (atol, rtol): an ulp or two at the magnitudes the tests use
    1: (2e-6, 2e-5),
    2: (2e-3, 4e-3),
    3: (1.6e-2, 1.6e-2),
    4: (0.0, 0.0),
    5: (0.0, 0.0),
    6: (0.0, 0.0),
}

# ---- reference ops on (shape, flat list of doubles) --------------------------------------


class T:
    def __init__(self, shape, values):
        self.shape = list(shape)
        self.values = list(values)
        assert len(self.values) == math.prod(self.shape)

    def at(self, index):
        flat = 0
        for i, d in zip(index, self.shape):
            flat = flat * d + i
        return self.values[flat]


def all_indices(shape):
    return itertools.product(*(range(d) for d in shape))


def broadcast_shape(a, b):
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + a
    b = [1] * (rank - len(b)) + b
    return [max(x, y) if 1 in (x, y) else x for x, y in zip(a, b)]


def broadcast_index(index, shape):
    """The element of a tensor of `shape` that output position `index` reads."""
    lead = len(index) - len(shape)
    return tuple(0 if d == 1 else index[lead + k] for k, d in enumerate(shape))


def ref_binary(op, a, b):
    shape = broadcast_shape(a.shape, b.shape)
    fn = {pw.Op.ADD: lambda p, q: p + q, pw.Op.SUB: lambda p, q: p - q,
          pw.Op.MUL: lambda p, q: p * q, pw.Op.DIV: lambda p, q: p / q}[op]
    return T(shape, [fn(a.at(broadcast_index(i, a.shape)), b.at(broadcast_index(i, b.shape)))
                     for i in all_indices(shape)])


def sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v)) if v > -700 else 0.0


def ref_unary(op, x, approximate=0):
    if op == pw.Op.RELU:
        fn = lambda v: max(v, 0.0)
    elif op == pw.Op.GELU and approximate == 0:
        # PyTorch's CPU kernels: NaN at +inf (the tanh form gives +inf).
        fn = lambda v: math.nan if v == math.inf else \
            v * 0.5 * (1.0 + math.erf(v / math.sqrt(2.0)))
    elif op == pw.Op.GELU:
        c = math.sqrt(2.0 / math.pi)
        fn = lambda v: 0.5 * v * (1.0 + math.tanh(c * (v + 0.044715 * v ** 3)))
    elif op == pw.Op.SIGMOID:
        fn = sigmoid
    elif op == pw.Op.TANH:
        fn = math.tanh
    else:
        fn = lambda v: v * sigmoid(v)
    return T(x.shape, [fn(v) for v in x.values])


def ref_matmul(a, b):
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    out = []
    for bi in all_indices(batch):
        ai = broadcast_index(bi, a.shape[:-2])
        bj = broadcast_index(bi, b.shape[:-2])
        for i in range(m):
            for j in range(n):
                out.append(math.fsum(a.at(ai + (i, kk)) * b.at(bj + (kk, j)) for kk in range(k)))
    return T(batch + [m, n], out)


def ref_linear(x, w, b, layout):
    k = x.shape[-1]
    n = w.shape[0] if layout == 0 else w.shape[1]
    rows = math.prod(x.shape[:-1])
    out = []
    for r in range(rows):
        for j in range(n):
            s = math.fsum(x.values[r * k + kk] * (w.at((j, kk)) if layout == 0 else w.at((kk, j)))
                          for kk in range(k))
            out.append(s + (b.values[j] if b is not None else 0.0))
    return T(x.shape[:-1] + [n], out)


def ref_permute(x, perm):
    shape = [x.shape[p] for p in perm]
    out = []
    for idx in all_indices(shape):
        src = [0] * len(perm)
        for i, p in enumerate(perm):
            src[p] = idx[i]
        out.append(x.at(tuple(src)))
    return T(shape, out)


def ref_softmax(x, dim):
    out = [0.0] * len(x.values)
    strides = [math.prod(x.shape[i + 1:]) for i in range(len(x.shape))]
    other = [d if i != dim else 1 for i, d in enumerate(x.shape)]
    for idx in all_indices(other):
        base = sum(i * s for i, s in zip(idx, strides))
        positions = [base + j * strides[dim] for j in range(x.shape[dim])]
        m = max(x.values[p] for p in positions)
        exps = [math.exp(x.values[p] - m) for p in positions]
        total = math.fsum(exps)
        for p, e in zip(positions, exps):
            out[p] = e / total
    return T(x.shape, out)


def ref_layer_norm(x, nd, eps, w, b):
    n = math.prod(x.shape[len(x.shape) - nd:])
    out = []
    for r in range(len(x.values) // n):
        row = x.values[r * n:(r + 1) * n]
        mean = math.fsum(row) / n
        var = math.fsum((v - mean) ** 2 for v in row) / n
        inv = 1.0 / math.sqrt(var + eps)
        for j, v in enumerate(row):
            y = (v - mean) * inv
            if w is not None:
                y *= w.values[j]
            if b is not None:
                y += b.values[j]
            out.append(y)
    return T(x.shape, out)


def ref_unary_math(op, x, low=None, high=None):
    def safe(fn):
        def apply(v):
            try:
                return fn(v)
            except (ValueError, ZeroDivisionError, OverflowError):
                return None
        return apply

    def log(v):
        if v < 0 or math.isnan(v):
            return math.nan
        return -math.inf if v == 0 else math.log(v)

    def sqrt(v):
        return math.nan if v < 0 or math.isnan(v) else math.sqrt(v)

    def rsqrt(v):
        r = sqrt(v)
        return math.inf if r == 0 else 1.0 / r

    def reciprocal(v):
        return math.copysign(math.inf, v) if v == 0 else 1.0 / v

    def clamp(v):
        if math.isnan(v):
            return v
        return min(max(v, low), high)

    fn = {pw.Op.NEG: lambda v: -v, pw.Op.EXP: lambda v: math.exp(v) if v < 709 else math.inf,
          pw.Op.LOG: log, pw.Op.SQRT: sqrt, pw.Op.RSQRT: rsqrt, pw.Op.ABS: abs,
          pw.Op.RECIPROCAL: reciprocal, pw.Op.CLAMP: clamp}[op]
    return T(x.shape, [fn(v) for v in x.values])


def ref_binary_more(op, a, b):
    def power(p, q):
        try:
            return math.pow(p, q)
        except ValueError:
            return math.nan
        except OverflowError:
            return math.inf

    def maximum(p, q):
        return math.nan if math.isnan(p) or math.isnan(q) else max(p, q)

    def minimum(p, q):
        return math.nan if math.isnan(p) or math.isnan(q) else min(p, q)

    fn = {pw.Op.POW: power, pw.Op.MAXIMUM: maximum, pw.Op.MINIMUM: minimum}[op]
    shape = broadcast_shape(a.shape, b.shape)
    return T(shape, [fn(a.at(broadcast_index(i, a.shape)), b.at(broadcast_index(i, b.shape)))
                     for i in all_indices(shape)])


def ref_where(c, a, b):
    shape = broadcast_shape(broadcast_shape(c.shape, a.shape), b.shape)
    return T(shape, [a.at(broadcast_index(i, a.shape)) if c.at(broadcast_index(i, c.shape))
                     else b.at(broadcast_index(i, b.shape)) for i in all_indices(shape)])


def ref_expand(x, shape):
    return T(shape, [x.at(broadcast_index(i, x.shape)) for i in all_indices(shape)])


def ref_slice(x, dim, start, step, length):
    shape = list(x.shape)
    shape[dim] = length
    out = []
    for i in all_indices(shape):
        src = list(i)
        src[dim] = start + i[dim] * step
        out.append(x.at(tuple(src)))
    return T(shape, out)


def ref_cat(xs, dim):
    shape = list(xs[0].shape)
    shape[dim] = sum(x.shape[dim] for x in xs)
    out = []
    for i in all_indices(shape):
        k, pos = 0, i[dim]
        while pos >= xs[k].shape[dim]:
            pos -= xs[k].shape[dim]
            k += 1
        src = list(i)
        src[dim] = pos
        out.append(xs[k].at(tuple(src)))
    return T(shape, out)


def ref_embedding(w, idx):
    d = w.shape[1]
    out = []
    for v in idx.values:
        out += w.values[int(v) * d:(int(v) + 1) * d]
    return T(idx.shape + [d], out)


def ref_reduce(op, x, dims, keepdim):
    kept = [d for d in range(len(x.shape)) if d not in dims]
    out_shape = [1 if d in dims else x.shape[d] for d in range(len(x.shape))] if keepdim \
        else [x.shape[d] for d in kept]
    out = []
    for ki in all_indices([x.shape[d] for d in kept]):
        vals = []
        for ri in all_indices([x.shape[d] for d in dims]):
            idx = [0] * len(x.shape)
            for d, v in zip(kept, ki):
                idx[d] = v
            for d, v in zip(dims, ri):
                idx[d] = v
            vals.append(x.at(tuple(idx)))
        if op == pw.Op.REDUCE_SUM:
            out.append(math.fsum(vals))
        elif op == pw.Op.REDUCE_MEAN:
            out.append(math.fsum(vals) / len(vals) if vals else math.nan)
        else:
            out.append(math.nan if any(math.isnan(v) for v in vals) else max(vals))
    return T(out_shape, out)


def pool_out(size, k, s, p, d, ceil_mode):
    """PyTorch's pooling_output_shape."""
    num = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def ref_conv2d(x, w, b, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    og = o // groups
    out = []
    for ni in range(n):
        for oc in range(o):
            g = oc // og
            for r in range(oh):
                for cc in range(ow):
                    terms = [b.values[oc]] if b is not None else []
                    for ic in range(cg):
                        for ki in range(kh):
                            hh = r * stride[0] - pad[0] + ki * dil[0]
                            if not 0 <= hh < h:
                                continue
                            for kj in range(kw):
                                ww = cc * stride[1] - pad[1] + kj * dil[1]
                                if 0 <= ww < wd:
                                    terms.append(x.at((ni, g * cg + ic, hh, ww))
                                                 * w.at((oc, ic, ki, kj)))
                    out.append(math.fsum(terms))
    return T([n, o, oh, ow], out)


def ref_max_pool2d(x, k, s, p, d, ceil_mode):
    n, c, h, wd = x.shape
    oh, ow = pool_out(h, k[0], s[0], p[0], d[0], ceil_mode), pool_out(wd, k[1], s[1], p[1], d[1],
                                                                       ceil_mode)
    out = []
    for ni, ci, r, cc in all_indices([n, c, oh, ow]):
        vals = [x.at((ni, ci, r * s[0] - p[0] + i * d[0], cc * s[1] - p[1] + j * d[1]))
                for i in range(k[0]) for j in range(k[1])
                if 0 <= r * s[0] - p[0] + i * d[0] < h and 0 <= cc * s[1] - p[1] + j * d[1] < wd]
        out.append(math.nan if any(math.isnan(v) for v in vals) else max(vals))
    return T([n, c, oh, ow], out)


def ref_avg_pool2d(x, k, s, p, ceil_mode, include_pad, divisor):
    n, c, h, wd = x.shape
    oh, ow = pool_out(h, k[0], s[0], p[0], 1, ceil_mode), pool_out(wd, k[1], s[1], p[1], 1,
                                                                   ceil_mode)
    out = []
    for ni, ci, r, cc in all_indices([n, c, oh, ow]):
        h0, w0 = r * s[0] - p[0], cc * s[1] - p[1]
        h1, w1 = min(h0 + k[0], h + p[0]), min(w0 + k[1], wd + p[1])
        pool_size = (h1 - h0) * (w1 - w0)
        h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, wd)
        vals = [x.at((ni, ci, i, j)) for i in range(h0, h1) for j in range(w0, w1)]
        if not vals:
            out.append(0.0)
            continue
        div = divisor or (pool_size if include_pad else len(vals))
        out.append(math.fsum(vals) / div)
    return T([n, c, oh, ow], out)


def ref_adaptive_avg_pool2d(x, oh, ow):
    n, c, h, wd = x.shape
    out = []
    for ni, ci, r, cc in all_indices([n, c, oh, ow]):
        h0, h1 = (r * h) // oh, -((-(r + 1) * h) // oh)
        w0, w1 = (cc * wd) // ow, -((-(cc + 1) * wd) // ow)
        vals = [x.at((ni, ci, i, j)) for i in range(h0, h1) for j in range(w0, w1)]
        out.append(math.fsum(vals) / len(vals))
    return T([n, c, oh, ow], out)


def ref_sdpa(q, k, v, mask, mask_is_bool, is_causal, scale):
    """softmax(q k^T * scale + mask) v; rows with every key masked are 0 (PyTorch)."""
    *batch, L, E = q.shape
    S, Ev = k.shape[-2], v.shape[-1]
    out = []
    for bi in all_indices(batch):
        for i in range(L):
            scores = []
            for j in range(S):
                sc = math.fsum(q.at(bi + (i, e)) * k.at(bi + (j, e)) for e in range(E)) * scale
                if is_causal and j > i:
                    sc = -math.inf
                if mask is not None:
                    m = mask.at(broadcast_index(bi + (i, j), mask.shape))
                    if mask_is_bool:
                        sc = sc if m else -math.inf
                    else:
                        sc += m
                scores.append(sc)
            top = max(scores)
            if top == -math.inf:
                out += [0.0] * Ev
                continue
            ps = [math.exp(sc - top) for sc in scores]
            total = math.fsum(ps)
            out += [math.fsum(p * v.at(bi + (j, t)) for j, p in enumerate(ps)) / total
                    for t in range(Ev)]
    return T(batch + [L, Ev], out)


def ref_cast(x, dtype):
    if dtype == pw.Dtype.BOOL:
        return T(x.shape, [bool(v) or math.isnan(v) for v in x.values])
    if dtype in (pw.Dtype.INT64, pw.Dtype.INT32):
        return T(x.shape, [0 if math.isnan(v) else int(v) for v in x.values])
    return T(x.shape, [float(v) for v in x.values])


# ---- a graph builder that runs the reference as it writes the plan ----------------------


class Graph:
    """Builds a plan with the writer and, op by op, the expected values.

    Tensors have the graph's dtype unless given one. For a plan with dynamic dims, declare
    symbols with `symbol(min, max, value)`: the plan records each symbolic dim at the
    symbol's max, while the reference values are computed at `value`. Shapes passed to
    `input` and `op` results are actual shapes; `symbols` names a symbol per dim (None for
    a static dim). Inputs are drawn at the largest shape and cut to the actual one, so the
    constants (drawn after them) do not depend on the symbol values."""

    def __init__(self, dtype=None, seed=0):
        self.w = pw.PlanWriter()
        self.dtype = dtype if dtype is not None else pw.Dtype.FLOAT32
        self.rng = random.Random(seed)
        self.values = {}  # tensor index -> T (rounded to its dtype)
        self.meta = {}  # tensor index -> (dtype, actual shape)
        self.inputs = []
        self.outputs = []
        self.counter = 0
        self.symbol_values = []

    def _name(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def _random(self, shape, low, high, dtype=None):
        dtype = dtype if dtype is not None else self.dtype
        if dtype == pw.Dtype.BOOL:
            return [self.rng.random() < 0.5 for _ in range(math.prod(shape))]
        if dtype in INT_DTYPES:
            return [self.rng.randint(int(low), int(high)) for _ in range(math.prod(shape))]
        return [round_to(dtype, self.rng.uniform(low, high)) for _ in range(math.prod(shape))]

    def symbol(self, low, high, value):
        index = self.w.add_symbol(low, high)
        self.symbol_values.append((value, high))
        return index

    def plan_dims(self, shape, symbols, max_shape=None):
        """The plan's dims (symbolic dims at their largest) for an actual shape."""
        if symbols is None:
            return list(shape), None
        if max_shape is not None:
            return list(max_shape), list(symbols)
        dims = []
        for d, s in zip(shape, symbols):
            if s is None:
                dims.append(d)
                continue
            value, high = self.symbol_values[s]
            assert value > 0 and d % value == 0, "pass max_shape for a symbol value of 0"
            dims.append(d // value * high)
        return dims, list(symbols)

    def input(self, shape, low=-2.0, high=2.0, name=None, values=None, dtype=None,
              symbols=None, max_shape=None):
        dtype = dtype if dtype is not None else self.dtype
        dims, syms = self.plan_dims(shape, symbols, max_shape)
        t = self.w.add_input(name or self._name("in"), dtype, dims, symbols=syms)
        if values is None:
            values = self._random(dims, low, high, dtype)[:math.prod(shape)]
        self.values[t] = T(shape, [round_to(dtype, v) for v in values])
        self.meta[t] = (dtype, list(shape))
        self.inputs.append(t)
        return t

    def const(self, shape, low=-1.0, high=1.0, name=None, values=None, dtype=None):
        dtype = dtype if dtype is not None else self.dtype
        vals = values if values is not None else self._random(shape, low, high, dtype)
        vals = [round_to(dtype, v) for v in vals]
        t = self.w.add_constant(name or self._name("c"), dtype, shape, encode(dtype, vals))
        self.values[t] = T(shape, vals)
        self.meta[t] = (dtype, list(shape))
        return t

    def op(self, opcode, inputs, result, attrs=(), output=False, name=None, dtype=None,
           symbols=None, max_shape=None):
        """Adds `opcode` writing a new tensor holding `result` (a T computed in double)."""
        dtype = dtype if dtype is not None else self.dtype
        rounded = T(result.shape, [round_to(dtype, v) for v in result.values])
        dims, syms = self.plan_dims(result.shape, symbols, max_shape)
        if output:
            t = self.w.add_output(name or self._name("out"), dtype, dims, symbols=syms)
            self.outputs.append(t)
        else:
            t = self.w.add_intermediate(name or self._name("t"), dtype, dims, symbols=syms)
        self.w.add_op(opcode, inputs, [t], attrs)
        self.values[t] = rounded
        self.meta[t] = (dtype, list(result.shape))
        return t

    def v(self, t):
        return self.values[t]

    # Convenience wrappers: each computes the reference and adds the op.
    def linear(self, x, w, b=None, layout=0, **kw):
        ins = [x, w] + ([b] if b is not None else [])
        res = ref_linear(self.v(x), self.v(w), self.v(b) if b is not None else None, layout)
        return self.op(pw.Op.LINEAR, ins, res, [layout], **kw)

    def matmul(self, a, b, **kw):
        return self.op(pw.Op.MATMUL, [a, b], ref_matmul(self.v(a), self.v(b)), **kw)

    def unary(self, opcode, x, approximate=None, **kw):
        attrs = [approximate] if opcode == pw.Op.GELU else []
        return self.op(opcode, [x], ref_unary(opcode, self.v(x), approximate or 0), attrs, **kw)

    def binary(self, opcode, a, b, **kw):
        return self.op(opcode, [a, b], ref_binary(opcode, self.v(a), self.v(b)), **kw)

    def reshape(self, x, shape, **kw):
        return self.op(pw.Op.RESHAPE, [x], T(shape, self.v(x).values), **kw)

    def copy(self, x, **kw):
        return self.op(pw.Op.COPY, [x], T(self.v(x).shape, self.v(x).values), **kw)

    def permute(self, x, perm, **kw):
        return self.op(pw.Op.PERMUTE, [x], ref_permute(self.v(x), perm), list(perm), **kw)

    def softmax(self, x, dim, **kw):
        return self.op(pw.Op.SOFTMAX, [x], ref_softmax(self.v(x), dim), [dim], **kw)

    def layer_norm(self, x, nd, eps, w=None, b=None, **kw):
        ins = [x] + [t for t in (w, b) if t is not None]
        res = ref_layer_norm(self.v(x), nd, eps, self.v(w) if w is not None else None,
                             self.v(b) if b is not None else None)
        attrs = [nd, pw.f64_bits(eps), int(w is not None), int(b is not None)]
        return self.op(pw.Op.LAYER_NORM, ins, res, attrs, **kw)

    def unary_math(self, opcode, x, low=None, high=None, **kw):
        attrs = [pw.f64_bits(low), pw.f64_bits(high)] if opcode == pw.Op.CLAMP else []
        return self.op(opcode, [x], ref_unary_math(opcode, self.v(x), low, high), attrs, **kw)

    def binary_more(self, opcode, a, b, **kw):
        return self.op(opcode, [a, b], ref_binary_more(opcode, self.v(a), self.v(b)), **kw)

    def where(self, c, a, b, **kw):
        kw.setdefault("dtype", self.meta[a][0])
        return self.op(pw.Op.WHERE, [c, a, b], ref_where(self.v(c), self.v(a), self.v(b)), **kw)

    def expand(self, x, shape, **kw):
        kw.setdefault("dtype", self.meta[x][0])
        return self.op(pw.Op.EXPAND, [x], ref_expand(self.v(x), shape), **kw)

    def slice(self, x, dim, start, step, length, **kw):
        kw.setdefault("dtype", self.meta[x][0])
        return self.op(pw.Op.SLICE, [x], ref_slice(self.v(x), dim, start, step, length),
                       [dim, start, step], **kw)

    def cat(self, xs, dim, **kw):
        kw.setdefault("dtype", self.meta[xs[0]][0])
        return self.op(pw.Op.CAT, xs, ref_cat([self.v(x) for x in xs], dim), [dim], **kw)

    def embedding(self, w, idx, **kw):
        kw.setdefault("dtype", self.meta[w][0])
        return self.op(pw.Op.EMBEDDING, [w, idx], ref_embedding(self.v(w), self.v(idx)), **kw)

    def reduce(self, opcode, x, dims, keepdim, **kw):
        mask = sum(1 << d for d in dims)
        return self.op(opcode, [x], ref_reduce(opcode, self.v(x), dims, keepdim),
                       [mask, int(keepdim)], **kw)

    def conv2d(self, x, w, b=None, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1, **kw):
        ins = [x, w] + ([b] if b is not None else [])
        res = ref_conv2d(self.v(x), self.v(w), self.v(b) if b is not None else None, stride,
                         pad, dil, groups)
        return self.op(pw.Op.CONV2D, ins, res, [*stride, *pad, *dil, groups], **kw)

    def max_pool2d(self, x, k, s, p=(0, 0), d=(1, 1), ceil_mode=False, **kw):
        res = ref_max_pool2d(self.v(x), k, s, p, d, ceil_mode)
        return self.op(pw.Op.MAX_POOL2D, [x], res, [*k, *s, *p, *d, int(ceil_mode)], **kw)

    def avg_pool2d(self, x, k, s, p=(0, 0), ceil_mode=False, include_pad=True, divisor=0,
                   **kw):
        res = ref_avg_pool2d(self.v(x), k, s, p, ceil_mode, include_pad, divisor)
        return self.op(pw.Op.AVG_POOL2D, [x], res,
                       [*k, *s, *p, int(ceil_mode), int(include_pad), divisor], **kw)

    def adaptive_avg_pool2d(self, x, oh, ow, **kw):
        return self.op(pw.Op.ADAPTIVE_AVG_POOL2D, [x],
                       ref_adaptive_avg_pool2d(self.v(x), oh, ow), **kw)

    def sdpa(self, q, k, v, mask=None, is_causal=False, scale=None, **kw):
        e = self.meta[q][1][-1]
        scale = 1.0 / math.sqrt(e) if scale is None else scale
        mask_is_bool = mask is not None and self.meta[mask][0] == pw.Dtype.BOOL
        res = ref_sdpa(self.v(q), self.v(k), self.v(v), self.v(mask) if mask is not None
                       else None, mask_is_bool, is_causal, scale)
        ins = [q, k, v] + ([mask] if mask is not None else [])
        return self.op(pw.Op.SDPA, ins, res, [int(is_causal), pw.f64_bits(scale)], **kw)

    def cast(self, x, dtype, **kw):
        src = self.v(x)
        if self.meta[x][0] in (pw.Dtype.INT64, pw.Dtype.INT32, pw.Dtype.BOOL):
            values = T(src.shape, [float(v) for v in src.values])
        else:
            values = src
        return self.op(pw.Op.CAST, [x], ref_cast(values, dtype), dtype=dtype, **kw)

    def case_bytes(self):
        out = bytearray(b"EMBRCASE")
        out += struct.pack("<II", len(self.inputs), len(self.outputs))
        for t in self.inputs + self.outputs:
            dtype, shape = self.meta[t]
            data = encode(dtype, self.values[t].values)
            atol, rtol = TOLERANCE[int(dtype)] if t in self.outputs else (0.0, 0.0)
            out += struct.pack(f"<II{len(shape)}qQdd", int(dtype), len(shape), *shape, len(data),
                               atol, rtol)
            out += data
            out += b"\0" * (-len(out) % 8)
        return bytes(out)


# ---- valid cases -------------------------------------------------------------------------


def case_linear(dtype, layout, bias, seed):
    g = Graph(dtype, seed)
    x = g.input([2, 3, 4])
    w = g.const([5, 4] if layout == 0 else [4, 5])
    b = g.const([5]) if bias else None
    g.linear(x, w, b, layout, output=True)
    return g


def case_matmul_broadcast(dtype=None):
    g = Graph(dtype, 11)
    a = g.input([2, 1, 3, 4])
    b = g.input([3, 4, 5])
    g.matmul(a, b, output=True)
    return g


def case_matmul_2d():
    g = Graph(None, 12)
    a = g.input([3, 4])
    b = g.const([4, 2])
    g.matmul(a, b, output=True)
    return g


def case_wide(dtype=None):
    """N larger than the kernels' row block, through both [K, N] paths."""
    g = Graph(dtype, 13)
    x = g.input([2, 3])
    w = g.const([3, 300])
    b = g.const([300])
    g.linear(x, w, b, 1, output=True)
    bm = g.const([3, 513])
    g.matmul(x, bm, output=True)
    return g


def case_unary(opcode, dtype=None, approximate=None):
    g = Graph(dtype, 20 + int(opcode))
    values = [-8.0, -3.5, -1.0, -0.25, 0.0, 0.125, 0.5, 1.0, 2.75, 6.0, -40.0, 30.0]
    x = g.input([3, 4], values=values)
    g.unary(opcode, x, approximate, output=True)
    return g


def case_binary(opcode, a_shape, b_shape, dtype=None):
    g = Graph(dtype, 30 + int(opcode))
    a = g.input(a_shape)
    if opcode == pw.Op.DIV:
        b = g.input(b_shape, 0.5, 3.0)
    else:
        b = g.input(b_shape)
    g.binary(opcode, a, b, output=True)
    return g


def case_layout():
    g = Graph(None, 40)
    x = g.input([2, 3, 4])
    p = g.permute(x, [2, 0, 1])
    g.reshape(p, [4, 6], output=True)
    g.copy(x, output=True)
    return g


def case_permute_4d(dtype=None):
    g = Graph(dtype, 41)
    x = g.input([2, 3, 4, 5])
    g.permute(x, [3, 1, 0, 2], output=True)
    return g


def case_softmax(dim, dtype=None, scale=1.0):
    g = Graph(dtype, 50 + dim)
    x = g.input([2, 3, 4], -4.0 * scale, 4.0 * scale)
    g.softmax(x, dim, output=True)
    return g


def case_layer_norm(nd, weight, bias, dtype=None):
    g = Graph(dtype, 60 + nd)
    x = g.input([2, 3, 4], -3.0, 5.0)
    normalized = [3, 4][2 - nd:]
    w = g.const(normalized, 0.5, 1.5) if weight else None
    b = g.const(normalized) if bias else None
    g.layer_norm(x, nd, 1e-5, w, b, output=True)
    return g


def case_mlp(dtype=None):
    """linear -> gelu -> linear -> residual add -> layer norm, with intermediates whose
    arena space is reused."""
    g = Graph(dtype, 70)
    x = g.input([4, 8], name="tokens")
    w1 = g.const([16, 8], -0.5, 0.5, name="fc1.weight")
    b1 = g.const([16], name="fc1.bias")
    w2 = g.const([16, 8], -0.5, 0.5, name="fc2.weight")  # layout 1: [K, N]
    h = g.linear(x, w1, b1, 0, name="fc1")
    # A name of 2-, 3- and 4-byte UTF-8 characters: the control for the reader's check
    # (name_not_utf8 below).
    a = g.unary(pw.Op.GELU, h, 1, name="act_\u00fc\u20ac\U0001d6d1")
    o = g.linear(a, w2, None, 1, name="fc2")
    r = g.binary(pw.Op.ADD, o, x, name="residual")
    lw = g.const([8], 0.5, 1.5, name="ln.weight")
    lb = g.const([8], name="ln.bias")
    g.layer_norm(r, 1, 1e-5, lw, lb, output=True, name="hidden")
    g.unary(pw.Op.SILU, h, output=True, name="gate")
    return g


def case_attention(dtype=None):
    g = Graph(dtype, 80)
    q = g.input([2, 3, 4], name="q")
    k = g.input([2, 3, 4], name="k")
    v = g.input([2, 3, 4], name="v")
    kt = g.permute(k, [0, 2, 1])
    s = g.matmul(q, kt)
    scale = g.const([], values=[0.5])
    ss = g.binary(pw.Op.MUL, s, scale)
    p = g.softmax(ss, 2)
    o = g.matmul(p, v)
    g.binary(pw.Op.SUB, o, q, output=True, name="attn_minus_q")
    return g


def case_zero_size():
    g = Graph(None, 90)
    x = g.input([0, 4])
    g.unary(pw.Op.RELU, x, output=True)
    e = g.input([2, 0])
    w = g.const([3, 0])
    b = g.const([3])
    g.linear(e, w, b, 0, output=True)  # K = 0: y is the bias on every row
    return g


def case_constants_only():
    g = Graph(None, 91)
    a = g.const([2, 2])
    b = g.const([2])
    g.binary(pw.Op.ADD, a, b, output=True)
    return g


def case_scalars():
    g = Graph(None, 92)
    a = g.input([])
    b = g.input([])
    c = g.binary(pw.Op.MUL, a, b)
    g.unary(pw.Op.TANH, c, output=True)
    return g


# ---- cases for the ops of convnets, transformers and decoders -----------------------------


def case_conv2d(dtype, seed, x_shape, w_shape, bias, stride, pad, dil, groups):
    g = Graph(dtype, seed)
    x = g.input(x_shape)
    w = g.const(w_shape, -0.5, 0.5)
    b = g.const([w_shape[0]]) if bias else None
    g.conv2d(x, w, b, stride, pad, dil, groups, output=True)
    return g


def case_pools(dtype=None):
    g = Graph(dtype, 101)
    x = g.input([2, 3, 7, 6])
    g.max_pool2d(x, (3, 3), (2, 2), (1, 1), output=True)
    g.max_pool2d(x, (3, 2), (2, 2), (1, 1), (1, 1), True, output=True)  # ceil_mode
    g.max_pool2d(x, (2, 2), (1, 2), (1, 0), (2, 2), output=True)  # dilation
    g.avg_pool2d(x, (2, 2), (2, 2), output=True)
    g.avg_pool2d(x, (3, 3), (2, 2), (1, 1), include_pad=True, output=True)
    g.avg_pool2d(x, (3, 3), (2, 2), (1, 1), include_pad=False, output=True)
    g.avg_pool2d(x, (3, 2), (2, 2), (1, 1), True, False, output=True)  # ceil_mode
    g.avg_pool2d(x, (2, 3), (3, 2), (1, 1), True, True, 5, output=True)  # divisor_override
    g.adaptive_avg_pool2d(x, 1, 1, output=True)
    g.adaptive_avg_pool2d(x, 3, 4, output=True)
    g.adaptive_avg_pool2d(x, 7, 6, output=True)
    return g


def case_reduce(dtype=None):
    g = Graph(dtype, 102)
    x = g.input([2, 3, 4, 5])
    g.reduce(pw.Op.REDUCE_SUM, x, [1], False, output=True)
    g.reduce(pw.Op.REDUCE_MEAN, x, [2, 3], True, output=True)
    g.reduce(pw.Op.REDUCE_MAX, x, [0, 2], False, output=True)
    g.reduce(pw.Op.REDUCE_MEAN, x, [0, 1, 2, 3], False, output=True)
    g.reduce(pw.Op.REDUCE_SUM, x, [3], True, output=True)
    return g


def case_reduce_empty():
    g = Graph(None, 103)
    x = g.input([3, 0, 2])
    g.reduce(pw.Op.REDUCE_SUM, x, [1], False, output=True)  # 0
    g.reduce(pw.Op.REDUCE_MEAN, x, [1], True, output=True)  # NaN
    return g


def case_unary_math(dtype=None):
    g = Graph(dtype, 104)
    values = [-8.0, -3.5, -1.0, -0.25, 0.0, 0.125, 0.5, 1.0, 2.75, 6.0, -40.0, 30.0]
    x = g.input([3, 4], values=values)
    for op in (pw.Op.NEG, pw.Op.EXP, pw.Op.LOG, pw.Op.SQRT, pw.Op.RSQRT, pw.Op.ABS,
               pw.Op.RECIPROCAL):
        g.unary_math(op, x, output=True)
    g.unary_math(pw.Op.CLAMP, x, 0.0, 6.0, output=True)
    g.unary_math(pw.Op.CLAMP, x, -1.0, math.inf, output=True)
    g.unary_math(pw.Op.CLAMP, x, 2.0, 1.0, output=True)  # min > max gives max
    return g


def case_binary_more(dtype=None):
    g = Graph(dtype, 105)
    a = g.input([2, 3, 4], 0.25, 3.0)
    b = g.input([3, 1], -2.0, 2.0)
    g.binary_more(pw.Op.POW, a, b, output=True)
    two = g.const([], values=[2.0])
    g.binary_more(pw.Op.POW, b, two, output=True)
    g.binary_more(pw.Op.MAXIMUM, a, b, output=True)
    g.binary_more(pw.Op.MINIMUM, b, a, output=True)
    return g


def case_where(dtype=None):
    g = Graph(dtype, 106)
    c = g.input([3, 1], dtype=pw.Dtype.BOOL, values=[True, False, True])
    a = g.input([2, 3, 4])
    b = g.const([4])
    g.where(c, a, b, output=True)
    mask = g.const([2, 1, 4], dtype=pw.Dtype.BOOL)
    ninf = g.const([], values=[-math.inf])
    g.where(mask, ninf, a, output=True)
    ia = g.input([3, 4], 0, 9, dtype=pw.Dtype.INT64)
    ib = g.const([1], values=[-7], dtype=pw.Dtype.INT64)
    g.where(c, ia, ib, output=True)
    return g


def case_layout_more(dtype=None):
    g = Graph(dtype, 107)
    x = g.input([3, 1])
    g.expand(x, [2, 3, 4], output=True)
    y = g.input([2, 5, 3])
    g.slice(y, 1, 1, 2, 2, output=True)
    g.slice(y, 2, 0, 1, 3, output=True)
    g.slice(y, 1, 4, 1, 1, output=True)
    g.slice(y, 0, 2, 1, 0, output=True)  # empty
    z = g.input([2, 2, 3])
    c = g.const([2, 1, 3])
    g.cat([y, z, c], 1, output=True)
    g.cat([y, y], 0, output=True)
    g.cat([y], 2, output=True)
    b = g.input([2, 3], dtype=pw.Dtype.BOOL)
    g.expand(b, [4, 2, 3], output=True)
    i = g.input([4, 6], -100, 100, dtype=pw.Dtype.INT64)
    g.slice(i, 1, 1, 3, 2, output=True)
    return g


def case_embedding(dtype=None, index_dtype=None):
    g = Graph(dtype, 108)
    w = g.const([10, 6])
    idx = g.input([2, 3], 0, 9, dtype=index_dtype or pw.Dtype.INT64,
                  values=[0, 9, 3, 3, 7, 1])
    g.embedding(w, idx, output=True)
    one = g.input([], 0, 9, dtype=index_dtype or pw.Dtype.INT64, values=[4])
    g.embedding(w, one, output=True)
    return g


def case_sdpa(dtype=None):
    g = Graph(dtype, 109)
    q = g.input([2, 2, 4, 8])
    k = g.input([2, 2, 5, 8])
    v = g.input([2, 2, 5, 3])
    g.sdpa(q, k, v, output=True)
    g.sdpa(q, k, v, is_causal=True, scale=0.3, output=True)
    bmask = g.const([4, 5], dtype=pw.Dtype.BOOL,
                    values=[True, False, True, True, False,
                            False, False, False, False, False,  # every key masked: zeros
                            True, True, True, True, True,
                            False, True, False, False, False])
    g.sdpa(q, k, v, bmask, output=True)
    fmask = g.const([2, 1, 1, 5], -1.0, 1.0)
    g.sdpa(q, k, v, fmask, output=True)
    kq = g.input([1, 6, 4])
    g.sdpa(kq, kq, kq, is_causal=True, output=True)  # self attention, rank 3
    return g


def case_casts():
    g = Graph(pw.Dtype.FLOAT32, 110)
    x = g.input([2, 4], values=[-2.75, -1.0, -0.5, 0.0, 0.5, 1.5, 70000.0, 3.0])
    g.cast(x, pw.Dtype.FLOAT16, output=True)
    g.cast(x, pw.Dtype.BFLOAT16, output=True)
    g.cast(x, pw.Dtype.INT64, output=True)
    g.cast(x, pw.Dtype.INT32, output=True)
    g.cast(x, pw.Dtype.BOOL, output=True)
    i = g.input([3], dtype=pw.Dtype.INT64, values=[-3, 0, 1 << 40])
    g.cast(i, pw.Dtype.FLOAT32, output=True)
    g.cast(i, pw.Dtype.BOOL, output=True)
    b = g.input([3], dtype=pw.Dtype.BOOL, values=[True, False, True])
    g.cast(b, pw.Dtype.BFLOAT16, output=True)
    g.cast(b, pw.Dtype.INT32, output=True)
    return g


def case_convnet(dtype=None):
    """conv (bias folded from a batch norm) -> relu -> max pool -> depthwise conv ->
    residual add -> adaptive pool -> flatten -> linear."""
    g = Graph(dtype, 111)
    x = g.input([2, 3, 8, 8], name="image")
    c1 = g.conv2d(x, g.const([4, 3, 3, 3], -0.4, 0.4), g.const([4]), (1, 1), (1, 1))
    r1 = g.unary(pw.Op.RELU, c1)
    p1 = g.max_pool2d(r1, (2, 2), (2, 2))
    dw = g.conv2d(p1, g.const([4, 1, 3, 3], -0.4, 0.4), None, (1, 1), (1, 1), (1, 1), 4)
    s = g.binary(pw.Op.ADD, dw, p1)
    a = g.adaptive_avg_pool2d(s, 1, 1)
    f = g.reshape(a, [2, 4])
    g.linear(f, g.const([5, 4]), g.const([5]), 0, output=True, name="logits")
    return g


def case_decoder(dtype=None):
    """embedding -> RMSNorm written out -> causal SDPA over heads -> SiLU-gated MLP."""
    g = Graph(dtype, 112)
    idx = g.input([2, 4], 0, 15, dtype=pw.Dtype.INT64, name="tokens")
    x = g.embedding(g.const([16, 8]), idx)
    sq = g.binary(pw.Op.MUL, x, x)
    ms = g.reduce(pw.Op.REDUCE_MEAN, sq, [2], True)
    eps = g.const([], values=[1e-6])
    r = g.unary_math(pw.Op.RSQRT, g.binary(pw.Op.ADD, ms, eps))
    h = g.binary(pw.Op.MUL, g.binary(pw.Op.MUL, x, r), g.const([8], 0.5, 1.5))
    qkv = g.linear(h, g.const([24, 8], -0.5, 0.5), None, 0)
    q = g.permute(g.reshape(g.slice(qkv, 2, 0, 1, 8), [2, 4, 2, 4]), [0, 2, 1, 3])
    k = g.permute(g.reshape(g.slice(qkv, 2, 8, 1, 8), [2, 4, 2, 4]), [0, 2, 1, 3])
    v = g.permute(g.reshape(g.slice(qkv, 2, 16, 1, 8), [2, 4, 2, 4]), [0, 2, 1, 3])
    a = g.sdpa(q, k, v, is_causal=True)
    a = g.reshape(g.permute(a, [0, 2, 1, 3]), [2, 4, 8])
    x2 = g.binary(pw.Op.ADD, x, g.linear(a, g.const([8, 8], -0.5, 0.5), None, 0))
    gate = g.unary(pw.Op.SILU, g.linear(x2, g.const([12, 8], -0.5, 0.5), None, 0))
    up = g.linear(x2, g.const([12, 8], -0.5, 0.5), None, 0)
    down = g.linear(g.binary(pw.Op.MUL, gate, up), g.const([8, 12], -0.5, 0.5), None, 0)
    g.binary(pw.Op.ADD, x2, down, output=True, name="hidden")
    return g


def case_dynamic(batch, dtype=None):
    """A dynamic batch s0 in [0, 6]: linear, reshape of [s0, 2, 4] to [2*s0, 4], softmax,
    a reduction over a static dim and a concatenation, run at several batch sizes."""
    g = Graph(dtype, 120)
    s = g.symbol(0, 6, batch)
    max_of = lambda shape: [6 * d if i == 0 else d for i, d in enumerate(shape)]  # noqa: E731
    x = g.input([batch, 2, 4], symbols=[s, None, None], max_shape=[6, 2, 4], name="x")
    h = g.linear(x, g.const([4, 4]), g.const([4]), 0, symbols=[s, None, None],
                 max_shape=[6, 2, 4])
    r = g.reshape(h, [2 * batch, 4], symbols=[s, None], max_shape=[12, 4])
    sm = g.softmax(r, 1, symbols=[s, None], max_shape=[12, 4])
    g.reduce(pw.Op.REDUCE_SUM, sm, [1], False, output=True, symbols=[s], max_shape=[12],
             name="row_sums")
    g.cat([sm, r], 1, output=True, symbols=[s, None], max_shape=[12, 8], name="both")
    del max_of
    return g


def case_views(dtype=None):
    """RESHAPEs between intermediates, which the writer makes views (docs/plan-format.md,
    "Memory plan"): a chain of them, two views of one tensor, the chain's first tensor read
    after its views, and a reshape into an output (a copy)."""
    g = Graph(dtype, 125)
    x = g.input([2, 3, 4], name="x")
    a = g.unary(pw.Op.RELU, x)
    v = g.reshape(a, [6, 4])
    v2 = g.reshape(v, [24])
    n = g.unary(pw.Op.TANH, v2)
    n3 = g.reshape(n, [2, 3, 4])
    total = g.binary(pw.Op.ADD, a, n3)
    w = g.reshape(v, [4, 6])
    g.softmax(w, 1, output=True, name="late_view")
    g.reshape(total, [6, 4], output=True, name="sum")
    return g


DYNAMIC_BATCHES = (6, 3, 1, 0)


def valid_cases():
    F32, F16, BF16 = pw.Dtype.FLOAT32, pw.Dtype.FLOAT16, pw.Dtype.BFLOAT16
    cases = {
        "linear_nk_bias": case_linear(F32, 0, True, 1),
        "linear_kn_nobias": case_linear(F32, 1, False, 2),
        "linear_kn_bias_f16": case_linear(F16, 1, True, 3),
        "linear_nk_bias_bf16": case_linear(BF16, 0, True, 4),
        "matmul_broadcast": case_matmul_broadcast(),
        "matmul_broadcast_f16": case_matmul_broadcast(F16),
        "matmul_2d": case_matmul_2d(),
        "wide_rows": case_wide(),
        "wide_rows_bf16": case_wide(BF16),
        "relu": case_unary(pw.Op.RELU),
        "gelu_erf": case_unary(pw.Op.GELU, None, 0),
        "gelu_tanh": case_unary(pw.Op.GELU, None, 1),
        "sigmoid": case_unary(pw.Op.SIGMOID),
        "tanh": case_unary(pw.Op.TANH),
        "silu": case_unary(pw.Op.SILU),
        "gelu_erf_bf16": case_unary(pw.Op.GELU, BF16, 0),
        "sigmoid_f16": case_unary(pw.Op.SIGMOID, F16),
        "add_broadcast": case_binary(pw.Op.ADD, [2, 3, 4], [4]),
        "sub_broadcast": case_binary(pw.Op.SUB, [2, 1, 4], [3, 1]),
        "mul_scalar": case_binary(pw.Op.MUL, [2, 3], []),
        "div_broadcast": case_binary(pw.Op.DIV, [2, 3], [2, 1]),
        "add_both_broadcast_bf16": case_binary(pw.Op.ADD, [4, 1, 3], [1, 5, 1], BF16),
        "mul_same_f16": case_binary(pw.Op.MUL, [3, 5], [3, 5], F16),
        "reshape_permute_copy": case_layout(),
        "permute_4d_bf16": case_permute_4d(BF16),
        "softmax_dim0": case_softmax(0),
        "softmax_dim1": case_softmax(1),
        "softmax_dim2_large": case_softmax(2, None, 300.0),
        "softmax_dim2_f16": case_softmax(2, F16),
        "layer_norm_affine": case_layer_norm(1, True, True),
        "layer_norm_2d_plain": case_layer_norm(2, False, False),
        "layer_norm_weight_only_bf16": case_layer_norm(1, True, False, BF16),
        "layer_norm_bias_only_f16": case_layer_norm(2, False, True, F16),
        "mlp_f32": case_mlp(F32),
        "mlp_f16": case_mlp(F16),
        "mlp_bf16": case_mlp(BF16),
        "attention_f32": case_attention(F32),
        "attention_bf16": case_attention(BF16),
        "zero_size": case_zero_size(),
        "constants_only": case_constants_only(),
        "scalars": case_scalars(),
        "conv2d_3x3_bias": case_conv2d(F32, 130, [2, 3, 6, 5], [4, 3, 3, 3], True, (1, 1),
                                       (1, 1), (1, 1), 1),
        "conv2d_stride_dilation": case_conv2d(F32, 131, [1, 2, 9, 8], [3, 2, 3, 2], False,
                                              (2, 3), (2, 1), (2, 1), 1),
        "conv2d_depthwise": case_conv2d(F32, 132, [2, 4, 5, 5], [4, 1, 3, 3], True, (1, 1),
                                        (1, 1), (1, 1), 4),
        "conv2d_groups_f16": case_conv2d(F16, 133, [1, 4, 5, 6], [6, 2, 2, 3], True, (1, 2),
                                         (0, 1), (1, 1), 2),
        "conv2d_1x1_bf16": case_conv2d(BF16, 134, [2, 8, 3, 3], [5, 8, 1, 1], True, (1, 1),
                                       (0, 0), (1, 1), 1),
        "pools": case_pools(),
        "pools_f16": case_pools(F16),
        "pools_bf16": case_pools(BF16),
        "reduce": case_reduce(),
        "reduce_f16": case_reduce(F16),
        "reduce_empty": case_reduce_empty(),
        "unary_math": case_unary_math(),
        "unary_math_bf16": case_unary_math(BF16),
        "binary_more": case_binary_more(),
        "binary_more_f16": case_binary_more(F16),
        "where": case_where(),
        "where_bf16": case_where(BF16),
        "layout_more": case_layout_more(),
        "layout_more_f16": case_layout_more(F16),
        "embedding": case_embedding(),
        "embedding_i32_bf16": case_embedding(BF16, pw.Dtype.INT32),
        "sdpa": case_sdpa(),
        "sdpa_f16": case_sdpa(F16),
        "sdpa_bf16": case_sdpa(BF16),
        "casts": case_casts(),
        "convnet": case_convnet(),
        "convnet_bf16": case_convnet(BF16),
        "decoder": case_decoder(),
        "decoder_f16": case_decoder(F16),
        "dynamic_b6": case_dynamic(6),
        "views": case_views(),
        "views_f16": case_views(F16),
    }
    return cases


def dynamic_cases():
    """The same dynamic plan at batch sizes inside its bounds (beside dynamic_b6, its
    largest): what a run at a smaller batch must give."""
    return {f"dynamic_b{b}": case_dynamic(b) for b in DYNAMIC_BATCHES if b != 6}


# ---- malformed corpus --------------------------------------------------------------------

HEADER = {"version": (8, "I"), "header_size": (12, "I"), "plan_size": (16, "Q"),
          "flags": (24, "I"), "tensor_record_size": (28, "I"), "op_record_size": (32, "I"),
          "num_tensors": (36, "I"), "num_ops": (40, "I"), "num_inputs": (44, "I"),
          "num_outputs": (48, "I"), "num_operands": (52, "I"), "arena_size": (56, "Q")}
SECTION = {name: i for i, name in enumerate(("strings", "tensors", "io", "ops", "operands",
                                               "attrs", "constants", "symbols"))}
TENSOR = {"name_offset": (0, "I"), "name_length": (4, "I"), "dtype": (8, "B"),
          "storage": (9, "B"), "rank": (10, "B"), "reserved8": (11, "B"),
          "reserved32": (12, "I"), "data_offset": (16, "Q"), "nbytes": (24, "Q")}
OP = {"opcode": (0, "I"), "first_operand": (4, "I"), "num_inputs": (8, "H"),
      "num_outputs": (10, "H"), "first_attr": (12, "I"), "num_attrs": (16, "I"),
      "reserved": (20, "I")}


class Plan:
    """Mutable view of plan bytes by field name."""

    def __init__(self, data):
        self.b = bytearray(data)

    def get(self, offset, fmt):
        return struct.unpack_from("<" + fmt, self.b, offset)[0]

    def set(self, offset, fmt, value):
        struct.pack_into("<" + fmt, self.b, offset, value)
        return self

    def header(self, field, value=None):
        off, fmt = HEADER[field]
        return self.get(off, fmt) if value is None else self.set(off, fmt, value)

    def section(self, name):
        i = SECTION[name]
        return self.get(64 + 16 * i, "Q"), self.get(72 + 16 * i, "Q")

    def set_section(self, name, offset=None, size=None):
        i = SECTION[name]
        if offset is not None:
            self.set(64 + 16 * i, "Q", offset)
        if size is not None:
            self.set(72 + 16 * i, "Q", size)
        return self

    def tensor_at(self, t):
        return self.section("tensors")[0] + self.header("tensor_record_size") * t

    def tensor(self, t, field, value=None):
        off, fmt = TENSOR[field]
        if value is None:
            return self.get(self.tensor_at(t) + off, fmt)
        return self.set(self.tensor_at(t) + off, fmt, value)

    def dims(self, t, dims, rank=None):
        base = self.tensor_at(t) + 32
        for i in range(8):
            self.set(base + 8 * i, "q", dims[i] if i < len(dims) else 0)
        self.tensor(t, "rank", len(dims) if rank is None else rank)
        return self

    def syms(self, t, symbols):
        """Sets dim_symbols (0: static, k: symbol k - 1) of tensor t."""
        base = self.tensor_at(t) + 96
        for i in range(8):
            self.set(base + i, "B", symbols[i] if i < len(symbols) else 0)
        return self

    def symbol(self, k, low=None, high=None):
        off, _ = self.section("symbols")
        if low is not None:
            self.set(off + 16 * k, "q", low)
        if high is not None:
            self.set(off + 16 * k + 8, "q", high)
        return self

    def op(self, i, field, value=None):
        off, fmt = OP[field]
        at = self.section("ops")[0] + self.header("op_record_size") * i + off
        return self.get(at, fmt) if value is None else self.set(at, fmt, value)

    def op_attr(self, i, k, value):
        """Sets attr word k of op i."""
        return self.attr(self.op(i, "first_attr") + k, value)

    def operand(self, k, value):
        return self.set(self.section("operands")[0] + 4 * k, "I", value)

    def attr(self, k, value):
        return self.set(self.section("attrs")[0] + 8 * k, "q", value)

    def io(self, k, value):
        return self.set(self.section("io")[0] + 4 * k, "I", value)

    def bytes(self):
        return bytes(self.b)


def base_a():
    """x[2,4] -LINEAR(w,b)-> h[2,3] -RELU-> h2[2,3]; ADD(h2, h) -> y[2,3].
    Tensors: 0 x, 1 w, 2 b, 3 h, 4 h2, 5 y. Operands: [0 1 2 3] [3 4] [4 3 5]."""
    w = pw.PlanWriter()
    x = w.add_input("x", pw.Dtype.FLOAT32, [2, 4])
    wt = w.add_constant("w", pw.Dtype.FLOAT32, [3, 4], bytes(48))
    b = w.add_constant("b", pw.Dtype.FLOAT32, [3], bytes(12))
    h = w.add_intermediate("h", pw.Dtype.FLOAT32, [2, 3])
    h2 = w.add_intermediate("h2", pw.Dtype.FLOAT32, [2, 3])
    y = w.add_output("y", pw.Dtype.FLOAT32, [2, 3])
    w.add_op(pw.Op.LINEAR, [x, wt, b], [h], [0])
    w.add_op(pw.Op.RELU, [h], [h2])
    w.add_op(pw.Op.ADD, [h2, h], [y])
    return w.to_bytes()


def base_b():
    """Tensors: 0 x[2,3,4], 1 z[3,5], 2 lw[3], 3 lb[3], 4 p[4,2,3], 5 s, 6 g, 7 n,
    8 r[8,3], 9 y[8,5]. Ops: 0 PERMUTE [2,0,1], 1 SOFTMAX dim 2, 2 GELU 0,
    3 LAYER_NORM [1, eps, 1, 1], 4 RESHAPE, 5 MATMUL. Attrs: 0-2 perm, 3 dim,
    4 approximate, 5-8 layer norm."""
    w = pw.PlanWriter()
    f = pw.Dtype.FLOAT32
    x = w.add_input("x", f, [2, 3, 4])
    z = w.add_input("z", f, [3, 5])
    lw = w.add_constant("lw", f, [3], bytes(12))
    lb = w.add_constant("lb", f, [3], bytes(12))
    p = w.add_intermediate("p", f, [4, 2, 3])
    s = w.add_intermediate("s", f, [4, 2, 3])
    g = w.add_intermediate("g", f, [4, 2, 3])
    n = w.add_intermediate("n", f, [4, 2, 3])
    r = w.add_intermediate("r", f, [8, 3])
    y = w.add_output("y", f, [8, 5])
    w.add_op(pw.Op.PERMUTE, [x], [p], [2, 0, 1])
    w.add_op(pw.Op.SOFTMAX, [p], [s], [2])
    w.add_op(pw.Op.GELU, [s], [g], [0])
    w.add_op(pw.Op.LAYER_NORM, [g, lw, lb], [n], [1, pw.f64_bits(1e-5), 1, 1])
    w.add_op(pw.Op.RESHAPE, [n], [r])
    w.add_op(pw.Op.MATMUL, [r, z], [y])
    return w.to_bytes()


def base_c():
    """a[2,3] + c[3] -> y[2,3]. Tensors: 0 a, 1 c, 2 y."""
    w = pw.PlanWriter()
    a = w.add_input("a", pw.Dtype.FLOAT32, [2, 3])
    c = w.add_constant("c", pw.Dtype.FLOAT32, [3], bytes(12))
    y = w.add_output("y", pw.Dtype.FLOAT32, [2, 3])
    w.add_op(pw.Op.ADD, [a, c], [y])
    return w.to_bytes()


def base_d():
    """Convnet ops. Tensors: 0 x[1,2,5,5], 1 w[2,1,3,3], 2 b[2], 3 c[1,2,5,5], 4 p[1,2,3,3],
    5 ap[1,2,2,2], 6 r[1,2], 7 e[1,2], 8 sl[1,1], 9 y[1,3]. Ops: 0 CONV2D (depthwise,
    padding 1), 1 MAX_POOL2D 3x3/2 pad 1, 2 AVG_POOL2D 2x2/1, 3 REDUCE_MEAN dims 2,3,
    4 CLAMP [0, 6], 5 SLICE dim 1 start 1 step 1, 6 CAT dim 1."""
    w = pw.PlanWriter()
    f = pw.Dtype.FLOAT32
    x = w.add_input("x", f, [1, 2, 5, 5])
    wt = w.add_constant("w", f, [2, 1, 3, 3], bytes(72))
    b = w.add_constant("b", f, [2], bytes(8))
    c = w.add_intermediate("c", f, [1, 2, 5, 5])
    p = w.add_intermediate("p", f, [1, 2, 3, 3])
    ap = w.add_intermediate("ap", f, [1, 2, 2, 2])
    r = w.add_intermediate("r", f, [1, 2])
    e = w.add_intermediate("e", f, [1, 2])
    sl = w.add_intermediate("sl", f, [1, 1])
    y = w.add_output("y", f, [1, 3])
    w.add_op(pw.Op.CONV2D, [x, wt, b], [c], [1, 1, 1, 1, 1, 1, 2])
    w.add_op(pw.Op.MAX_POOL2D, [c], [p], [3, 3, 2, 2, 1, 1, 1, 1, 0])
    w.add_op(pw.Op.AVG_POOL2D, [p], [ap], [2, 2, 1, 1, 0, 0, 0, 1, 0])
    w.add_op(pw.Op.REDUCE_MEAN, [ap], [r], [12, 0])
    w.add_op(pw.Op.CLAMP, [r], [e], [pw.f64_bits(0.0), pw.f64_bits(6.0)])
    w.add_op(pw.Op.SLICE, [e], [sl], [1, 1, 1])
    w.add_op(pw.Op.CAT, [e, sl], [y], [1])
    return w.to_bytes()


def base_e():
    """Dynamic dims. Symbol 0 in [1, 4]. Tensors: 0 x[s0, 3] (recorded [4, 3]), 1 c[3],
    2 h[s0, 3], 3 y[3*s0]. Ops: 0 ADD(x, c) -> h, 1 RESHAPE h -> y."""
    w = pw.PlanWriter()
    f = pw.Dtype.FLOAT32
    s = w.add_symbol(1, 4)
    x = w.add_input("x", f, [4, 3], symbols=[s, None])
    c = w.add_constant("c", f, [3], bytes(12))
    h = w.add_intermediate("h", f, [4, 3], symbols=[s, None])
    y = w.add_output("y", f, [12], symbols=[s])
    w.add_op(pw.Op.ADD, [x, c], [h])
    w.add_op(pw.Op.RESHAPE, [h], [y])
    return w.to_bytes()


def base_f():
    """Transformer ops. Tensors: 0 idx int64[2,3], 1 w[5,4], 2 emb[2,3,4], 3 att[2,3,4],
    4 mask bool[3,4], 5 zero[], 6 y[2,3,4]. Ops: 0 EMBEDDING(w, idx), 1 SDPA(emb, emb, emb)
    causal, 2 WHERE(mask, att, zero). Operands: [1 0 2] [2 2 2 3] [4 3 5 6]."""
    w = pw.PlanWriter()
    f = pw.Dtype.FLOAT32
    idx = w.add_input("idx", pw.Dtype.INT64, [2, 3])
    wt = w.add_constant("w", f, [5, 4], bytes(80))
    emb = w.add_intermediate("emb", f, [2, 3, 4])
    att = w.add_intermediate("att", f, [2, 3, 4])
    mask = w.add_constant("mask", pw.Dtype.BOOL, [3, 4], bytes(12))
    zero = w.add_constant("zero", f, [], bytes(4))
    y = w.add_output("y", f, [2, 3, 4])
    w.add_op(pw.Op.EMBEDDING, [wt, idx], [emb])
    w.add_op(pw.Op.SDPA, [emb, emb, emb], [att], [1, pw.f64_bits(0.5)])
    w.add_op(pw.Op.WHERE, [mask, att, zero], [y])
    return w.to_bytes()


def base_g():
    """RESHAPE views. Tensors: 0 x[4,8], 1 a[4,8], 2 v[32], 3 v2[8,4], 4 b[8,4], 5 y[8,4],
    128 bytes each. Ops: 0 RELU x -> a, 1 RESHAPE a -> v, 2 RESHAPE v -> v2, 3 NEG v2 -> b,
    4 ADD(b, v2) -> y. As written, v and v2 are views of a (offset 0, lives 0..1, 1..2,
    2..4) and b is at 128 (live 3..4)."""
    w = pw.PlanWriter()
    f = pw.Dtype.FLOAT32
    x = w.add_input("x", f, [4, 8])
    a = w.add_intermediate("a", f, [4, 8])
    v = w.add_intermediate("v", f, [32])
    v2 = w.add_intermediate("v2", f, [8, 4])
    b = w.add_intermediate("b", f, [8, 4])
    y = w.add_output("y", f, [8, 4])
    w.add_op(pw.Op.RELU, [x], [a])
    w.add_op(pw.Op.RESHAPE, [a], [v])
    w.add_op(pw.Op.RESHAPE, [v], [v2])
    w.add_op(pw.Op.NEG, [v2], [b])
    w.add_op(pw.Op.ADD, [b, v2], [y])
    data = w.to_bytes()
    plan = Plan(data)
    assert [plan.tensor(t, "data_offset") for t in (1, 2, 3, 4)] == [0, 0, 0, 128], \
        "base_g: the writer no longer makes views of the reshapes"
    return data


INVALID, UNSUPPORTED = "EMBER_INVALID_PLAN", "EMBER_UNSUPPORTED_VERSION"


def malformed_cases():
    A, B, C = base_a(), base_b(), base_c()
    a = lambda: Plan(A)
    b = lambda: Plan(B)
    c = lambda: Plan(C)
    cases = []

    def add(name, data, substring, code=INVALID):
        if isinstance(data, Plan):
            data = data.bytes()
        cases.append((name, data, code, substring))

    # -- header
    add("truncated_half", A[:len(A) // 2], "does not equal the buffer size")
    add("truncated_to_10_bytes", A[:10], "too short to hold the magic")
    add("truncated_inside_header", A[:100], "too short to hold the 176-byte")
    add("empty", b"", "too short to hold the magic")
    add("padded", A + bytes(8), "does not equal the buffer size")
    add("wrong_magic", b"EMBRPLAX" + A[8:], "magic is not")
    add("version_2", a().header("version", 2), "format_version 2 is not supported",
        UNSUPPORTED)
    add("version_0", a().header("version", 0), "format_version 0 is not supported",
        UNSUPPORTED)
    add("header_size_too_small", a().header("header_size", 100), "header_size 100 is below")
    add("header_size_past_buffer", a().header("header_size", len(A) + 8),
        "exceeds the buffer size")
    add("plan_size_mismatch", a().header("plan_size", len(A) + 64),
        "does not equal the buffer size")
    add("flags_nonzero", a().header("flags", 1), "flags 0x1 must be 0")
    add("tensor_record_size_too_small", a().header("tensor_record_size", 80),
        "tensor_record_size 80 is below")
    add("op_record_size_too_small", a().header("op_record_size", 16),
        "op_record_size 16 is below")
    add("num_tensors_zero", a().header("num_tensors", 0), "num_tensors is 0")
    add("num_ops_zero", a().header("num_ops", 0), "num_ops is 0")
    add("num_outputs_zero", a().header("num_outputs", 0), "num_outputs is 0")

    # -- sections
    off, size = a().section("constants")
    add("section_out_of_bounds", a().set_section("constants", size=size + 64),
        "section constants: offset")
    add("section_offset_overflow", a().set_section("strings", offset=(1 << 64) - 8, size=16),
        "exceeds plan_size")
    add("section_inside_header", a().set_section("strings", offset=64), "lies inside the header")
    t_off, _ = a().section("tensors")
    add("misaligned_section", a().set_section("tensors", offset=t_off + 4),
        "section tensors: offset %d is not a multiple of 8" % (t_off + 4))
    add("misaligned_constants", a().set_section("constants", offset=off + 8, size=size - 8),
        "is not a multiple of 64")
    add("overlapping_sections", a().set_section("io", offset=t_off),
        "overlap")
    add("tensor_count_too_large", a().header("num_tensors", 7),
        "num_tensors 7 x tensor_record_size 104 needs 728")
    add("record_size_larger_than_section", a().header("tensor_record_size", 100),
        "count does not match the section")
    add("operand_count_too_large", a().header("num_operands", 10), "section operands is")
    add("io_count_too_large", a().header("num_inputs", 2), "section io is")
    attrs_off, attrs_size = a().section("attrs")
    add("attrs_not_words", a().set_section("attrs", size=attrs_size - 4),
        "not a multiple of 8")

    # -- tensor records
    strings_off, strings_size = a().section("strings")
    add("name_out_of_bounds", a().tensor(0, "name_offset", strings_size),
        "lies outside the strings section")
    add("name_length_zero", a().tensor(0, "name_length", 0), "name_length 0 must be 1..255")
    add("name_length_too_long", a().tensor(0, "name_length", 300), "name_length 300")
    add("name_with_nul", a().set(strings_off + a().tensor(3, "name_offset"), "B", 0),
        "name contains a NUL byte at position 0")
    # Bytes that are not UTF-8 (a stray 0xff; an overlong '/'): names reach logs that
    # decode UTF-8, so the reader refuses them (a valid two-byte 'ü' is the control below).
    add("name_not_utf8", a().set(strings_off + a().tensor(3, "name_offset"), "B", 0xFF),
        "name is not UTF-8 (byte 0 of")
    add("name_overlong_utf8", a().set(strings_off + a().tensor(3, "name_offset"), "H",
                                      0xAFC0), "name is not UTF-8 (byte 0 of")
    add("bad_dtype", a().tensor(0, "dtype", 9), "dtype 9 is not a dtype code")
    add("bad_dtype_zero", a().tensor(0, "dtype", 0), "dtype 0 is not a dtype code")
    add("bad_storage", a().tensor(0, "storage", 7), "storage 7 is not a storage code")
    add("rank_too_large", a().tensor(0, "rank", 9), "rank 9 exceeds the maximum of 8")
    add("negative_dim", a().dims(0, [-2, 4]), "dims[0] is -2; dims must be >= 0")
    add("dim_past_rank", a().dims(0, [2, 4, 5], rank=2), "dims[2] is 5 past rank 2")
    add("nbytes_mismatch", a().tensor(0, "nbytes", 36), "nbytes 36 does not equal")
    add("dims_product_overflow", a().dims(0, [1 << 32, 1 << 32, 2]),
        "the product of dims overflows")
    add("nbytes_overflow", a().dims(0, [1 << 62, 1]), "x dtype size 4 overflows")
    add("reserved_tensor_field", a().tensor(0, "reserved32", 1), "reserved fields must be 0")
    add("input_with_data_offset", a().tensor(0, "data_offset", 64),
        "must be 0 for storage input")
    add("constant_out_of_section", a().tensor(1, "data_offset", 4096),
        "data_offset 4096 + nbytes 48 exceeds the constants section")
    add("constant_misaligned", a().tensor(1, "data_offset", 4), "is not a multiple of 64")
    add("intermediate_misaligned", a().tensor(4, "data_offset", 8),
        "data_offset 8 (storage intermediate) is not a multiple of 64")

    # -- op records
    add("unknown_opcode", a().op(0, "opcode", 99), "opcode 99 is not an opcode")
    add("opcode_zero", a().op(1, "opcode", 0), "op 1: opcode 0 is not an opcode")
    add("op_reserved_field", a().op(0, "reserved", 5), "op 0 (LINEAR): reserved field")

    # -- io table
    add("io_index_out_of_range", a().io(0, 99), "io: input 0 names tensor 99")
    add("io_input_names_constant", a().io(0, 1),
        "io: input 0 names tensor 1 ('w') of storage constant")
    add("io_output_names_input", a().io(1, 0),
        "io: output 0 names tensor 0 ('x') of storage input")
    add("input_missing_from_io",
        a().tensor(2, "storage", 0).tensor(2, "data_offset", 0),
        "tensor 2 ('b'): this input is missing from the io table")
    add("io_duplicate_input", b().io(1, 0).tensor(1, "storage", 0),
        "io: input 1 names tensor 0 ('x'), already named by input 0")

    # -- ops: operands, counts, dataflow
    add("operand_out_of_range", a().operand(1, 99), "is tensor 99; the plan has 6 tensors")
    add("operand_slice_out_of_range", a().op(2, "first_operand", 8),
        "op 2 (ADD): operands [8, 11) exceed the operand table (9 entries)")
    add("attr_slice_out_of_range", a().op(0, "first_attr", 100),
        "op 0 (LINEAR): attrs [100, 101) exceed")
    add("wrong_attr_count", a().op(1, "num_attrs", 1).op(1, "first_attr", 0), "op 1 (RELU): takes 0 attrs, has 1")
    add("wrong_input_count", a().op(1, "num_inputs", 2), "op 1 (RELU): takes 1 inputs, has 2")
    add("wrong_output_count", a().op(1, "num_outputs", 2), "takes 1 outputs, has 2")
    ops_off, _ = a().section("ops")
    swapped = a()
    swapped.b[ops_off:ops_off + 48] = A[ops_off + 24:ops_off + 48] + A[ops_off:ops_off + 24]
    add("reads_before_write", swapped,
        "op 0 (RELU): input 0 reads tensor 3 ('h') before any op writes it")
    add("tensor_written_twice", a().operand(5, 3),
        "writes tensor 3 ('h'), already written by op 0")
    add("writes_constant", a().operand(3, 1), "writes tensor 1 ('w') of storage constant")
    add("writes_input", a().operand(3, 0), "writes tensor 0 ('x') of storage input")
    _, ops_size = a().section("ops")
    add("output_never_written", a().header("num_ops", 2).set_section("ops", size=ops_size - 24),
        "tensor 5 ('y'): this output is never written by an op")

    # -- dtypes and shapes
    add("dtype_mismatch", a().tensor(4, "dtype", 2).tensor(4, "nbytes", 12),
        "op 1 (RELU): tensor 'h2' has dtype float16, but 'h' has float32")
    add("integer_dtype_in_op", a().tensor(0, "dtype", 5),
        "tensor 'x' has dtype int32; this op computes on float32")
    add("shape_mismatch", a().dims(5, [3, 2]),
        "op 2 (ADD): output 'y' has shape [3, 2], expected [2, 3]")
    add("linear_k_mismatch", a().dims(1, [4, 3]), "does not match K = 4")
    add("linear_bad_layout", a().attr(0, 2), "weight_layout 2 must be 0")
    add("linear_bias_shape", a().dims(2, [1, 3]), "bias 'b' has shape [1, 3], expected [3]")
    add("broadcast_incompatible", c().dims(1, [2]).tensor(1, "nbytes", 8),
        "shapes [2, 3] and [2] do not broadcast")
    add("bad_permutation", b().attr(1, 2), "perm[1] = 2 makes perm not a permutation of 0..2")
    add("permute_attr_count", b().op(0, "num_attrs", 2),
        "takes 3 attrs (one per dim of its input), has 2")
    add("softmax_dim_out_of_range", b().attr(3, 3), "dim 3 is out of range for rank 3")
    add("gelu_bad_approximate", b().attr(4, 2), "approximate 2 must be 0 (erf) or 1 (tanh)")
    add("layer_norm_bad_flag", b().attr(7, 2), "has_weight 2 and has_bias 1 must each be 0 or 1")
    add("layer_norm_flag_input_count", b().attr(8, 0), "op 3 (LAYER_NORM): takes 2 inputs, has 3")
    add("layer_norm_nan_eps", b().attr(6, pw.f64_bits(float("nan"))), "must be finite and >= 0")
    add("layer_norm_ndim_too_large", b().attr(5, 4), "normalized_ndim 4 must be in 1..3")
    add("reshape_count_mismatch", b().dims(8, [8, 4]).tensor(8, "nbytes", 128),
        "element counts differ")
    add("matmul_inner_mismatch", b().dims(1, [5, 3]), "inner dims differ")
    add("matmul_rank_too_small", b().dims(1, [15]), "inputs need rank >= 2")

    # -- ops of convnets and transformers
    D, E, F = base_d(), base_e(), base_f()
    d = lambda: Plan(D)  # noqa: E731
    e = lambda: Plan(E)  # noqa: E731
    f = lambda: Plan(F)  # noqa: E731
    add("conv_groups_mismatch", d().op_attr(0, 6, 3),
        "op 0 (CONV2D): groups 3 does not fit x [1, 2, 5, 5] and weight [2, 1, 3, 3]")
    # Zero elements, so dims[1] * groups overflows without any nbytes check catching it.
    add("conv_groups_overflow",
        d().dims(1, [0, 2**62, 3, 3]).tensor(1, "nbytes", 0).op_attr(0, 6, 2),
        "op 0 (CONV2D): groups 2 does not fit x [1, 2, 5, 5] and weight [0, 4611686018427387904")
    add("conv_zero_stride", d().op_attr(0, 0, 0), "op 0 (CONV2D): attr 0 is 0")
    add("conv_output_shape", d().op_attr(0, 2, 0),
        "op 0 (CONV2D): output 'c' has shape [1, 2, 5, 5], expected [1, 2, 3, 5]")
    add("conv_weight_rank", d().dims(1, [2, 9]),
        "x [1, 2, 5, 5] and w [2, 9] must have rank 4")
    add("pool_padding_too_large", d().op_attr(1, 4, 2),
        "op 1 (MAX_POOL2D): padding 2 exceeds half the kernel extent 3")
    add("pool_bad_ceil_mode", d().op_attr(1, 8, 2), "ceil_mode 2 must be 0 or 1")
    add("pool_output_shape", d().op_attr(1, 2, 1),
        "op 1 (MAX_POOL2D): output 'p' has shape [1, 2, 3, 3], expected [1, 2, 5, 3]")
    add("avg_pool_negative_divisor", d().op_attr(2, 8, -1),
        "op 2 (AVG_POOL2D): divisor_override -1 must be in 0..2^30")
    add("avg_pool_bad_count_include_pad", d().op_attr(2, 7, 3), "count_include_pad 3")
    add("reduce_empty_mask", d().op_attr(3, 0, 0),
        "op 3 (REDUCE_MEAN): dim_mask 0 must name one or more of the 4 dims")
    add("reduce_mask_past_rank", d().op_attr(3, 0, 16), "dim_mask 16 must name")
    add("reduce_bad_keepdim", d().op_attr(3, 1, 2), "keepdim 2 must be 0 or 1")
    add("reduce_output_shape", d().op_attr(3, 1, 1),
        "output 'r' has shape [1, 2], expected [1, 2, 1, 1]")
    add("clamp_nan_bound", d().op_attr(4, 1, pw.f64_bits(float("nan"))),
        "op 4 (CLAMP): max is NaN")
    add("slice_out_of_range", d().op_attr(5, 1, 2),
        "op 5 (SLICE): start 2, step 1 and length 1 do not fit in dims[1] = 2")
    add("slice_zero_step", d().op_attr(5, 2, 0), "start 1, step 0")
    add("slice_bad_dim", d().op_attr(5, 0, 2), "op 5 (SLICE): dim 2 is out of range for rank 2")
    add("cat_bad_dim", d().op_attr(6, 0, 2), "op 6 (CAT): dim 2 is out of range for rank 2")
    add("cat_output_shape", d().op_attr(6, 0, 0),
        "op 6 (CAT): input 1 'sl' [1, 1] differs from input 0 [1, 2] outside dim 0")
    add("embedding_float_indices", f().tensor(0, "dtype", 1).tensor(0, "nbytes", 24),
        "op 0 (EMBEDDING): indices 'idx' have dtype float32; they must be int64 or int32")
    add("embedding_output_shape", f().dims(2, [2, 3, 5]).tensor(2, "nbytes", 120),
        "op 0 (EMBEDDING): output 'emb' has shape [2, 3, 5], expected [2, 3, 4]")
    add("sdpa_bad_causal_flag", f().op_attr(1, 0, 2), "op 1 (SDPA): is_causal 2 must be 0 or 1")
    add("sdpa_infinite_scale", f().op_attr(1, 1, pw.f64_bits(float("inf"))),
        "op 1 (SDPA): scale inf must be finite")
    add("sdpa_shapes", f().op(1, "num_inputs", 2).op(1, "num_outputs", 2),
        "op 1 (SDPA): takes 3 to 4 inputs, has 2")
    add("where_float_condition", f().operand(7, 3),
        "op 2 (WHERE): condition 'att' has dtype float32; it must be bool")
    add("where_mask_broadcast", f().dims(4, [12]),
        "op 2 (WHERE): shapes [12] and [2, 3, 4] do not broadcast")
    add("symbol_bounds", e().symbol(0, low=5), "symbol 0: bounds [5, 4] must satisfy")
    add("symbol_max_zero", e().symbol(0, low=0, high=0), "symbol 0: bounds [0, 0] must satisfy")
    add("symbols_section_size", e().set_section("symbols", size=8),
        "section symbols is 8 bytes; it must hold whole 16-byte records")
    add("symbol_index_out_of_range", e().syms(0, [2]),
        "tensor 0 ('x'): dim_symbols[0] names symbol 1; the plan has 1 symbols")
    add("symbol_past_rank", e().syms(2, [1, 0, 1]),
        "tensor 2 ('h'): dim_symbols[2] is 1 past rank 2")
    add("symbolic_constant", e().syms(1, [1]),
        "tensor 1 ('c'): a constant cannot have a dynamic dim")
    add("symbolic_dim_not_a_multiple", e().dims(0, [6, 3]).tensor(0, "nbytes", 72),
        "tensor 0 ('x'): dims[0] = 6 is not a positive multiple of symbol 0's max 4")
    add("symbol_not_bound_by_an_input", e().syms(0, [0, 0]),
        "symbol 0 is not a dim of any input")
    add("dynamic_dim_against_static", e().syms(2, [0, 0]),
        "op 0 (ADD): output 'h' has shape [4, 3], expected [s0, 3]")
    add("dynamic_reshape_mismatch", e().syms(3, [0]),
        "op 1 (RESHAPE): element counts differ: input [s0, 3] has 12, output [12] has 12 "
        "(or differ for some value of the symbols)")

    # -- memory plan
    arena = a().header("arena_size")
    add("intermediate_outside_arena", a().tensor(4, "data_offset", arena),
        "intermediate at data_offset %d + nbytes 24 lies outside the arena" % arena)
    add("arena_too_small", a().header("arena_size", 64), "lies outside the arena (arena_size 64)")
    add("overlapping_live_intermediates", a().tensor(4, "data_offset", a().tensor(3, "data_offset")),
        "share arena bytes while both are live")
    # A RESHAPE may share bytes with its input only at the same offset (a view), and a view
    # lets no other tensor on its bytes.
    G = base_g()
    g = lambda: Plan(G)  # noqa: E731
    add("reshape_partly_on_its_input", g().tensor(2, "data_offset", 64),
        "tensors 1 ('a', live ops 0..1) and 2 ('v', live ops 1..2) share arena bytes")
    add("reshape_of_a_view_partly_on_it", g().tensor(3, "data_offset", 64),
        "tensors 2 ('v', live ops 1..2) and 3 ('v2', live ops 2..4) share arena bytes")
    add("op_in_place_on_a_view", g().tensor(4, "data_offset", 0),
        "tensors 3 ('v2', live ops 2..4) and 4 ('b', live ops 3..4) share arena bytes")
    return cases


def copy_views(data):
    """The same plan with every RESHAPE view (output at its input's offset) moved to bytes
    of its own past the arena, as writers before views placed them: the executors copy
    those, with the same results."""
    plan = Plan(data)
    operands = plan.section("operands")[0]
    inter = int(pw.Storage.INTERMEDIATE)
    views = []  # all found before any moves, so a view of a view is one too
    for i in range(plan.header("num_ops")):
        if plan.op(i, "opcode") != pw.Op.RESHAPE:
            continue
        first = plan.op(i, "first_operand")
        x, y = (plan.get(operands + 4 * (first + k), "I") for k in range(2))
        if (plan.tensor(x, "storage") == inter and plan.tensor(y, "storage") == inter and
                plan.tensor(x, "data_offset") == plan.tensor(y, "data_offset")):
            views.append(y)
    assert views, "the plan has no views"
    arena = plan.header("arena_size")
    for y in views:
        plan.tensor(y, "data_offset", arena)
        arena += (plan.tensor(y, "nbytes") + 63) // 64 * 64
    return plan.header("arena_size", arena).bytes()


def widen_plan(data, extra_header=16, extra_tensor=8, extra_op=8, filler=0xA5):
    """The same plan with a longer header and longer tensor and op records, as a later
    writer might produce; the extra bytes hold `filler`, which a version 1 reader must
    ignore. Sections are laid out again in order with the format's alignment."""
    src = Plan(data)
    old_header = src.header("header_size")
    tensor_record = src.header("tensor_record_size")
    op_record = src.header("op_record_size")
    header_size = old_header + extra_header
    names = ("strings", "tensors", "io", "ops", "operands", "attrs", "constants", "symbols")
    bodies = []
    for name in names:
        off, size = src.section(name)
        body = data[off:off + size]
        if name in ("tensors", "ops"):
            record = tensor_record if name == "tensors" else op_record
            extra = extra_tensor if name == "tensors" else extra_op
            body = b"".join(body[i:i + record] + bytes([filler]) * extra
                            for i in range(0, len(body), record))
        bodies.append(body)
    out = bytearray(data[:old_header]) + bytes([filler]) * extra_header
    cursor = header_size
    offsets = []
    for i, body in enumerate(bodies):
        align = 64 if names[i] == "constants" else 8
        cursor = (cursor + align - 1) // align * align
        offsets.append(cursor)
        cursor += len(body)
    out += bytes(cursor - len(out))
    for i, (offset, body) in enumerate(zip(offsets, bodies)):
        out[offset:offset + len(body)] = body
        struct.pack_into("<QQ", out, 64 + 16 * i, offset, len(body))
    struct.pack_into("<IQ", out, 12, header_size, len(out))
    struct.pack_into("<II", out, 28, tensor_record + extra_tensor, op_record + extra_op)
    return bytes(out)


# ---- float format table ------------------------------------------------------------------


def write_float_formats(path):
    """u32 count, then per entry: u32 float32 bits, u16 float16 bits, u16 bfloat16 bits
    (round-to-nearest-even of that float32); then u32 count2 and per entry u16 float16
    bits, u32 float32 bits of its exact value (all non-NaN float16 values)."""
    rng = random.Random(7)
    values = [0.0, -0.0, 1.0, -1.0, 0.5, 65504.0, 65519.99, 65520.0, 1e9, -1e9, 2.0 ** -24,
              2.0 ** -25, 3 * 2.0 ** -25, 2.0 ** -26, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25,
              1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8,
              float("inf"), float("-inf"), 3.4028234663852886e38, 1e-40, 1.17549435e-38,
              0.1, 1.0 / 3.0, math.pi, -math.e]
    for _ in range(20000):
        bits = rng.getrandbits(32)
        if (bits & 0x7F800000) == 0x7F800000 and (bits & 0x7FFFFF):
            continue  # NaN: checked by class in the C test
        values.append(f32_from_bits(bits))
    for _ in range(5000):
        values.append(rng.uniform(-70000.0, 70000.0))
        values.append(rng.uniform(-1e-4, 1e-4))
    out = bytearray(struct.pack("<I", len(values)))
    for v in values:
        v32 = round_f32(v)
        out += struct.pack("<IHH", f32_bits(v32), f16_bits(v32), bf16_bits_of_f32(v32))
    halves = [h for h in range(65536) if not ((h & 0x7C00) == 0x7C00 and (h & 0x3FF))]
    out += struct.pack("<I", len(halves))
    for h in halves:
        v = struct.unpack("<e", struct.pack("<H", h))[0]
        out += struct.pack("<HI", h, f32_bits(v))
    with open(path, "wb") as f:
        f.write(out)


# ---- main --------------------------------------------------------------------------------


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main(argv):
    global pw
    if len(argv) != 3:
        sys.stderr.write("usage: make_test_plans.py PLAN_WRITER_PY OUT_DIR\n")
        return 2
    pw = load_writer(argv[1])
    global INT_DTYPES
    INT_DTYPES = (pw.Dtype.INT64, pw.Dtype.INT32, pw.Dtype.BOOL)
    out = argv[2]
    valid_dir = os.path.join(out, "valid")
    malformed_dir = os.path.join(out, "malformed")
    os.makedirs(valid_dir, exist_ok=True)
    os.makedirs(malformed_dir, exist_ok=True)

    names = []
    global valid_cases_cache
    valid_cases_cache = valid_cases()
    for name, graph in valid_cases_cache.items():
        plan = graph.w.to_bytes()
        assert plan == graph.w.to_bytes(), f"{name}: writer output is not deterministic"
        write(os.path.join(valid_dir, name + ".plan"), plan)
        write(os.path.join(valid_dir, name + ".case"), graph.case_bytes())
        names.append(name)
    # A plan with longer header and records than version 1 writes: readers ignore the
    # extra bytes (docs/plan-format.md), so it must run exactly like mlp_f32.
    mlp = case_mlp(pw.Dtype.FLOAT32)
    write(os.path.join(valid_dir, "wider_records.plan"), widen_plan(mlp.w.to_bytes()))
    write(os.path.join(valid_dir, "wider_records.case"), mlp.case_bytes())
    names.append("wider_records")
    # The same plans with their RESHAPE views copied instead (separate offsets, as plans
    # written before views were): they mean the same and must give the same outputs.
    for name in ("views", "decoder"):
        write(os.path.join(valid_dir, name + "_copied.plan"),
              copy_views(valid_cases_cache[name].w.to_bytes()))
        write(os.path.join(valid_dir, name + "_copied.case"),
              valid_cases_cache[name].case_bytes())
        names.append(name + "_copied")
    with open(os.path.join(valid_dir, "cases.txt"), "w") as f:
        f.write("".join(n + "\n" for n in names))
    dynamic_names = []
    largest = valid_cases_cache["dynamic_b6"].w.to_bytes()
    for name, graph in dynamic_cases().items():
        plan = graph.w.to_bytes()
        assert plan == largest, f"{name}: the plan depends on the batch"
        write(os.path.join(valid_dir, name + ".plan"), plan)
        write(os.path.join(valid_dir, name + ".case"), graph.case_bytes())
        dynamic_names.append(name)
    with open(os.path.join(valid_dir, "dynamic.txt"), "w") as f:
        f.write("".join(n + "\n" for n in ["dynamic_b6"] + dynamic_names))

    manifest = []
    seen = set()
    for name, data, code, substring in malformed_cases():
        assert name not in seen, name
        seen.add(name)
        write(os.path.join(malformed_dir, name + ".plan"), data)
        manifest.append(f"{name}\t{code}\t{substring}\n")
    with open(os.path.join(malformed_dir, "manifest.txt"), "w") as f:
        f.write("".join(manifest))

    write_float_formats(os.path.join(out, "float_formats.bin"))
    print(f"wrote {len(names)} valid plans and {len(manifest)} malformed plans to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Writer for the Ember plan format, version 1 (docs/plan-format.md).

This module is the format's only writer; engine/src/plan_reader.c is its only reader.
It is pure standard library and imports nothing from the `ember` package, so tests and
tools can load it by file path (importlib.util.spec_from_file_location) without
ExecuTorch installed.

Usage:

    w = PlanWriter()
    x = w.add_input("x", Dtype.FLOAT32, [2, 4])
    wt = w.add_constant("w", Dtype.FLOAT32, [3, 4], weight_bytes)
    y = w.add_output("y", Dtype.FLOAT32, [2, 3])
    w.add_op(Op.LINEAR, [x, wt], [y], [0])
    plan = w.to_bytes()

Dynamic dims: `s = w.add_symbol(1, 64)` declares a symbol with bounds; a tensor dim that
is `c * s` is written as its value at the symbol's maximum (c * 64) with `symbols=[s, ...]`
naming the symbol of each dim (None for a static dim):

    s = w.add_symbol(1, 64)
    x = w.add_input("x", Dtype.FLOAT32, [64, 4], symbols=[s, None])

`to_bytes` checks what the engine's verifier checks (raising ValueError naming the
problem), places intermediates in one arena (64-byte aligned, reusing memory of tensors
whose last reader has run; a RESHAPE between intermediates shares its input's bytes) and
lays out the sections. Output is deterministic: the same calls give the same bytes.
"""

from __future__ import annotations

import math
import struct
from enum import IntEnum
from typing import Dict, List, Optional, Sequence, Tuple

__all__ = [
    "Dtype",
    "Storage",
    "Op",
    "f64_bits",
    "PlanWriter",
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "TENSOR_RECORD_SIZE",
    "OP_RECORD_SIZE",
    "MAX_RANK",
    "MAGIC",
    "SECTION_NAMES",
    "DTYPE_SIZE",
    "SYMBOL_RECORD_SIZE",
]

MAGIC = b"EMBRPLAN"
FORMAT_VERSION = 1
HEADER_SIZE = 192
TENSOR_RECORD_SIZE = 104
OP_RECORD_SIZE = 24
MAX_RANK = 8
SECTION_ALIGN = 8
DATA_ALIGN = 64
MAX_NAME_LENGTH = 255
# In the order of the header's section table; the file places symbols before constants.
SECTION_NAMES = ("strings", "tensors", "io", "ops", "operands", "attrs", "constants",
                 "symbols")
SYMBOL_RECORD_SIZE = 16
MAX_SYMBOLS = 255

_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1
_U32_MAX = (1 << 32) - 1
_U16_MAX = (1 << 16) - 1


class Dtype(IntEnum):
    FLOAT32 = 1
    FLOAT16 = 2
    BFLOAT16 = 3
    INT64 = 4
    INT32 = 5
    BOOL = 6


class Storage(IntEnum):
    INPUT = 0
    OUTPUT = 1
    INTERMEDIATE = 2
    CONSTANT = 3


class Op(IntEnum):
    LINEAR = 1
    MATMUL = 2
    RELU = 3
    GELU = 4
    SIGMOID = 5
    TANH = 6
    SILU = 7
    ADD = 8
    SUB = 9
    MUL = 10
    DIV = 11
    RESHAPE = 12
    PERMUTE = 13
    SOFTMAX = 14
    LAYER_NORM = 15
    COPY = 16
    CONV2D = 17
    MAX_POOL2D = 18
    AVG_POOL2D = 19
    ADAPTIVE_AVG_POOL2D = 20
    REDUCE_SUM = 21
    REDUCE_MEAN = 22
    REDUCE_MAX = 23
    POW = 24
    NEG = 25
    EXP = 26
    LOG = 27
    SQRT = 28
    RSQRT = 29
    ABS = 30
    RECIPROCAL = 31
    CLAMP = 32
    WHERE = 33
    EXPAND = 34
    SLICE = 35
    CAT = 36
    EMBEDDING = 37
    SDPA = 38
    CAST = 39
    MAXIMUM = 40
    MINIMUM = 41


DTYPE_SIZE = {
    Dtype.FLOAT32: 4,
    Dtype.FLOAT16: 2,
    Dtype.BFLOAT16: 2,
    Dtype.INT64: 8,
    Dtype.INT32: 4,
    Dtype.BOOL: 1,
}
_FLOAT_DTYPES = (Dtype.FLOAT32, Dtype.FLOAT16, Dtype.BFLOAT16)
_UNARY_OPS = (Op.RELU, Op.GELU, Op.SIGMOID, Op.TANH, Op.SILU, Op.NEG, Op.EXP, Op.LOG,
              Op.SQRT, Op.RSQRT, Op.ABS, Op.RECIPROCAL, Op.CLAMP)
_BINARY_OPS = (Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW, Op.MAXIMUM, Op.MINIMUM)
_REDUCE_OPS = (Op.REDUCE_SUM, Op.REDUCE_MEAN, Op.REDUCE_MAX)
# Ops that move elements without computing on them: any dtype, one for all their tensors.
_LAYOUT_OPS = (Op.RESHAPE, Op.PERMUTE, Op.COPY, Op.EXPAND, Op.SLICE, Op.CAT)
# Fixed attr counts (PERMUTE: the input's rank; LAYER_NORM: 4, checked with its flags).
_ATTR_COUNTS = {
    Op.LINEAR: 1, Op.GELU: 1, Op.SOFTMAX: 1, Op.CONV2D: 7, Op.MAX_POOL2D: 9,
    Op.AVG_POOL2D: 9, Op.REDUCE_SUM: 2, Op.REDUCE_MEAN: 2, Op.REDUCE_MAX: 2, Op.CLAMP: 2,
    Op.SLICE: 3, Op.CAT: 1, Op.SDPA: 2,
}
# Input counts: (min, max).
_INPUT_COUNTS = {
    Op.LINEAR: (2, 3), Op.MATMUL: (2, 2), Op.CONV2D: (2, 3), Op.WHERE: (3, 3),
    Op.EMBEDDING: (2, 2), Op.SDPA: (3, 4), Op.CAT: (1, _U16_MAX),
}
for _op in _BINARY_OPS:
    _INPUT_COUNTS[_op] = (2, 2)

_ONE = (1, None)  # a static dim of size 1


def f64_bits(x: float) -> int:
    """The IEEE-754 bit pattern of `x` as a signed 64-bit word (how attrs store f64)."""
    return struct.unpack("<q", struct.pack("<d", float(x)))[0]


def _f64_from_bits(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<q", bits))[0]


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def _broadcast(a: Sequence, b: Sequence) -> Optional[List]:
    """NumPy broadcast of two shapes aligned at the last dim; None if incompatible.
    A dim is a (value, symbol) pair. Two dims match when they are equal (for symbolic
    dims: the same symbol and coefficient), or one of them is a static 1."""
    rank = max(len(a), len(b))
    a = [_ONE] * (rank - len(a)) + list(a)
    b = [_ONE] * (rank - len(b)) + list(b)
    out = []
    for da, db in zip(a, b):
        if da == db or db == _ONE:
            out.append(da)
        elif da == _ONE:
            out.append(db)
        else:
            return None
    return out


def _pool_output_size(size: int, kernel: int, stride: int, pad: int, dilation: int,
                      ceil_mode: int) -> int:
    """PyTorch's pooling output size (pooling_output_shape); callers check that
    size + 2 * pad >= dilation * (kernel - 1) + 1 first."""
    numerator = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = numerator // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


class _Tensor:
    __slots__ = ("index", "name", "dtype", "storage", "dims", "syms", "nbytes", "data",
                 "data_offset")

    def __init__(self, index, name, dtype, storage, dims, syms, nbytes, data):
        self.index = index
        self.name = name
        self.dtype = dtype
        self.storage = storage
        self.dims = dims
        self.syms = syms  # per dim: a symbol index, or None for a static dim
        self.nbytes = nbytes
        self.data = data
        self.data_offset = 0

    def shape(self) -> List[Tuple[int, Optional[int]]]:
        return list(zip(self.dims, self.syms))


class _OpRecord:
    __slots__ = ("opcode", "inputs", "outputs", "attrs")

    def __init__(self, opcode, inputs, outputs, attrs):
        self.opcode = opcode
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs


class PlanWriter:
    """Collects symbols, tensors and ops, then writes a version 1 plan with `to_bytes`.

    Tensor indices are assigned in call order across all `add_*` calls. Inputs and
    outputs appear in the I/O table in the order of their `add_input`/`add_output`
    calls, which must be the order in which ExecuTorch passes the delegate's arguments.
    """

    def __init__(self) -> None:
        self._tensors: List[_Tensor] = []
        self._inputs: List[int] = []
        self._outputs: List[int] = []
        self._ops: List[_OpRecord] = []
        self._symbols: List[Tuple[int, int]] = []

    # ---- symbols -------------------------------------------------------------------

    def add_symbol(self, min_value: int, max_value: int) -> int:
        """Declares a dynamic dim size with bounds 0 <= min_value <= max_value, max_value
        >= 1; returns its index for the `symbols` argument of add_input and friends."""
        index = len(self._symbols)
        if index >= MAX_SYMBOLS:
            raise ValueError(f"a plan holds at most {MAX_SYMBOLS} symbols")
        lo, hi = int(min_value), int(max_value)
        if not (0 <= lo <= hi and hi >= 1 and hi <= _I64_MAX):
            raise ValueError(f"symbol {index}: bounds [{lo}, {hi}] must satisfy "
                             f"0 <= min <= max, max >= 1")
        self._symbols.append((lo, hi))
        return index

    # ---- tensors -------------------------------------------------------------------

    def add_input(self, name: str, dtype: Dtype, shape: Sequence[int],
                  symbols: Optional[Sequence[Optional[int]]] = None) -> int:
        index = self._add_tensor(name, dtype, shape, Storage.INPUT, None, symbols)
        self._inputs.append(index)
        return index

    def add_output(self, name: str, dtype: Dtype, shape: Sequence[int],
                   symbols: Optional[Sequence[Optional[int]]] = None) -> int:
        index = self._add_tensor(name, dtype, shape, Storage.OUTPUT, None, symbols)
        self._outputs.append(index)
        return index

    def add_intermediate(self, name: str, dtype: Dtype, shape: Sequence[int],
                         symbols: Optional[Sequence[Optional[int]]] = None) -> int:
        return self._add_tensor(name, dtype, shape, Storage.INTERMEDIATE, None, symbols)

    def add_constant(self, name: str, dtype: Dtype, shape: Sequence[int], data: bytes) -> int:
        return self._add_tensor(name, dtype, shape, Storage.CONSTANT, bytes(data), None)

    def _add_tensor(self, name, dtype, shape, storage, data, symbols) -> int:
        index = len(self._tensors)
        where = f"tensor {index} ({name!r})"
        if not isinstance(name, str):
            raise ValueError(f"{where}: name must be a str")
        encoded = name.encode("utf-8")
        if not 1 <= len(encoded) <= MAX_NAME_LENGTH:
            raise ValueError(f"{where}: name must be 1..{MAX_NAME_LENGTH} bytes of UTF-8, "
                             f"got {len(encoded)}")
        if b"\0" in encoded:
            raise ValueError(f"{where}: name contains a NUL byte")
        try:
            dtype = Dtype(dtype)
        except ValueError:
            raise ValueError(f"{where}: dtype {dtype!r} is not a Dtype") from None
        dims = [int(d) for d in shape]
        if len(dims) > MAX_RANK:
            raise ValueError(f"{where}: rank {len(dims)} exceeds {MAX_RANK}")
        numel = 1
        for i, d in enumerate(dims):
            if d < 0:
                raise ValueError(f"{where}: dims[{i}] is {d}, must be >= 0")
            numel *= d
        syms = [None] * len(dims) if symbols is None else \
            [None if s is None else int(s) for s in symbols]
        if len(syms) != len(dims):
            raise ValueError(f"{where}: {len(syms)} symbols for rank {len(dims)}")
        for i, s in enumerate(syms):
            if s is None:
                continue
            if not 0 <= s < len(self._symbols):
                raise ValueError(f"{where}: dims[{i}] names symbol {s}; the plan has "
                                 f"{len(self._symbols)}")
            hi = self._symbols[s][1]
            if dims[i] < hi or dims[i] % hi:
                raise ValueError(f"{where}: dims[{i}] = {dims[i]} is not a positive multiple "
                                 f"of symbol {s}'s maximum {hi}")
        nbytes = numel * DTYPE_SIZE[dtype]
        if nbytes > _I64_MAX:
            raise ValueError(f"{where}: nbytes {nbytes} does not fit in 63 bits")
        if data is not None and len(data) != nbytes:
            raise ValueError(f"{where}: constant data is {len(data)} bytes, "
                             f"shape {dims} of {dtype.name} needs {nbytes}")
        self._tensors.append(_Tensor(index, name, dtype, Storage(storage), dims, syms, nbytes,
                                     data))
        return index

    # ---- ops -----------------------------------------------------------------------

    def add_op(self, opcode: Op, inputs: Sequence[int], outputs: Sequence[int],
               attrs: Sequence[int] = ()) -> None:
        """Appends an op; ops run in the order added. Every attr word listed in
        docs/plan-format.md is required (no defaults):

            LINEAR      [weight_layout]   0: w is [N, K]; 1: w is [K, N]
            GELU        [approximate]     0: erf; 1: tanh
            SOFTMAX     [dim]             0 <= dim < rank (normalize negatives first)
            PERMUTE     perm              one word per dim of x
            LAYER_NORM  [normalized_ndim, f64_bits(eps), has_weight, has_bias]
            CONV2D      [stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups]
            MAX_POOL2D  [kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w,
                         dilation_h, dilation_w, ceil_mode]
            AVG_POOL2D  [kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, ceil_mode,
                         count_include_pad, divisor_override (0: none)]
            REDUCE_*    [dim_mask, keepdim]
            CLAMP       [f64_bits(min), f64_bits(max)]
            SLICE       [dim, start, step]
            CAT         [dim]
            SDPA        [is_causal, f64_bits(scale)]
            others      []

        Indices and attr ranges are checked here; everything else in `to_bytes`."""
        index = len(self._ops)
        try:
            opcode = Op(opcode)
        except ValueError:
            raise ValueError(f"op {index}: opcode {opcode!r} is not an Op") from None
        ins = [int(t) for t in inputs]
        outs = [int(t) for t in outputs]
        words = [int(a) for a in attrs]
        for t in ins + outs:
            if not 0 <= t < len(self._tensors):
                raise ValueError(f"op {index} ({opcode.name}): tensor index {t} out of range "
                                 f"(have {len(self._tensors)} tensors)")
        for a in words:
            if not _I64_MIN <= a <= _I64_MAX:
                raise ValueError(f"op {index} ({opcode.name}): attr {a} does not fit in i64")
        if len(ins) > _U16_MAX or len(outs) > _U16_MAX:
            raise ValueError(f"op {index} ({opcode.name}): too many operands")
        self._ops.append(_OpRecord(opcode, ins, outs, words))

    # ---- validation ----------------------------------------------------------------

    def _validate(self) -> List[Tuple[int, int]]:
        """Checks the graph; returns each intermediate's lifetime as (first op, last op)."""
        tensors = self._tensors
        if not tensors:
            raise ValueError("plan has no tensors")
        if not self._ops:
            raise ValueError("plan has no ops")
        if not self._outputs:
            raise ValueError("plan has no outputs")
        for t in tensors:
            if t.storage == Storage.CONSTANT and any(s is not None for s in t.syms):
                raise ValueError(f"tensor {t.index} ({t.name!r}): a constant has no "
                                 f"dynamic dims")
        bound = {s for i in self._inputs for s in tensors[i].syms if s is not None}
        for s in range(len(self._symbols)):
            if s not in bound:
                raise ValueError(f"symbol {s} is not a dim of any input, so a run cannot "
                                 f"know its value")
        written_by: Dict[int, int] = {}
        last_read: Dict[int, int] = {}
        for i, op in enumerate(self._ops):
            where = f"op {i} ({op.opcode.name})"
            for t in op.inputs:
                st = tensors[t].storage
                if st in (Storage.INTERMEDIATE, Storage.OUTPUT) and t not in written_by:
                    raise ValueError(f"{where}: reads tensor {t} ({tensors[t].name!r}) "
                                     f"before any op writes it")
                last_read[t] = i
            for t in op.outputs:
                st = tensors[t].storage
                if st not in (Storage.INTERMEDIATE, Storage.OUTPUT):
                    raise ValueError(f"{where}: writes tensor {t} ({tensors[t].name!r}) "
                                     f"of storage {st.name}; only intermediates and outputs "
                                     f"are written")
                if t in written_by:
                    raise ValueError(f"{where}: tensor {t} ({tensors[t].name!r}) is already "
                                     f"written by op {written_by[t]}")
                written_by[t] = i
            self._check_op(where, op)
        for t in tensors:
            if t.storage in (Storage.INTERMEDIATE, Storage.OUTPUT) and t.index not in written_by:
                raise ValueError(f"tensor {t.index} ({t.name!r}): {t.storage.name.lower()} "
                                 f"is never written by an op")
        lifetimes = []
        for t in tensors:
            if t.storage == Storage.INTERMEDIATE:
                first = written_by[t.index]
                lifetimes.append((first, max(first, last_read.get(t.index, first))))
            else:
                lifetimes.append((0, 0))
        return lifetimes

    def _format_shape(self, shape) -> str:
        parts = []
        for value, sym in shape:
            if sym is None:
                parts.append(str(value))
            else:
                coeff = value // self._symbols[sym][1]
                parts.append(f"s{sym}" if coeff == 1 else f"{coeff}*s{sym}")
        return "[" + ", ".join(parts) + "]"

    def _check_dtypes(self, fail, code, ins, outs) -> None:
        def need(t, allowed, what):
            if t.dtype not in allowed:
                fail(f"tensor {t.index} ({t.name!r}) has dtype {t.dtype.name}; {what}")

        def same(ts, ref):
            for t in ts:
                if t.dtype != ref.dtype:
                    fail(f"tensor {t.index} ({t.name!r}) has dtype {t.dtype.name}, but "
                         f"{ref.name!r} has {ref.dtype.name}")

        floats = "this op computes on FLOAT32, FLOAT16 and BFLOAT16"
        if code == Op.CAST:
            return
        if code in _LAYOUT_OPS:
            same(ins + outs, ins[0])
        elif code == Op.WHERE:
            need(ins[0], (Dtype.BOOL,), "WHERE's condition must be BOOL")
            same(ins[2:] + outs, ins[1])
        elif code == Op.EMBEDDING:
            need(ins[0], _FLOAT_DTYPES, floats)
            need(ins[1], (Dtype.INT64, Dtype.INT32), "EMBEDDING's indices must be INT64 or "
                                                     "INT32")
            same(outs, ins[0])
        elif code == Op.SDPA:
            need(ins[0], _FLOAT_DTYPES, floats)
            same(ins[1:3] + outs, ins[0])
            if len(ins) == 4 and ins[3].dtype != Dtype.BOOL:
                same(ins[3:], ins[0])
        else:
            need(ins[0], _FLOAT_DTYPES, floats)
            same(ins + outs, ins[0])

    def _check_op(self, where: str, op: _OpRecord) -> None:
        tensors = self._tensors
        code = op.opcode
        ins = [tensors[t] for t in op.inputs]
        outs = [tensors[t] for t in op.outputs]
        attrs = op.attrs

        def fail(msg):
            raise ValueError(f"{where}: {msg}")

        # -- counts
        n_in = _INPUT_COUNTS.get(code, (1, 1))
        if code == Op.LAYER_NORM:
            if len(attrs) != 4:
                fail(f"takes 4 attrs, got {len(attrs)}")
            has_w, has_b = attrs[2], attrs[3]
            if has_w not in (0, 1) or has_b not in (0, 1):
                fail(f"has_weight {has_w} and has_bias {has_b} must each be 0 or 1")
            n_in = (1 + has_w + has_b,) * 2
        if not n_in[0] <= len(ins) <= n_in[1]:
            want = str(n_in[0]) if n_in[0] == n_in[1] else f"{n_in[0]} to {n_in[1]}"
            fail(f"takes {want} inputs, got {len(ins)}")
        if len(outs) != 1:
            fail(f"takes 1 outputs, got {len(outs)}")
        n_attr = len(ins[0].dims) if code == Op.PERMUTE else 4 if code == Op.LAYER_NORM \
            else _ATTR_COUNTS.get(code, 0)
        if len(attrs) != n_attr:
            fail(f"takes {n_attr} attrs, got {len(attrs)}")

        self._check_dtypes(fail, code, ins, outs)
        x, y = ins[0], outs[0]
        fmt = self._format_shape

        def shape_eq(t, shape, what):
            if t.shape() != list(shape):
                fail(f"{what} {t.name!r} has shape {fmt(t.shape())}, expected {fmt(shape)}")

        def flag(value, name):
            if value not in (0, 1):
                fail(f"{name} {value} must be 0 or 1")

        def static_dims(t, dims, what):
            for d in dims:
                if t.syms[d] is not None:
                    fail(f"{what} {t.name!r} dims[{d}] must be static")

        if code == Op.LINEAR:
            layout = attrs[0]
            if layout not in (0, 1):
                fail(f"weight_layout {layout} must be 0 ([N, K]) or 1 ([K, N])")
            w = ins[1]
            if len(x.dims) < 1:
                fail("x must have rank >= 1")
            if len(w.dims) != 2:
                fail(f"weight {w.name!r} must have rank 2, has shape {w.dims}")
            k = x.shape()[-1]
            n, wk = (w.shape()[0], w.shape()[1]) if layout == 0 else \
                (w.shape()[1], w.shape()[0])
            if wk != k:
                fail(f"weight {w.name!r} shape {fmt(w.shape())} does not match K of x "
                     f"{fmt(x.shape())}")
            if len(ins) == 3:
                shape_eq(ins[2], [n], "bias")
            shape_eq(y, x.shape()[:-1] + [n], "output")
        elif code == Op.MATMUL:
            a, b = ins
            if len(a.dims) < 2 or len(b.dims) < 2:
                fail(f"both inputs need rank >= 2, got {a.dims} and {b.dims}")
            if a.shape()[-1] != b.shape()[-2]:
                fail(f"inner dims differ: a {fmt(a.shape())}, b {fmt(b.shape())}")
            batch = _broadcast(a.shape()[:-2], b.shape()[:-2])
            if batch is None:
                fail(f"batch dims of {fmt(a.shape())} and {fmt(b.shape())} do not broadcast")
            shape_eq(y, batch + [a.shape()[-2], b.shape()[-1]], "output")
        elif code in _UNARY_OPS or code in (Op.COPY, Op.CAST):
            if code == Op.GELU and attrs[0] not in (0, 1):
                fail(f"approximate {attrs[0]} must be 0 (erf) or 1 (tanh)")
            if code == Op.CLAMP:
                lo, hi = _f64_from_bits(attrs[0]), _f64_from_bits(attrs[1])
                if math.isnan(lo) or math.isnan(hi):
                    fail(f"min {lo!r} and max {hi!r} must not be NaN")
            shape_eq(y, x.shape(), "output")
        elif code in _BINARY_OPS:
            shape = _broadcast(ins[0].shape(), ins[1].shape())
            if shape is None:
                fail(f"shapes {fmt(ins[0].shape())} and {fmt(ins[1].shape())} do not broadcast")
            shape_eq(y, shape, "output")
        elif code == Op.RESHAPE:
            def numel(t):
                return (math.prod(t.dims), sorted(s for s in t.syms if s is not None))
            if numel(x) != numel(y):
                fail(f"element counts differ: {fmt(x.shape())} and {fmt(y.shape())}")
        elif code == Op.PERMUTE:
            rank = len(x.dims)
            if sorted(attrs) != list(range(rank)):
                fail(f"perm {attrs} is not a permutation of 0..{rank - 1}")
            shape_eq(y, [x.shape()[p] for p in attrs], "output")
        elif code == Op.SOFTMAX:
            if not 0 <= attrs[0] < len(x.dims):
                fail(f"dim {attrs[0]} out of range for rank {len(x.dims)}")
            shape_eq(y, x.shape(), "output")
        elif code == Op.LAYER_NORM:
            nd = attrs[0]
            if not 1 <= nd <= len(x.dims):
                fail(f"normalized_ndim {nd} must be in 1..{len(x.dims)}")
            eps = _f64_from_bits(attrs[1])
            if not (math.isfinite(eps) and eps >= 0.0):
                fail(f"eps {eps!r} must be finite and >= 0")
            for t in ins[1:]:
                shape_eq(t, x.shape()[len(x.dims) - nd:], "weight/bias")
            shape_eq(y, x.shape(), "output")
        elif code == Op.CONV2D:
            self._check_conv(fail, shape_eq, static_dims, ins, y, attrs)
        elif code in (Op.MAX_POOL2D, Op.AVG_POOL2D):
            self._check_pool(fail, shape_eq, static_dims, flag, code, x, y, attrs)
        elif code == Op.ADAPTIVE_AVG_POOL2D:
            if len(x.dims) != 4 or len(y.dims) != 4:
                fail(f"x and y must have rank 4, have {x.dims} and {y.dims}")
            static_dims(x, (2, 3), "input")
            static_dims(y, (2, 3), "output")
            if min(x.dims[2:]) < 1 or min(y.dims[2:]) < 1:
                fail(f"spatial dims must be >= 1: x {x.dims}, y {y.dims}")
            shape_eq(y, x.shape()[:2] + y.shape()[2:], "output")
        elif code in _REDUCE_OPS:
            mask, keepdim = attrs
            rank = len(x.dims)
            if rank < 1 or not 1 <= mask < (1 << rank):
                fail(f"dim_mask {mask} must name 1 or more of the {rank} dims")
            flag(keepdim, "keepdim")
            reduced = [d for d in range(rank) if mask >> d & 1]
            if code == Op.REDUCE_MAX:
                for d in reduced:
                    low = x.dims[d] if x.syms[d] is None else self._symbols[x.syms[d]][0]
                    if low < 1:
                        fail(f"REDUCE_MAX over dims[{d}], which may be 0")
            expected = [(_ONE if d in reduced else x.shape()[d]) for d in range(rank)
                        if keepdim or d not in reduced]
            shape_eq(y, expected, "output")
        elif code == Op.WHERE:
            shape = _broadcast(ins[0].shape(), ins[1].shape())
            shape = _broadcast(shape, ins[2].shape()) if shape is not None else None
            if shape is None:
                fail(f"shapes {', '.join(fmt(t.shape()) for t in ins)} do not broadcast")
            shape_eq(y, shape, "output")
        elif code == Op.EXPAND:
            if len(y.dims) < len(x.dims) or _broadcast(x.shape(), y.shape()) != y.shape():
                fail(f"{fmt(x.shape())} does not expand to {fmt(y.shape())}")
        elif code == Op.SLICE:
            dim, start, step = attrs
            rank = len(x.dims)
            if not 0 <= dim < rank:
                fail(f"dim {dim} out of range for rank {rank}")
            static_dims(x, (dim,), "input")
            if len(y.dims) != rank:
                fail(f"output rank {len(y.dims)} differs from input rank {rank}")
            static_dims(y, (dim,), "output")
            length = y.dims[dim]
            if start < 0 or step < 1 or start > x.dims[dim] or \
                    (length > 0 and start + (length - 1) * step >= x.dims[dim]):
                fail(f"start {start}, step {step} and length {length} do not fit in "
                     f"dims[{dim}] = {x.dims[dim]}")
            expected = x.shape()
            expected[dim] = (length, None)
            shape_eq(y, expected, "output")
        elif code == Op.CAT:
            dim = attrs[0]
            rank = len(x.dims)
            if rank < 1 or not 0 <= dim < rank:
                fail(f"dim {dim} out of range for rank {rank}")
            total = 0
            for t in ins:
                if len(t.dims) != rank:
                    fail(f"input {t.name!r} has rank {len(t.dims)}, input 0 has {rank}")
                static_dims(t, (dim,), "input")
                others = [d for i, d in enumerate(t.shape()) if i != dim]
                if others != [d for i, d in enumerate(x.shape()) if i != dim]:
                    fail(f"input {t.name!r} shape {fmt(t.shape())} differs from "
                         f"{fmt(x.shape())} outside dim {dim}")
                total += t.dims[dim]
            expected = x.shape()
            expected[dim] = (total, None)
            shape_eq(y, expected, "output")
        elif code == Op.EMBEDDING:
            w, idx = ins
            if len(w.dims) != 2:
                fail(f"weight {w.name!r} must have rank 2, has {w.dims}")
            static_dims(w, (0, 1), "weight")
            if len(idx.dims) >= MAX_RANK:
                fail(f"indices rank {len(idx.dims)} must be below {MAX_RANK}")
            shape_eq(y, idx.shape() + [w.shape()[1]], "output")
        elif code == Op.SDPA:
            self._check_sdpa(fail, shape_eq, flag, ins, y, attrs)

    def _check_conv(self, fail, shape_eq, static_dims, ins, y, attrs):
        x, w = ins[0], ins[1]
        sh, sw, ph, pw_, dh, dw, groups = attrs
        if len(x.dims) != 4 or len(w.dims) != 4:
            fail(f"x and w must have rank 4, have {x.dims} and {w.dims}")
        static_dims(x, (1, 2, 3), "input")
        static_dims(w, (0, 1, 2, 3), "weight")
        if min(sh, sw, dh, dw, groups) < 1 or min(ph, pw_) < 0:
            fail(f"stride {sh, sw} and dilation {dh, dw} must be >= 1, padding {ph, pw_} "
                 f">= 0, groups {groups} >= 1")
        c, o = x.dims[1], w.dims[0]
        if c % groups or o % groups or w.dims[1] * groups != c:
            fail(f"groups {groups} does not fit {c} input channels, weight {w.dims}")
        kh, kw = w.dims[2], w.dims[3]
        if kh < 1 or kw < 1:
            fail(f"kernel {kh}x{kw} must be at least 1x1")
        out = []
        for size, k, s, p, d in ((x.dims[2], kh, sh, ph, dh), (x.dims[3], kw, sw, pw_, dw)):
            if size + 2 * p < d * (k - 1) + 1:
                fail(f"input size {size} with padding {p} is smaller than the dilated "
                     f"kernel {d * (k - 1) + 1}")
            out.append((size + 2 * p - d * (k - 1) - 1) // s + 1)
        if len(ins) == 3:
            shape_eq(ins[2], [(o, None)], "bias")
        shape_eq(y, [x.shape()[0], (o, None), (out[0], None), (out[1], None)], "output")

    def _check_pool(self, fail, shape_eq, static_dims, flag, code, x, y, attrs):
        if code == Op.MAX_POOL2D:
            kh, kw, sh, sw, ph, pw_, dh, dw, ceil = attrs
        else:
            kh, kw, sh, sw, ph, pw_, ceil, include_pad, divisor = attrs
            dh = dw = 1
            flag(include_pad, "count_include_pad")
            if divisor < 0:
                fail(f"divisor_override {divisor} must be >= 0 (0: none)")
        flag(ceil, "ceil_mode")
        if len(x.dims) != 4:
            fail(f"x must have rank 4, has {x.dims}")
        static_dims(x, (2, 3), "input")
        if min(kh, kw, sh, sw, dh, dw) < 1 or min(ph, pw_) < 0:
            fail(f"kernel {kh, kw}, stride {sh, sw} and dilation {dh, dw} must be >= 1, "
                 f"padding {ph, pw_} >= 0")
        out = []
        for size, k, s, p, d in ((x.dims[2], kh, sh, ph, dh), (x.dims[3], kw, sw, pw_, dw)):
            if 2 * p > d * (k - 1) + 1:
                fail(f"padding {p} exceeds half the kernel extent {d * (k - 1) + 1}")
            if size + 2 * p < d * (k - 1) + 1:
                fail(f"input size {size} with padding {p} is smaller than the kernel extent "
                     f"{d * (k - 1) + 1}")
            out.append((_pool_output_size(size, k, s, p, d, ceil), None))
        shape_eq(y, x.shape()[:2] + out, "output")

    def _check_sdpa(self, fail, shape_eq, flag, ins, y, attrs):
        q, k, v = ins[:3]
        is_causal, scale_bits = attrs
        flag(is_causal, "is_causal")
        scale = _f64_from_bits(scale_bits)
        if not math.isfinite(scale):
            fail(f"scale {scale!r} must be finite")
        rank = len(q.dims)
        if rank < 2 or len(k.dims) != rank or len(v.dims) != rank:
            fail(f"q, k and v need one rank >= 2, have {q.dims}, {k.dims}, {v.dims}")
        fmt = self._format_shape
        qs, ks, vs = q.shape(), k.shape(), v.shape()
        if ks[:-2] != qs[:-2] or vs[:-2] != qs[:-2]:
            fail(f"batch dims of q {fmt(qs)}, k {fmt(ks)} and v {fmt(vs)} differ")
        if ks[-1] != qs[-1] or vs[-2] != ks[-2]:
            fail(f"q {fmt(qs)}, k {fmt(ks)} and v {fmt(vs)} do not fit [..., L, E], "
                 f"[..., S, E], [..., S, Ev]")
        if len(ins) == 4:
            if is_causal:
                fail("takes a mask or is_causal, not both")
            target = qs[:-1] + [ks[-2]]
            mask = ins[3]
            if len(mask.dims) > rank or _broadcast(mask.shape(), target) != target:
                fail(f"mask {fmt(mask.shape())} does not broadcast to {fmt(target)}")
        shape_eq(y, qs[:-1] + [vs[-1]], "output")

    # ---- layout --------------------------------------------------------------------

    def _view_roots(self) -> Dict[int, int]:
        """For each intermediate written by a RESHAPE of an intermediate: the first tensor
        of its chain of such reshapes (a reshape of a reshape of x gives x). They share
        x's bytes (docs/plan-format.md, "Memory plan": a view)."""
        roots: Dict[int, int] = {}
        for op in self._ops:  # in order, so an input's root is known before its output's
            if op.opcode != Op.RESHAPE:
                continue
            x, y = self._tensors[op.inputs[0]], self._tensors[op.outputs[0]]
            if x.storage != Storage.INTERMEDIATE or y.storage != Storage.INTERMEDIATE:
                continue
            if x.nbytes != y.nbytes:  # _check_op rules this out; a view must be exact
                raise ValueError(f"RESHAPE of tensor {x.index} ({x.name!r}, {x.nbytes} bytes) "
                                 f"into {y.index} ({y.name!r}, {y.nbytes} bytes) changes "
                                 f"the byte count")
            roots[y.index] = roots.get(x.index, x.index)
        return roots

    def _plan_arena(self, lifetimes: List[Tuple[int, int]]) -> int:
        """Places intermediates first-fit, in order of the op that writes them; two
        tensors share bytes only if their lifetimes [writer, last reader] are disjoint.
        A RESHAPE of an intermediate into an intermediate is a view: its output takes its
        input's offset, and the chain is placed as one allocation whose lifetime is the
        union of its members'. Dynamic tensors are placed at their largest size."""
        roots = self._view_roots()
        members: Dict[int, List[_Tensor]] = {}
        for t in self._tensors:
            if t.storage == Storage.INTERMEDIATE:
                members.setdefault(roots.get(t.index, t.index), []).append(t)
        life: Dict[int, Tuple[int, int]] = {
            root: (min(lifetimes[m.index][0] for m in group),
                   max(lifetimes[m.index][1] for m in group))
            for root, group in members.items()}
        inters = sorted((self._tensors[root] for root in members),
                        key=lambda t: (life[t.index][0], t.index))
        placed: List[_Tensor] = []
        arena_size = 0
        for t in inters:
            if t.nbytes == 0:
                offset = 0
            else:
                first, last = life[t.index]
                busy = sorted(
                    (p.data_offset, p.data_offset + p.nbytes)
                    for p in placed
                    if life[p.index][0] <= last and first <= life[p.index][1]
                )
                offset = 0
                for start, end in busy:
                    if offset + t.nbytes <= start:
                        break
                    offset = max(offset, _align(end, DATA_ALIGN))
                placed.append(t)
                arena_size = max(arena_size, _align(offset + t.nbytes, DATA_ALIGN))
            for m in members[t.index]:
                m.data_offset = offset
        return arena_size

    def to_bytes(self) -> bytes:
        lifetimes = self._validate()
        arena_size = self._plan_arena(lifetimes)

        strings = bytearray()
        name_slices = []
        for t in self._tensors:
            encoded = t.name.encode("utf-8")
            name_slices.append((len(strings), len(encoded)))
            strings += encoded

        constants = bytearray()
        for t in self._tensors:
            if t.storage == Storage.CONSTANT:
                constants += b"\0" * (_align(len(constants), DATA_ALIGN) - len(constants))
                t.data_offset = len(constants)
                constants += t.data

        tensor_table = bytearray()
        for t, (name_off, name_len) in zip(self._tensors, name_slices):
            dims = t.dims + [0] * (MAX_RANK - len(t.dims))
            syms = [0 if s is None else s + 1 for s in t.syms] + [0] * (MAX_RANK - len(t.dims))
            data_offset = t.data_offset if t.storage in (Storage.INTERMEDIATE,
                                                         Storage.CONSTANT) else 0
            tensor_table += struct.pack("<IIBBBBIQQ8q8B", name_off, name_len, int(t.dtype),
                                        int(t.storage), len(t.dims), 0, 0, data_offset,
                                        t.nbytes, *dims, *syms)

        io_table = struct.pack(f"<{len(self._inputs) + len(self._outputs)}I",
                               *self._inputs, *self._outputs)

        op_table = bytearray()
        operands: List[int] = []
        attrs: List[int] = []
        for op in self._ops:
            op_table += struct.pack("<IIHHIII", int(op.opcode), len(operands), len(op.inputs),
                                    len(op.outputs), len(attrs), len(op.attrs), 0)
            operands += op.inputs + op.outputs
            attrs += op.attrs
        operand_table = struct.pack(f"<{len(operands)}I", *operands)
        attr_table = struct.pack(f"<{len(attrs)}q", *attrs)
        symbol_table = b"".join(struct.pack("<qq", lo, hi) for lo, hi in self._symbols)

        bodies = dict(zip(SECTION_NAMES, (
            bytes(strings), bytes(tensor_table), io_table, bytes(op_table), operand_table,
            attr_table, bytes(constants), symbol_table)))
        sections = {}
        cursor = HEADER_SIZE
        file_order = ("strings", "tensors", "io", "ops", "operands", "attrs", "symbols",
                      "constants")
        for name in file_order:
            cursor = _align(cursor, DATA_ALIGN if name == "constants" else SECTION_ALIGN)
            sections[name] = (cursor, len(bodies[name]))
            cursor += len(bodies[name])
        plan_size = cursor

        for count, what in ((len(self._tensors), "tensors"), (len(self._ops), "ops"),
                            (len(self._inputs), "inputs"), (len(self._outputs), "outputs"),
                            (len(operands), "operands"), (len(strings), "string bytes")):
            if count > _U32_MAX:
                raise ValueError(f"plan has {count} {what}; the format holds at most {_U32_MAX}")
        if len(attrs) > _U32_MAX:
            raise ValueError(f"plan has {len(attrs)} attr words; at most {_U32_MAX}")

        out = bytearray(plan_size)
        struct.pack_into("<8sIIQIIIIIIIIQ", out, 0, MAGIC, FORMAT_VERSION, HEADER_SIZE, plan_size,
                         0, TENSOR_RECORD_SIZE, OP_RECORD_SIZE, len(self._tensors), len(self._ops),
                         len(self._inputs), len(self._outputs), len(operands), arena_size)
        for i, name in enumerate(SECTION_NAMES):
            struct.pack_into("<QQ", out, 64 + 16 * i, *sections[name])
        for name in SECTION_NAMES:
            offset, size = sections[name]
            out[offset:offset + size] = bodies[name]
        return bytes(out)

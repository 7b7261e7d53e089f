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

`to_bytes` checks what the engine's verifier checks (raising ValueError naming the
problem), places intermediates in one arena (64-byte aligned, reusing memory of tensors
whose last reader has run) and lays out the sections. Output is deterministic: the same
calls give the same bytes.
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
]

MAGIC = b"EMBRPLAN"
FORMAT_VERSION = 1
HEADER_SIZE = 176
TENSOR_RECORD_SIZE = 96
OP_RECORD_SIZE = 24
MAX_RANK = 8
SECTION_ALIGN = 8
DATA_ALIGN = 64
MAX_NAME_LENGTH = 255
SECTION_NAMES = ("strings", "tensors", "io", "ops", "operands", "attrs", "constants")

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


DTYPE_SIZE = {
    Dtype.FLOAT32: 4,
    Dtype.FLOAT16: 2,
    Dtype.BFLOAT16: 2,
    Dtype.INT64: 8,
    Dtype.INT32: 4,
    Dtype.BOOL: 1,
}
_FLOAT_DTYPES = (Dtype.FLOAT32, Dtype.FLOAT16, Dtype.BFLOAT16)
_UNARY_OPS = (Op.RELU, Op.GELU, Op.SIGMOID, Op.TANH, Op.SILU)
_BINARY_OPS = (Op.ADD, Op.SUB, Op.MUL, Op.DIV)


def f64_bits(x: float) -> int:
    """The IEEE-754 bit pattern of `x` as a signed 64-bit word (how attrs store f64)."""
    return struct.unpack("<q", struct.pack("<d", float(x)))[0]


def _f64_from_bits(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<q", bits))[0]


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def _broadcast(a: Sequence[int], b: Sequence[int]) -> Optional[List[int]]:
    """NumPy broadcast of two shapes aligned at the last dim; None if incompatible."""
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + list(a)
    b = [1] * (rank - len(b)) + list(b)
    out = []
    for da, db in zip(a, b):
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        else:
            return None
    return out


class _Tensor:
    __slots__ = ("index", "name", "dtype", "storage", "dims", "nbytes", "data", "data_offset")

    def __init__(self, index, name, dtype, storage, dims, nbytes, data):
        self.index = index
        self.name = name
        self.dtype = dtype
        self.storage = storage
        self.dims = dims
        self.nbytes = nbytes
        self.data = data
        self.data_offset = 0


class _OpRecord:
    __slots__ = ("opcode", "inputs", "outputs", "attrs")

    def __init__(self, opcode, inputs, outputs, attrs):
        self.opcode = opcode
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs


class PlanWriter:
    """Collects tensors and ops, then writes a version 1 plan with `to_bytes`.

    Tensor indices are assigned in call order across all `add_*` calls. Inputs and
    outputs appear in the I/O table in the order of their `add_input`/`add_output`
    calls, which must be the order in which ExecuTorch passes the delegate's arguments.
    """

    def __init__(self) -> None:
        self._tensors: List[_Tensor] = []
        self._inputs: List[int] = []
        self._outputs: List[int] = []
        self._ops: List[_OpRecord] = []

    # ---- tensors -------------------------------------------------------------------

    def add_input(self, name: str, dtype: Dtype, shape: Sequence[int]) -> int:
        index = self._add_tensor(name, dtype, shape, Storage.INPUT, None)
        self._inputs.append(index)
        return index

    def add_output(self, name: str, dtype: Dtype, shape: Sequence[int]) -> int:
        index = self._add_tensor(name, dtype, shape, Storage.OUTPUT, None)
        self._outputs.append(index)
        return index

    def add_intermediate(self, name: str, dtype: Dtype, shape: Sequence[int]) -> int:
        return self._add_tensor(name, dtype, shape, Storage.INTERMEDIATE, None)

    def add_constant(self, name: str, dtype: Dtype, shape: Sequence[int], data: bytes) -> int:
        return self._add_tensor(name, dtype, shape, Storage.CONSTANT, bytes(data))

    def _add_tensor(self, name, dtype, shape, storage, data) -> int:
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
        nbytes = numel * DTYPE_SIZE[dtype]
        if nbytes > _I64_MAX:
            raise ValueError(f"{where}: nbytes {nbytes} does not fit in 63 bits")
        if data is not None and len(data) != nbytes:
            raise ValueError(f"{where}: constant data is {len(data)} bytes, "
                             f"shape {dims} of {dtype.name} needs {nbytes}")
        self._tensors.append(_Tensor(index, name, dtype, Storage(storage), dims, nbytes, data))
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

    def _check_op(self, where: str, op: _OpRecord) -> None:
        tensors = self._tensors
        code = op.opcode
        ins = [tensors[t] for t in op.inputs]
        outs = [tensors[t] for t in op.outputs]
        attrs = op.attrs

        def fail(msg):
            raise ValueError(f"{where}: {msg}")

        def want_counts(n_in, n_out, n_attr):
            if isinstance(n_in, int):
                n_in = (n_in,)
            if len(ins) not in n_in:
                fail(f"takes {' or '.join(map(str, n_in))} inputs, got {len(ins)}")
            if len(outs) != n_out:
                fail(f"takes {n_out} outputs, got {len(outs)}")
            if len(attrs) != n_attr:
                fail(f"takes {n_attr} attrs, got {len(attrs)}")

        def shape_eq(t, dims, what):
            if list(t.dims) != list(dims):
                fail(f"{what} {t.name!r} has shape {t.dims}, expected {list(dims)}")

        if code == Op.LINEAR:
            want_counts((2, 3), 1, 1)
        elif code == Op.MATMUL or code in _BINARY_OPS:
            want_counts(2, 1, 0)
        elif code == Op.GELU or code == Op.SOFTMAX:
            want_counts(1, 1, 1)
        elif code in _UNARY_OPS or code in (Op.RESHAPE, Op.COPY):
            want_counts(1, 1, 0)
        elif code == Op.PERMUTE:
            want_counts(1, 1, len(ins[0].dims) if ins else 0)
        elif code == Op.LAYER_NORM:
            if len(attrs) != 4:
                fail(f"takes 4 attrs, got {len(attrs)}")
            has_w, has_b = attrs[2], attrs[3]
            if has_w not in (0, 1) or has_b not in (0, 1):
                fail(f"has_weight {has_w} and has_bias {has_b} must each be 0 or 1")
            want_counts(1 + has_w + has_b, 1, 4)

        dtype = ins[0].dtype
        for t in ins + outs:
            if t.dtype not in _FLOAT_DTYPES:
                fail(f"tensor {t.index} ({t.name!r}) has dtype {t.dtype.name}; version 1 ops "
                     f"compute on FLOAT32, FLOAT16 and BFLOAT16")
            if t.dtype != dtype:
                fail(f"tensor {t.index} ({t.name!r}) has dtype {t.dtype.name}, the op's "
                     f"first input has {dtype.name}")
        x, y = ins[0], outs[0]

        if code == Op.LINEAR:
            layout = attrs[0]
            if layout not in (0, 1):
                fail(f"weight_layout {layout} must be 0 ([N, K]) or 1 ([K, N])")
            w = ins[1]
            if len(x.dims) < 1:
                fail("x must have rank >= 1")
            if len(w.dims) != 2:
                fail(f"weight {w.name!r} must have rank 2, has shape {w.dims}")
            k = x.dims[-1]
            n, wk = (w.dims[0], w.dims[1]) if layout == 0 else (w.dims[1], w.dims[0])
            if wk != k:
                fail(f"weight {w.name!r} shape {w.dims} does not match K={k} of x {x.dims}")
            if len(ins) == 3:
                shape_eq(ins[2], [n], "bias")
            shape_eq(y, x.dims[:-1] + [n], "output")
        elif code == Op.MATMUL:
            a, b = ins
            if len(a.dims) < 2 or len(b.dims) < 2:
                fail(f"both inputs need rank >= 2, got {a.dims} and {b.dims}")
            if a.dims[-1] != b.dims[-2]:
                fail(f"inner dims differ: a {a.dims}, b {b.dims}")
            batch = _broadcast(a.dims[:-2], b.dims[:-2])
            if batch is None:
                fail(f"batch dims of {a.dims} and {b.dims} do not broadcast")
            shape_eq(y, batch + [a.dims[-2], b.dims[-1]], "output")
        elif code in _UNARY_OPS or code == Op.COPY:
            if code == Op.GELU and attrs[0] not in (0, 1):
                fail(f"approximate {attrs[0]} must be 0 (erf) or 1 (tanh)")
            shape_eq(y, x.dims, "output")
        elif code in _BINARY_OPS:
            shape = _broadcast(ins[0].dims, ins[1].dims)
            if shape is None:
                fail(f"shapes {ins[0].dims} and {ins[1].dims} do not broadcast")
            shape_eq(y, shape, "output")
        elif code == Op.RESHAPE:
            if math.prod(x.dims) != math.prod(y.dims):
                fail(f"element counts differ: {x.dims} and {y.dims}")
        elif code == Op.PERMUTE:
            rank = len(x.dims)
            if sorted(attrs) != list(range(rank)):
                fail(f"perm {attrs} is not a permutation of 0..{rank - 1}")
            shape_eq(y, [x.dims[p] for p in attrs], "output")
        elif code == Op.SOFTMAX:
            if not 0 <= attrs[0] < len(x.dims):
                fail(f"dim {attrs[0]} out of range for rank {len(x.dims)}")
            shape_eq(y, x.dims, "output")
        elif code == Op.LAYER_NORM:
            nd = attrs[0]
            if not 1 <= nd <= len(x.dims):
                fail(f"normalized_ndim {nd} must be in 1..{len(x.dims)}")
            eps = _f64_from_bits(attrs[1])
            if not (math.isfinite(eps) and eps >= 0.0):
                fail(f"eps {eps!r} must be finite and >= 0")
            for t in ins[1:]:
                shape_eq(t, x.dims[len(x.dims) - nd:], "weight/bias")
            shape_eq(y, x.dims, "output")

    # ---- layout --------------------------------------------------------------------

    def _plan_arena(self, lifetimes: List[Tuple[int, int]]) -> int:
        """Places intermediates first-fit, in order of the op that writes them; two
        tensors share bytes only if their lifetimes [writer, last reader] are disjoint."""
        inters = [t for t in self._tensors if t.storage == Storage.INTERMEDIATE]
        inters.sort(key=lambda t: (lifetimes[t.index][0], t.index))
        placed: List[_Tensor] = []
        arena_size = 0
        for t in inters:
            if t.nbytes == 0:
                t.data_offset = 0
                continue
            first, last = lifetimes[t.index]
            busy = sorted(
                (p.data_offset, p.data_offset + p.nbytes)
                for p in placed
                if lifetimes[p.index][0] <= last and first <= lifetimes[p.index][1]
            )
            offset = 0
            for start, end in busy:
                if offset + t.nbytes <= start:
                    break
                offset = max(offset, _align(end, DATA_ALIGN))
            t.data_offset = offset
            placed.append(t)
            arena_size = max(arena_size, _align(offset + t.nbytes, DATA_ALIGN))
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
            data_offset = t.data_offset if t.storage in (Storage.INTERMEDIATE,
                                                         Storage.CONSTANT) else 0
            tensor_table += struct.pack("<IIBBBBIQQ8q", name_off, name_len, int(t.dtype),
                                        int(t.storage), len(t.dims), 0, 0, data_offset,
                                        t.nbytes, *dims)

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

        bodies = [bytes(strings), bytes(tensor_table), io_table, bytes(op_table), operand_table,
                  attr_table, bytes(constants)]
        sections = []
        cursor = HEADER_SIZE
        for name, body in zip(SECTION_NAMES, bodies):
            cursor = _align(cursor, DATA_ALIGN if name == "constants" else SECTION_ALIGN)
            sections.append((cursor, len(body)))
            cursor += len(body)
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
        for i, (offset, size) in enumerate(sections):
            struct.pack_into("<QQ", out, 64 + 16 * i, offset, size)
        for (offset, size), body in zip(sections, bodies):
            out[offset:offset + size] = body
        return bytes(out)

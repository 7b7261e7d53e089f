"""Writes the plans of the CUDA op-by-op test (test_cuda_ops.c): every op in every float
dtype, with broadcasting, size-1 and size-0 dims, GEMM batch layouts, and the GEMM plus
activation pairs the CUDA executor fuses into cuBLASLt epilogues.

Usage: make_cuda_op_plans.py PLAN_WRITER_PY OUT_DIR

Out:
  OUT_DIR/<case>.plan   a plan, written by the real plan writer
  OUT_DIR/cases.txt     "<case> <low> <high>" a line: the range the test draws inputs from
  OUT_DIR/bench.txt     plans that are only timed (too big for the CPU reference): the
                        demo's MLP, 4 x (Linear(1024, 1024) + GELU), float16

There are no expected values here: the test runs each plan on the CPU reference executor
and on the CUDA executor and compares the two (the CPU executor is the oracle, as in
ggml's test-backend-ops). Standard library only; the writer is loaded by file path.
"""

import importlib.util
import math
import os
import random
import struct
import sys

pw = None


def load_writer(path):
    spec = importlib.util.spec_from_file_location("ember_plan_writer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def encode(dtype, values):
    if dtype == pw.Dtype.FLOAT32:
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == pw.Dtype.FLOAT16:
        return struct.pack(f"<{len(values)}e", *values)
    out = bytearray()
    for v in values:  # bfloat16: float32 bits rounded to nearest even, top half
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        out += struct.pack("<H", bits & 0xFFFF)
    return bytes(out)


class Plan:
    """A small builder over the writer: names tensors, makes random constants."""

    def __init__(self, dtype, seed):
        self.w = pw.PlanWriter()
        self.dtype = dtype
        self.rng = random.Random(seed)
        self.n = 0

    def _name(self, prefix):
        self.n += 1
        return f"{prefix}{self.n}"

    def input(self, shape):
        return self.w.add_input(self._name("in"), self.dtype, shape)

    def const(self, shape, scale=1.0):
        values = [self.rng.uniform(-scale, scale) for _ in range(math.prod(shape))]
        return self.w.add_constant(self._name("c"), self.dtype, shape, encode(self.dtype, values))

    def out(self, shape):
        return self.w.add_output(self._name("out"), self.dtype, shape)

    def tmp(self, shape):
        return self.w.add_intermediate(self._name("t"), self.dtype, shape)

    def op(self, opcode, inputs, output, attrs=()):
        self.w.add_op(opcode, inputs, [output], list(attrs))
        return output


def bshape(a, b):
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + list(a)
    b = [1] * (rank - len(b)) + list(b)
    return [max(x, y) if min(x, y) != 0 else 0 for x, y in zip(a, b)]


DTYPES = {"f32": None, "f16": None, "bf16": None}  # filled in main()


def cases():
    """Yields (name, low, high, build) where build(dtype, seed) returns a PlanWriter."""
    unary = [("relu", pw.Op.RELU, None), ("gelu_erf", pw.Op.GELU, 0),
             ("gelu_tanh", pw.Op.GELU, 1), ("sigmoid", pw.Op.SIGMOID, None),
             ("tanh", pw.Op.TANH, None), ("silu", pw.Op.SILU, None)]
    for name, opcode, approximate in unary:
        for shape_name, shape in (("3x5x7", [3, 5, 7]), ("big", [1000, 333]), ("scalar", [])):
            def build(p, opcode=opcode, approximate=approximate, shape=shape):
                x = p.input(shape)
                p.op(opcode, [x], p.out(shape), [] if approximate is None else [approximate])
            yield f"{name}_{shape_name}", -4.0, 4.0, build

    shapes = [("same", [4, 33], [4, 33]), ("row", [4, 1, 5], [3, 1]),
              ("col", [2, 3], [1]), ("lead", [1], [2, 3]),
              ("both", [2, 1, 4], [2, 3, 1]), ("ones", [1, 1, 6], [1, 6]),
              ("rank5", [2, 1, 3, 1, 2], [1, 4, 1, 5, 1]), ("scalar", [5, 7], []),
              ("big", [256, 1024], [1024]), ("empty", [0, 4], [1, 4])]
    for name, opcode in (("add", pw.Op.ADD), ("sub", pw.Op.SUB), ("mul", pw.Op.MUL),
                         ("div", pw.Op.DIV)):
        for shape_name, a_shape, b_shape in shapes:
            def build(p, opcode=opcode, a_shape=a_shape, b_shape=b_shape):
                a = p.input(a_shape)
                b = p.input(b_shape)
                p.op(opcode, [a, b], p.out(bshape(a_shape, b_shape)))
            # DIV draws from [0.5, 2] so no quotient is huge; the rest from [-2, 2].
            low, high = (0.5, 2.0) if opcode == pw.Op.DIV else (-2.0, 2.0)
            yield f"{name}_{shape_name}", low, high, build

    # LINEAR: weight layouts, bias or not, rank-3 x, M = 1, K = 0, a bias that is an input.
    for layout in (0, 1):
        for bias in (False, True):
            def build(p, layout=layout, bias=bias):
                x = p.input([5, 24])
                w = p.const([16, 24] if layout == 0 else [24, 16], 0.3)
                ins = [x, w] + ([p.const([16])] if bias else [])
                p.op(pw.Op.LINEAR, ins, p.out([5, 16]), [layout])
            yield f"linear_l{layout}_{'bias' if bias else 'nobias'}", -1.0, 1.0, build

    def build_linear_rank3(p):
        x = p.input([2, 3, 40])
        p.op(pw.Op.LINEAR, [x, p.const([24, 40], 0.3), p.const([24])], p.out([2, 3, 24]), [0])
    yield "linear_rank3", -1.0, 1.0, build_linear_rank3

    def build_linear_m1(p):
        x = p.input([1, 256])
        p.op(pw.Op.LINEAR, [x, p.const([128, 256], 0.1), p.const([128])], p.out([1, 128]), [0])
    yield "linear_m1", -1.0, 1.0, build_linear_m1

    def build_linear_big(p):
        x = p.input([96, 512])
        p.op(pw.Op.LINEAR, [x, p.const([384, 512], 0.1), p.const([384])], p.out([96, 384]), [0])
    yield "linear_big", -1.0, 1.0, build_linear_big

    def build_linear_k0(p):
        x = p.input([3, 0])
        p.op(pw.Op.LINEAR, [x, p.const([4, 0]), p.const([4])], p.out([3, 4]), [0])
    yield "linear_k0", -1.0, 1.0, build_linear_k0

    def build_linear_m0(p):
        x = p.input([0, 8])
        p.op(pw.Op.LINEAR, [x, p.const([4, 8]), p.const([4])], p.out([0, 4]), [0])
    yield "linear_m0", -1.0, 1.0, build_linear_m0

    def build_linear_bias_input(p):
        x = p.input([6, 32])
        b = p.input([8])
        p.op(pw.Op.LINEAR, [x, p.const([8, 32], 0.3), b], p.out([6, 8]), [0])
    yield "linear_bias_input", -1.0, 1.0, build_linear_bias_input

    # LINEAR/MATMUL followed by an activation: fused into the cuBLASLt epilogue when the
    # activation is RELU or tanh-GELU and reads only the GEMM's output.
    for act_name, opcode, approximate in (("relu", pw.Op.RELU, None),
                                          ("gelu_tanh", pw.Op.GELU, 1),
                                          ("gelu_erf", pw.Op.GELU, 0)):
        for to_output in (False, True):
            def build(p, opcode=opcode, approximate=approximate, to_output=to_output):
                x = p.input([33, 64])
                t = p.tmp([33, 48])
                p.op(pw.Op.LINEAR, [x, p.const([48, 64], 0.3), p.const([48], 0.5)], t, [0])
                y = p.out([33, 48]) if to_output else p.tmp([33, 48])
                p.op(opcode, [t], y, [] if approximate is None else [approximate])
                if not to_output:
                    p.op(pw.Op.ADD, [y, p.const([48])], p.out([33, 48]))
            where = "out" if to_output else "mid"
            yield f"linear_{act_name}_{where}", -1.0, 1.0, build

    # The activation's output reuses the bytes of the GEMM's input (the memory plan allows
    # it: their lifetimes do not meet), so fusing would write what the GEMM still reads.
    def build_linear_gelu_reuse(p):
        x = p.input([32, 64])
        t0 = p.tmp([32, 64])
        p.op(pw.Op.RELU, [x], t0)
        t1 = p.tmp([32, 64])
        p.op(pw.Op.LINEAR, [t0, p.const([64, 64], 0.2), p.const([64])], t1, [0])
        t2 = p.tmp([32, 64])
        p.op(pw.Op.GELU, [t1], t2, [1])
        p.op(pw.Op.MUL, [t2, p.const([64])], p.out([32, 64]))
    yield "linear_gelu_reuse", -1.0, 1.0, build_linear_gelu_reuse

    def build_matmul_relu(p):
        a = p.input([4, 8, 16])
        b = p.input([16, 12])
        t = p.tmp([4, 8, 12])
        p.op(pw.Op.MATMUL, [a, b], t)
        p.op(pw.Op.RELU, [t], p.out([4, 8, 12]))
    yield "matmul_relu", -1.0, 1.0, build_matmul_relu

    # A GEMM output read twice must not be fused.
    def build_linear_two_readers(p):
        x = p.input([7, 16])
        t = p.tmp([7, 8])
        p.op(pw.Op.LINEAR, [x, p.const([8, 16], 0.3)], t, [0])
        r = p.tmp([7, 8])
        p.op(pw.Op.RELU, [t], r)
        p.op(pw.Op.SUB, [r, t], p.out([7, 8]))
    yield "linear_two_readers", -1.0, 1.0, build_linear_two_readers

    matmuls = [("2d", [3, 4], [4, 2]), ("fold", [3, 4, 5], [5, 6]),
               ("a_bcast", [4, 5], [3, 5, 6]), ("full", [2, 3, 4, 5], [2, 3, 5, 6]),
               ("mixed", [2, 1, 4, 5], [1, 3, 5, 6]), ("rank4_b1", [2, 3, 4, 5], [1, 1, 5, 6]),
               ("big", [8, 64, 128], [8, 128, 96])]
    for shape_name, a_shape, b_shape in matmuls:
        def build(p, a_shape=a_shape, b_shape=b_shape):
            a = p.input(a_shape)
            b = p.input(b_shape)
            batch = bshape(a_shape[:-2], b_shape[:-2])
            p.op(pw.Op.MATMUL, [a, b], p.out(batch + [a_shape[-2], b_shape[-1]]))
        yield f"matmul_{shape_name}", -1.0, 1.0, build

    def build_matmul_const(p):
        a = p.input([5, 16])
        p.op(pw.Op.MATMUL, [a, p.const([16, 9])], p.out([5, 9]))
    yield "matmul_const", -1.0, 1.0, build_matmul_const

    def build_reshape(p):
        x = p.input([2, 3, 4])
        p.op(pw.Op.RESHAPE, [x], p.out([6, 4]))
    yield "reshape", -2.0, 2.0, build_reshape

    def build_copy(p):
        x = p.input([3, 7])
        p.op(pw.Op.COPY, [x], p.out([3, 7]))
    yield "copy", -2.0, 2.0, build_copy

    for shape_name, shape, perm in (("3d", [2, 3, 4], [2, 0, 1]), ("4d", [2, 3, 4, 5], [0, 2, 1, 3]),
                                    ("ones", [1, 5, 1], [2, 1, 0]),
                                    ("rank6", [2, 1, 3, 2, 2, 3], [5, 3, 0, 4, 2, 1]),
                                    ("transpose", [64, 48], [1, 0])):
        def build(p, shape=shape, perm=perm):
            x = p.input(shape)
            p.op(pw.Op.PERMUTE, [x], p.out([shape[i] for i in perm]), perm)
        yield f"permute_{shape_name}", -2.0, 2.0, build

    for shape_name, shape, dim in (("last", [4, 37], 1), ("first", [5, 6], 0), ("mid", [2, 7, 3], 1),
                                   ("wide", [2, 3000], 1), ("one", [3, 1], 1)):
        def build(p, shape=shape, dim=dim):
            x = p.input(shape)
            p.op(pw.Op.SOFTMAX, [x], p.out(shape), [dim])
        yield f"softmax_{shape_name}", -8.0, 8.0, build

    for shape_name, shape, nd, weight, bias in (("wb", [4, 40], 1, True, True),
                                                ("w_2d", [2, 3, 8], 2, True, False),
                                                ("plain", [5, 16], 1, False, False),
                                                ("b", [3, 10], 1, False, True),
                                                ("wide", [3, 1024], 1, True, True)):
        def build(p, shape=shape, nd=nd, weight=weight, bias=bias):
            x = p.input(shape)
            norm = shape[len(shape) - nd:]
            ins = [x] + ([p.const(norm)] if weight else []) + ([p.const(norm)] if bias else [])
            p.op(pw.Op.LAYER_NORM, ins, p.out(shape),
                 [nd, pw.f64_bits(1e-5), int(weight), int(bias)])
        yield f"layer_norm_{shape_name}", -3.0, 3.0, build

    # A whole MLP (the demo's shape, smaller): arena reuse, fused epilogues, chains.
    def build_mlp(p):
        x = p.input([16, 128])
        h = x
        for layer in range(3):
            t = p.tmp([16, 128])
            p.op(pw.Op.LINEAR, [h, p.const([128, 128], 0.1), p.const([128], 0.1)], t, [0])
            g = p.tmp([16, 128])
            p.op(pw.Op.GELU, [t], g, [1 if layer % 2 == 0 else 0])
            h = g
        p.op(pw.Op.LINEAR, [h, p.const([128, 128], 0.1), p.const([128], 0.1)], p.out([16, 128]), [0])
    yield "mlp", -1.0, 1.0, build_mlp

    # Attention-like: matmul, softmax, matmul, permute, layer norm.
    def build_attention(p):
        q = p.input([2, 4, 8, 16])
        k = p.input([2, 4, 16, 8])
        v = p.input([2, 4, 8, 16])
        s = p.tmp([2, 4, 8, 8])
        p.op(pw.Op.MATMUL, [q, k], s)
        scaled = p.tmp([2, 4, 8, 8])
        p.op(pw.Op.MUL, [s, p.const([1])], scaled)
        pr = p.tmp([2, 4, 8, 8])
        p.op(pw.Op.SOFTMAX, [scaled], pr, [3])
        o = p.tmp([2, 4, 8, 16])
        p.op(pw.Op.MATMUL, [pr, v], o)
        t = p.tmp([2, 8, 4, 16])
        p.op(pw.Op.PERMUTE, [o], t, [0, 2, 1, 3])
        r = p.tmp([2, 8, 64])
        p.op(pw.Op.RESHAPE, [t], r)
        p.op(pw.Op.LAYER_NORM, [r, p.const([64]), p.const([64])], p.out([2, 8, 64]),
             [1, pw.f64_bits(1e-5), 1, 1])
    yield "attention", -1.0, 1.0, build_attention

    # Two outputs, one of them a copy of an input, one read again after it is written.
    def build_outputs(p):
        x = p.input([4, 8])
        p.op(pw.Op.COPY, [x], p.out([4, 8]))
        y = p.out([4, 8])
        p.op(pw.Op.SIGMOID, [x], y)
        p.op(pw.Op.MUL, [y, x], p.out([4, 8]))
    yield "outputs", -2.0, 2.0, build_outputs


def bench_cases():
    """The demo's MLP (examples/demo.py): 4 x (Linear(1024, 1024) + GELU), float16, at
    batch 1 and 4096, with GELU's erf form (PyTorch's default) and its tanh form (which
    the CUDA executor fuses into the GEMM epilogue)."""
    for batch in (1, 4096):
        for approximate, form in ((0, "erf"), (1, "tanh")):
            p = Plan(pw.Dtype.FLOAT16, 1000 + batch + approximate)
            h = p.input([batch, 1024])
            for layer in range(4):
                t = p.tmp([batch, 1024])
                p.op(pw.Op.LINEAR, [h, p.const([1024, 1024], 0.03), p.const([1024], 0.1)], t, [0])
                g = p.out([batch, 1024]) if layer == 3 else p.tmp([batch, 1024])
                p.op(pw.Op.GELU, [t], g, [approximate])
                h = g
            yield f"bench_mlp1024_gelu_{form}_b{batch}_f16", p


def main():
    global pw
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    pw = load_writer(sys.argv[1])
    out_dir = sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    dtypes = (("f32", pw.Dtype.FLOAT32), ("f16", pw.Dtype.FLOAT16), ("bf16", pw.Dtype.BFLOAT16))
    lines = []
    seed = 0
    for name, low, high, build in cases():
        for dtype_name, dtype in dtypes:
            seed += 1
            p = Plan(dtype, seed)
            build(p)
            case = f"{name}_{dtype_name}"
            with open(os.path.join(out_dir, case + ".plan"), "wb") as f:
                f.write(p.w.to_bytes())
            lines.append(f"{case} {low!r} {high!r}")
    with open(os.path.join(out_dir, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    bench = []
    for case, p in bench_cases():
        with open(os.path.join(out_dir, case + ".plan"), "wb") as f:
            f.write(p.w.to_bytes())
        bench.append(case)
    with open(os.path.join(out_dir, "bench.txt"), "w") as f:
        f.write("\n".join(bench) + "\n")


if __name__ == "__main__":
    main()

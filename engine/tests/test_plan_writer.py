"""Checks of python/ember/plan_writer.py on its own: the errors it raises, determinism,
and the layout rules of docs/plan-format.md (section alignment, arena reuse).

Usage: test_plan_writer.py PLAN_WRITER_PY  (standard library only)
"""

import importlib.util
import struct
import sys
import unittest

pw = None


def load(path):
    spec = importlib.util.spec_from_file_location("ember_plan_writer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def f32(*values):
    return struct.pack(f"<{len(values)}f", *values)


class WriterErrors(unittest.TestCase):
    def writer(self):
        w = pw.PlanWriter()
        x = w.add_input("x", pw.Dtype.FLOAT32, [2, 4])
        return w, x

    def assertRaisesMessage(self, substring, fn, *args):
        with self.assertRaises(ValueError) as ctx:
            fn(*args)
        self.assertIn(substring, str(ctx.exception))

    def test_bad_names(self):
        w = pw.PlanWriter()
        self.assertRaisesMessage("1..255 bytes", w.add_input, "", pw.Dtype.FLOAT32, [1])
        self.assertRaisesMessage("1..255 bytes", w.add_input, "n" * 256, pw.Dtype.FLOAT32, [1])
        self.assertRaisesMessage("NUL", w.add_input, "a\0b", pw.Dtype.FLOAT32, [1])

    def test_bad_tensors(self):
        w = pw.PlanWriter()
        self.assertRaisesMessage("rank 9 exceeds 8", w.add_input, "x", pw.Dtype.FLOAT32, [1] * 9)
        self.assertRaisesMessage("dims[1] is -1", w.add_input, "x", pw.Dtype.FLOAT32, [2, -1])
        self.assertRaisesMessage("not a Dtype", w.add_input, "x", 42, [2])
        self.assertRaisesMessage("needs 8", w.add_constant, "c", pw.Dtype.FLOAT32, [2], b"abc")

    def test_bad_ops(self):
        w, x = self.writer()
        y = w.add_output("y", pw.Dtype.FLOAT32, [2, 4])
        self.assertRaisesMessage("not an Op", w.add_op, 99, [x], [y])
        self.assertRaisesMessage("tensor index 7 out of range", w.add_op, pw.Op.RELU, [7], [y])

    def test_graph_rules(self):
        cases = [
            ("takes 1 attrs, got 0", lambda w, x, y: w.add_op(pw.Op.GELU, [x], [y])),
            ("approximate 3", lambda w, x, y: w.add_op(pw.Op.GELU, [x], [y], [3])),
            ("expected [2, 4]", lambda w, x, y: w.add_op(pw.Op.SOFTMAX, [x],
                                                          [w.add_output("z", pw.Dtype.FLOAT32, [4, 2])], [0])),
            ("dim 2 out of range", lambda w, x, y: w.add_op(pw.Op.SOFTMAX, [x], [y], [2])),
            ("not a permutation", lambda w, x, y: w.add_op(pw.Op.PERMUTE, [x], [y], [0, 0])),
            ("only intermediates and outputs", lambda w, x, y: w.add_op(pw.Op.RELU, [x], [x])),
            ("dtype FLOAT16", lambda w, x, y: w.add_op(
                pw.Op.RELU, [x], [w.add_output("h", pw.Dtype.FLOAT16, [2, 4])])),
        ]
        for expected, build in cases:
            with self.subTest(expected=expected):
                w, x = self.writer()
                y = w.add_output("y", pw.Dtype.FLOAT32, [2, 4])
                build(w, x, y)
                self.assertRaisesMessage(expected, w.to_bytes)

    def test_order_and_coverage(self):
        w, x = self.writer()
        t = w.add_intermediate("t", pw.Dtype.FLOAT32, [2, 4])
        y = w.add_output("y", pw.Dtype.FLOAT32, [2, 4])
        w.add_op(pw.Op.RELU, [t], [y])
        w.add_op(pw.Op.RELU, [x], [t])
        self.assertRaisesMessage("before any op writes it", w.to_bytes)
        w, x = self.writer()
        y = w.add_output("y", pw.Dtype.FLOAT32, [2, 4])
        w.add_op(pw.Op.RELU, [x], [y])
        w.add_op(pw.Op.TANH, [x], [y])
        self.assertRaisesMessage("already written by op 0", w.to_bytes)
        w, x = self.writer()
        w.add_output("y", pw.Dtype.FLOAT32, [2, 4])
        z = w.add_output("z", pw.Dtype.FLOAT32, [2, 4])
        w.add_op(pw.Op.RELU, [x], [z])
        self.assertRaisesMessage("never written", w.to_bytes)
        self.assertRaisesMessage("no tensors", pw.PlanWriter().to_bytes)


class WriterNewOps(unittest.TestCase):
    """The writer's checks of ops 17 and on, and of dynamic dims, mirror the verifier."""

    F = None

    def setUp(self):
        self.F = pw.Dtype.FLOAT32

    def assertRaisesMessage(self, substring, fn, *args):
        with self.assertRaises(ValueError) as ctx:
            fn(*args)
        self.assertIn(substring, str(ctx.exception))

    def test_symbols(self):
        w = pw.PlanWriter()
        self.assertRaisesMessage("bounds [3, 2]", w.add_symbol, 3, 2)
        self.assertRaisesMessage("bounds [0, 0]", w.add_symbol, 0, 0)
        s = w.add_symbol(1, 4)
        self.assertRaisesMessage("not a positive multiple", w.add_input, "x", self.F, [6, 2],
                                 [s, None])
        self.assertRaisesMessage("names symbol 3", w.add_input, "x", self.F, [4], [3])
        x = w.add_input("x", self.F, [8, 2], symbols=[s, None])  # 2 * s0
        c = w.add_constant("c", self.F, [2], bytes(8))
        y = w.add_output("y", self.F, [8, 2])  # static: differs from [2*s0, 2]
        w.add_op(pw.Op.ADD, [x, c], [y])
        self.assertRaisesMessage("expected [2*s0, 2]", w.to_bytes)

    def test_unbound_symbol_and_dynamic_constant(self):
        w = pw.PlanWriter()
        s = w.add_symbol(1, 4)
        x = w.add_input("x", self.F, [2])
        y = w.add_output("y", self.F, [4], symbols=[s])
        w.add_op(pw.Op.RELU, [x], [y])
        self.assertRaisesMessage("symbol 0 is not a dim of any input", w.to_bytes)

    def test_op_rules(self):
        F, B, I64 = self.F, pw.Dtype.BOOL, pw.Dtype.INT64

        def conv(w):
            x = w.add_input("x", F, [1, 4, 5, 5])
            k = w.add_constant("k", F, [4, 2, 3, 3], bytes(288))
            w.add_op(pw.Op.CONV2D, [x, k], [w.add_output("y", F, [1, 4, 5, 5])],
                     [1, 1, 1, 1, 1, 1, 3])

        def pool(w):
            x = w.add_input("x", F, [1, 1, 4, 4])
            w.add_op(pw.Op.MAX_POOL2D, [x], [w.add_output("y", F, [1, 1, 2, 2])],
                     [2, 2, 2, 2, 2, 2, 1, 1, 0])

        def slice_(w):
            x = w.add_input("x", F, [2, 5])
            w.add_op(pw.Op.SLICE, [x], [w.add_output("y", F, [2, 3])], [1, 3, 1])

        def where(w):
            c = w.add_input("c", F, [2])
            a = w.add_input("a", F, [2])
            w.add_op(pw.Op.WHERE, [c, a, a], [w.add_output("y", F, [2])])

        def embedding(w):
            t = w.add_constant("t", F, [4, 2], bytes(32))
            i = w.add_input("i", F, [3])
            w.add_op(pw.Op.EMBEDDING, [t, i], [w.add_output("y", F, [3, 2])])

        def sdpa(w):
            q = w.add_input("q", F, [2, 3, 4])
            m = w.add_input("m", B, [3, 3])
            w.add_op(pw.Op.SDPA, [q, q, q, m], [w.add_output("y", F, [2, 3, 4])],
                     [1, pw.f64_bits(0.5)])

        def reduce_max(w):
            s = w.add_symbol(0, 4)
            x = w.add_input("x", F, [4, 2], symbols=[s, None])
            w.add_op(pw.Op.REDUCE_MAX, [x], [w.add_output("y", F, [2])], [1, 0])

        def cast(w):
            x = w.add_input("x", I64, [2])
            w.add_op(pw.Op.CAST, [x], [w.add_output("y", B, [3])])

        cases = [("groups 3 does not fit", conv), ("exceeds half the kernel", pool),
                 ("do not fit in dims[1] = 5", slice_), ("condition must be BOOL", where),
                 ("indices must be INT64 or INT32", embedding),
                 ("a mask or is_causal, not both", sdpa), ("which may be 0", reduce_max),
                 ("expected [2]", cast)]
        for expected, build in cases:
            with self.subTest(expected=expected):
                w = pw.PlanWriter()
                build(w)
                self.assertRaisesMessage(expected, w.to_bytes)


class WriterLayout(unittest.TestCase):
    def chain(self, n):
        """x -> relu -> t0 -> relu -> t1 ... -> y: each intermediate dies one op later."""
        w = pw.PlanWriter()
        x = w.add_input("x", pw.Dtype.FLOAT32, [4, 4])
        prev = x
        for i in range(n):
            t = w.add_intermediate(f"t{i}", pw.Dtype.FLOAT32, [4, 4])
            w.add_op(pw.Op.RELU, [prev], [t])
            prev = t
        y = w.add_output("y", pw.Dtype.FLOAT32, [4, 4])
        w.add_op(pw.Op.RELU, [prev], [y])
        return w

    def header(self, data):
        fields = struct.unpack_from("<8sIIQIIIIIIIIQ", data, 0)
        sections = [struct.unpack_from("<QQ", data, 64 + 16 * i) for i in range(7)]
        return fields, sections

    def test_deterministic(self):
        self.assertEqual(self.chain(5).to_bytes(), self.chain(5).to_bytes())

    def test_header_and_alignment(self):
        w = self.chain(3)
        c = w.add_constant("c", pw.Dtype.FLOAT32, [3], f32(1, 2, 3))
        data = w.to_bytes()
        fields, sections = self.header(data)
        self.assertEqual(fields[0], b"EMBRPLAN")
        self.assertEqual(fields[1:3], (1, 192))
        self.assertEqual(fields[3], len(data))
        for i, (offset, size) in enumerate(sections):
            self.assertGreaterEqual(offset, 192)
            self.assertLessEqual(offset + size, len(data))
            self.assertEqual(offset % (64 if i == 6 else 8), 0)
        const_off, const_size = sections[6]
        self.assertEqual(data[const_off:const_off + 12], f32(1, 2, 3))
        self.assertEqual(c, 5)

    def test_arena_reuse(self):
        # A chain of 10 intermediates needs only two live buffers at a time.
        data = self.chain(10).to_bytes()
        fields, sections = self.header(data)
        arena_size = fields[12]
        self.assertEqual(arena_size, 128)
        t_off = sections[1][0]
        offsets = {struct.unpack_from("<Q", data, t_off + 104 * i + 16)[0] for i in range(1, 11)}
        self.assertEqual(offsets, {0, 64})

    def offsets(self, data, count):
        t_off = self.header(data)[1][1][0]
        return [struct.unpack_from("<Q", data, t_off + 104 * i + 16)[0] for i in range(count)]

    def test_reshape_views(self):
        # x -relu-> a -reshape-> v -reshape-> v2 -relu-> b; c = relu(a) after b (a outlives
        # its views); d = relu(c); y = reshape(b) (an output: a copy).
        w = pw.PlanWriter()
        f = pw.Dtype.FLOAT32
        x = w.add_input("x", f, [4, 16])
        a, v, v2, b, c, d = (w.add_intermediate(n, f, s) for n, s in (
            ("a", [4, 16]), ("v", [64]), ("v2", [16, 4]), ("b", [16, 4]), ("c", [4, 16]),
            ("d", [4, 16])))
        y = w.add_output("y", f, [64])
        z = w.add_output("z", f, [4, 16])
        w.add_op(pw.Op.RELU, [x], [a])
        w.add_op(pw.Op.RESHAPE, [a], [v])
        w.add_op(pw.Op.RESHAPE, [v], [v2])
        w.add_op(pw.Op.RELU, [v2], [b])
        w.add_op(pw.Op.RELU, [a], [c])
        w.add_op(pw.Op.RELU, [c], [d])
        w.add_op(pw.Op.RESHAPE, [b], [y])
        w.add_op(pw.Op.RELU, [d], [z])
        data = w.to_bytes()
        off = dict(zip(["x", "a", "v", "v2", "b", "c", "d"], self.offsets(data, 7)))
        self.assertEqual(off["v"], off["a"])
        self.assertEqual(off["v2"], off["a"])
        # v2 dies at op 3, but a lives to op 4: b and c must not land on the chain.
        self.assertNotEqual(off["b"], off["a"])
        self.assertNotEqual(off["c"], off["a"])
        self.assertNotEqual(off["c"], off["b"])
        # After op 4 the whole chain is dead: d reuses its bytes.
        self.assertEqual(off["d"], off["a"])
        self.assertEqual(self.header(data)[0][12], 3 * 256)

    def test_io_order_and_f64(self):
        w = pw.PlanWriter()
        b = w.add_input("b", pw.Dtype.FLOAT32, [2])
        a = w.add_input("a", pw.Dtype.FLOAT32, [2])
        y = w.add_output("y", pw.Dtype.FLOAT32, [2])
        w.add_op(pw.Op.SUB, [a, b], [y])
        data = w.to_bytes()
        _, sections = self.header(data)
        io = struct.unpack_from("<3I", data, sections[2][0])
        self.assertEqual(io, (b, a, y))
        self.assertEqual(pw.f64_bits(1.0), 0x3FF0000000000000)
        self.assertEqual(pw.f64_bits(-2.0), -0x4000000000000000)


def main():
    global pw
    pw = load(sys.argv[1])
    unittest.main(argv=[sys.argv[0]], verbosity=2)


if __name__ == "__main__":
    main()

"""Run a .pte program through ExecuTorch's Python runtime, with Ember registered.

    python examples/python_runner.py MODEL.pte [--method forward] [--inputs FILE]
        [--outputs FILE] [--check EXPECTED] [--iterations N]

Input shapes and dtypes come from the method's metadata, never from this script. Inputs
are read from FILE (the raw bytes of every input, concatenated in order, as written by
`examples/demo.py`) or, without it, filled with a fixed pseudo-random pattern.
`--check EXPECTED` compares the outputs with raw bytes of the same layout and exits
non-zero when the relative error is above `--rtol`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import ember_executorch_runtime  # noqa: F401  (the import registers EmberBackend)
import torch
from executorch.runtime import Runtime

# ExecuTorch ScalarType codes, as MethodMeta reports them.
SCALAR_TYPES = {
    3: torch.int32,
    4: torch.int64,
    5: torch.float16,
    6: torch.float32,
    11: torch.bool,
    15: torch.bfloat16,
}


def input_specs(method) -> list[tuple[tuple[int, ...], torch.dtype]]:
    meta = method.metadata
    specs = []
    for i in range(meta.num_inputs()):
        tensor_meta = meta.input_tensor_meta(i)
        code = tensor_meta.dtype()
        if code not in SCALAR_TYPES:
            raise SystemExit(f"input {i}: dtype code {code} is not supported by this runner")
        specs.append((tuple(tensor_meta.sizes()), SCALAR_TYPES[code]))
    return specs


def tensors_from_bytes(data: bytes, specs) -> list[torch.Tensor]:
    tensors, offset = [], 0
    for shape, dtype in specs:
        count = 1
        for dim in shape:
            count *= dim
        nbytes = count * torch.empty((), dtype=dtype).element_size()
        if offset + nbytes > len(data):
            raise SystemExit(
                f"input file holds {len(data)} bytes; the method's inputs need more "
                f"(shapes and dtypes: {specs})"
            )
        chunk = bytearray(data[offset : offset + nbytes])
        tensors.append(torch.frombuffer(chunk, dtype=dtype).reshape(shape).clone())
        offset += nbytes
    if offset != len(data):
        raise SystemExit(f"input file holds {len(data)} bytes; the method's inputs take {offset}")
    return tensors


def pattern_inputs(specs) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    inputs = []
    for shape, dtype in specs:
        if dtype.is_floating_point:
            inputs.append(torch.randn(shape, generator=generator).to(dtype))
        else:
            inputs.append(torch.randint(0, 4, shape, generator=generator).to(dtype))
    return inputs


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    actual, expected = actual.double(), expected.double()
    scale = expected.abs().max().item()
    return (actual - expected).abs().max().item() / max(scale, 1e-30)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--method", default="forward")
    parser.add_argument("--inputs", help="raw bytes of all inputs, concatenated")
    parser.add_argument("--outputs", help="write raw bytes of all outputs here")
    parser.add_argument("--check", help="raw bytes of the expected outputs")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args(argv)

    program = Runtime.get().load_program(args.model)
    method = program.load_method(args.method)
    specs = input_specs(method)
    if args.inputs:
        with open(args.inputs, "rb") as f:
            inputs = tensors_from_bytes(f.read(), specs)
    else:
        inputs = pattern_inputs(specs)

    outputs = method.execute(inputs)
    times = []
    for _ in range(args.iterations):
        start = time.perf_counter()
        method.execute(inputs)
        times.append(time.perf_counter() - start)

    for i, out in enumerate(outputs):
        flat = out.flatten()[:4].tolist()
        print(f"output {i}: shape {tuple(out.shape)} dtype {out.dtype} first {flat}")
    if times:
        print(f"execute: median {statistics.median(times) * 1e6:.1f} us over {len(times)} calls")

    if args.outputs:
        with open(args.outputs, "wb") as f:
            for out in outputs:
                f.write(out.contiguous().numpy().tobytes())
    if args.check:
        out_specs = [(tuple(o.shape), o.dtype) for o in outputs]
        with open(args.check, "rb") as f:
            expected = tensors_from_bytes(f.read(), out_specs)
        worst = max(relative_error(a, e) for a, e in zip(outputs, expected))
        verdict = "ok" if worst <= args.rtol else "MISMATCH"
        print(f"python runner: max relative error {worst:.3e} (rtol {args.rtol:g}): {verdict}")
        return 0 if worst <= args.rtol else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The main job, end to end: export an MLP with Ember, run it from Python and from C++.

    python examples/demo.py [--out out/demo]

1. Exports a small MLP with `ember.save` to a .pte whose compute runs on EmberBackend.
2. Runs it with the Python runner (`executorch.runtime`, Ember registered by import).
3. Builds the C++ reference runner against the installed wheels only (CMake
   `find_package(executorch)` and `find_package(ember_executorch)`) and runs it.
4. Compares both with eager PyTorch and prints the maximum relative error and timings.

Run it from the environment `make demo` sets up; it exits non-zero on any mismatch.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
RTOL = 1e-5


class DemoMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, 256),
            torch.nn.GELU(),
            torch.nn.Linear(256, 256),
            torch.nn.ReLU(),
            torch.nn.Linear(256, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.net(x), dim=-1)


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run(cmd, check=True, **kwargs)


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    diff = (actual.double() - expected.double()).abs().max().item()
    return diff / max(expected.double().abs().max().item(), 1e-30)


def build_reference_runner(build_dir: Path) -> Path:
    site = Path(sysconfig.get_paths()["purelib"])
    prefix = f"{site / 'executorch'};{site / 'ember_executorch_runtime'}"
    run(
        [
            "cmake", "-S", str(REPO / "examples" / "reference_runner"), "-B", str(build_dir),
            "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={prefix}",
        ],
        stdout=subprocess.DEVNULL,
    )
    run(["cmake", "--build", str(build_dir)], stdout=subprocess.DEVNULL)
    return build_dir / "reference_runner"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "out" / "demo"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import ember

    torch.manual_seed(0)
    model = DemoMLP().eval()
    x = torch.randn(8, 64)
    with torch.no_grad():
        expected = model(x)

    pte = out / "mlp.pte"
    ember.save(model, pte, example_inputs=(x,))
    print(f"exported {pte} ({pte.stat().st_size} bytes)")
    (out / "inputs.bin").write_bytes(x.numpy().tobytes())
    (out / "expected.bin").write_bytes(expected.numpy().tobytes())

    inspect = run(
        [sys.executable, "-m", "ember.inspect", str(pte)], capture_output=True, text=True
    )
    print(inspect.stdout, end="")

    run(
        [
            sys.executable, str(REPO / "examples" / "python_runner.py"), str(pte),
            "--inputs", str(out / "inputs.bin"), "--check", str(out / "expected.bin"),
            "--rtol", str(RTOL),
        ]
    )

    runner = build_reference_runner(REPO / "build" / "reference_runner")
    cpp_out = out / "cpp_outputs.bin"
    run([str(runner), str(pte), "--inputs", str(out / "inputs.bin"), "--outputs", str(cpp_out)])
    cpp = torch.frombuffer(bytearray(cpp_out.read_bytes()), dtype=torch.float32)
    cpp_error = relative_error(cpp.reshape(expected.shape), expected)
    verdict = "ok" if cpp_error <= RTOL else "MISMATCH"
    print(f"C++ reference runner: max relative error {cpp_error:.3e} (rtol {RTOL:g}): {verdict}")
    return 0 if cpp_error <= RTOL else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

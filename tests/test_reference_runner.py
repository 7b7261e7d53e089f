"""The C++ reference runner, built against the installed wheels only, on three programs.

1. fully delegated: every compute op in one Ember partition;
2. two Ember partitions with an op Ember does not take (cumsum) between them, which runs
   on ExecuTorch's own kernels;
3. Ember plus XNNPACK: Ember is told not to take the activations, XNNPACK takes them.

Each is compared with eager PyTorch. The build itself is the CMake consumer test:
`find_package(executorch)` and `find_package(ember_executorch)` through CMAKE_PREFIX_PATH
at the two site-packages roots, and the linked executable NEEDs Ember's library although
it names no symbol from it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.exir")
runtime = pytest.importorskip(
    "ember_executorch_runtime", reason="the runtime wheel is not installed (make wheels)"
)
elffile = pytest.importorskip("elftools.elf.elffile")

import ember  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SITE = Path(sysconfig.get_paths()["purelib"])


@pytest.fixture(scope="module")
def runner(tmp_path_factory) -> Path:
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed to build the reference runner")
    build = tmp_path_factory.mktemp("reference_runner")
    prefix = f"{SITE / 'executorch'};{SITE / 'ember_executorch_runtime'}"
    subprocess.run(
        ["cmake", "-S", str(REPO / "examples" / "reference_runner"), "-B", str(build), "-G",
         "Ninja", "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={prefix}"],
        check=True, capture_output=True,
    )
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    return build / "reference_runner"


def needed_entries(path: Path) -> list[str]:
    with open(path, "rb") as f:
        dynamic = elffile.ELFFile(f).get_section_by_name(".dynamic")
        return [t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"]


def test_consumer_executable_needs_the_backend_without_naming_it(runner):
    assert "libexecutorch_backend_ember.so" in needed_entries(runner)
    # The control: the runner's source names no Ember symbol and includes no Ember header.
    source = (REPO / "examples" / "reference_runner" / "main.cpp").read_text()
    assert "ember/" not in source and "ember_program" not in source


class Fully(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.b(torch.nn.functional.gelu(self.a(x)))


class SplitByCumsum(Fully):
    def forward(self, x):
        return self.b(torch.cumsum(torch.relu(self.a(x)), dim=-1))


class Activations(Fully):
    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def xnnpack_partitioner():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return XnnpackPartitioner()


PROGRAMS = {
    "fully_delegated": (Fully, {}, {"EmberBackend": 1}),
    "split_by_cumsum": (SplitByCumsum, {}, {"EmberBackend": 2}),
    "ember_and_xnnpack": (
        Activations,
        {"skip_ops": ["aten.relu.default"], "extra_partitioners": "xnnpack"},
        {"EmberBackend": 2, "XnnpackBackend": 1},
    ),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_runner_matches_eager(name, runner, tmp_path):
    from ember.inspect import summarize

    cls, options, expected_delegates = PROGRAMS[name]
    options = dict(options)
    if options.get("extra_partitioners") == "xnnpack":
        options["extra_partitioners"] = [xnnpack_partitioner()]
    torch.manual_seed(0)
    model = cls().eval()
    x = torch.randn(4, 16)
    with torch.no_grad():
        expected = model(x)
    pte = tmp_path / f"{name}.pte"
    ember.save(model, pte, example_inputs=(x,), **options)

    (method,) = summarize(str(pte))
    counts: dict[str, int] = {}
    for delegate in method.delegates:
        counts[delegate.backend_id] = counts.get(delegate.backend_id, 0) + 1
    assert counts == expected_delegates

    (tmp_path / "in.bin").write_bytes(x.numpy().tobytes())
    result = subprocess.run(
        [str(runner), str(pte), "--inputs", str(tmp_path / "in.bin"), "--outputs",
         str(tmp_path / "out.bin"), "--iterations", "3"],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    actual = torch.frombuffer(bytearray((tmp_path / "out.bin").read_bytes()), dtype=torch.float32)
    error = (actual.reshape(expected.shape) - expected).abs().max() / expected.abs().max()
    assert error.item() <= 1e-5


def test_runner_reports_a_missing_file(runner, tmp_path):
    result = subprocess.run([str(runner), str(tmp_path / "absent.pte")],
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "absent.pte" in result.stdout + result.stderr


def test_python_runner_checks_against_eager(tmp_path):
    torch.manual_seed(0)
    model = Fully().eval()
    x = torch.randn(4, 16)
    with torch.no_grad():
        expected = model(x)
    pte = tmp_path / "m.pte"
    ember.save(model, pte, example_inputs=(x,))
    (tmp_path / "in.bin").write_bytes(x.numpy().tobytes())
    (tmp_path / "expected.bin").write_bytes(expected.numpy().tobytes())
    runner_script = REPO / "examples" / "python_runner.py"
    ok = subprocess.run([sys.executable, str(runner_script), str(pte), "--inputs",
                         str(tmp_path / "in.bin"), "--check", str(tmp_path / "expected.bin")],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ok" in ok.stdout
    # The control: a wrong reference makes the same check fail.
    (tmp_path / "wrong.bin").write_bytes((expected + 1).numpy().tobytes())
    bad = subprocess.run([sys.executable, str(runner_script), str(pte), "--inputs",
                          str(tmp_path / "in.bin"), "--check", str(tmp_path / "wrong.bin")],
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert "MISMATCH" in bad.stdout


def _gpu_present() -> bool:
    return shutil.which("nvidia-smi") is not None


def test_runner_reads_embers_copy_counters(runner, tmp_path):
    """The runner reads EmberBackend's counters through ExecuTorch's get_option: on the CPU
    executor a run copies nothing, and --expect-no-host-device-copies passes."""
    torch.manual_seed(0)
    model = Fully().eval()
    x = torch.randn(4, 16)
    pte = tmp_path / "m.pte"
    ember.save(model, pte, example_inputs=(x,))
    result = subprocess.run(
        [str(runner), str(pte), "--iterations", "3", "--expect-no-host-device-copies"],
        capture_output=True, text=True, env={**os.environ, "EMBER_EXECUTOR": "cpu"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("host<->device bytes per execute: ember h2d 0 d2h 0; device allocator h2d 0 d2h 0 "
            "(3 ember delegate runs over 3 executes)") in result.stdout
    # Who serves ExecuTorch's CUDA device allocator: Ember's, in a CUDA build (nothing else
    # in the pinned wheel registers one); none in a build without CUDA.
    from ember_executorch_runtime import _build_info

    expected = "ember" if _build_info.EMBER_CUDA else "none"
    assert f"device allocator: {expected}" in result.stdout


@pytest.mark.skipif(_gpu_present(), reason="checks the no-GPU error path")
def test_program_with_device_buffers_fails_cleanly_without_a_gpu(runner, tmp_path):
    """A program whose memory plan puts buffers on CUDA needs the CUDA device allocator.
    Without a GPU it must fail with a message naming the cause, not abort."""
    sys.path.insert(0, str(REPO / "examples"))
    from export_device_resident import target_device_spec

    torch.manual_seed(0)
    pte = tmp_path / "boundary.pte"
    ember.save(Fully().eval(), pte, example_inputs=(torch.randn(4, 16),),
               compile_specs=[target_device_spec()])
    result = subprocess.run([str(runner), str(pte), "--iterations", "1"],
                            capture_output=True, text=True)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output  # an error, not a signal
    from ember_executorch_runtime import _build_info

    if _build_info.EMBER_CUDA:
        assert "CUDA device allocator: allocate failed" in output
        assert "libcuda.so.1" in output
    assert "loading method 'forward' failed" in output

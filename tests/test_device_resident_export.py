"""Device-resident export (examples/export_device_resident.py) and `ember.inspect`'s check.

Exporting needs no GPU, so these run everywhere. The control (ExecuTorch's default CPU
boundary) must fail the same check, so the check is shown able to fail.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.exir")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "examples"))
import export_device_resident  # noqa: E402

from ember.inspect import device_resident_problems, summarize  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))
    out = tmp_path_factory.mktemp("device_resident")
    return export_device_resident.export_pair(model.eval(), (torch.randn(2, 32),), out)


def inspect_cli(path, *flags):
    return subprocess.run(
        [sys.executable, "-m", "ember.inspect", str(path), *flags],
        capture_output=True, text=True, cwd=REPO,
    )


def test_device_resident_program_has_no_boundary_copies(exported):
    resident, _ = exported
    assert device_resident_problems(summarize(str(resident))) == []


def test_device_resident_program_records_cuda_inputs_and_outputs(exported):
    resident, _ = exported
    (method,) = summarize(str(resident))
    assert [t.device for t in method.inputs] == ["cuda"]
    assert [t.device for t in method.outputs] == ["cuda"]
    assert [d.backend_id for d in method.delegates] == ["EmberBackend"]


def test_control_holds_both_boundary_copies(exported):
    _, boundary = exported
    (method,) = summarize(str(boundary))
    names = {op.split(".")[0] for op in method.operators}
    assert {"et_copy::_h2d_copy", "et_copy::_d2h_copy"} <= names
    problems = device_resident_problems([method])
    assert any("_h2d_copy" in p for p in problems)
    assert any("_d2h_copy" in p for p in problems)


def test_inspect_cli_passes_the_resident_export_and_fails_the_control(exported):
    resident, boundary = exported
    ok = inspect_cli(resident, "--expect-device-resident")
    assert ok.returncode == 0, ok.stderr
    assert "input 0: float32 [2, 32] on cuda" in ok.stdout
    bad = inspect_cli(boundary, "--expect-device-resident")
    assert bad.returncode == 1
    assert "et_copy::_h2d_copy" in bad.stderr


def test_inspect_cli_expect_delegate(exported):
    resident, _ = exported
    assert inspect_cli(resident, "--expect-delegate", "EmberBackend").returncode == 0
    assert inspect_cli(resident, "--expect-delegate", "XnnpackBackend").returncode == 1


def test_gpu_program_manifest_counts_the_copies_each_placement_implies(exported, tmp_path):
    """tools/make_gpu_programs.py reads from the file which host<->device copies a program
    implies per execute; the GPU check compares the runner's counters with it."""
    sys.path.insert(0, str(REPO / "tools"))
    import make_gpu_programs

    resident, boundary = exported
    # Input [2, 32] and output [2, 16], float32.
    assert make_gpu_programs.expected_copies(resident) == {
        "ember_h2d": 0, "ember_d2h": 0, "allocator_h2d": 0, "allocator_d2h": 0}
    assert make_gpu_programs.expected_copies(boundary) == {
        "ember_h2d": 0, "ember_d2h": 0, "allocator_h2d": 2 * 32 * 4, "allocator_d2h": 2 * 16 * 4}
    import ember

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))
    host = tmp_path / "host.pte"
    ember.save(model.eval(), host, example_inputs=(torch.randn(2, 32),))
    assert make_gpu_programs.expected_copies(host) == {
        "ember_h2d": 2 * 32 * 4, "ember_d2h": 2 * 16 * 4, "allocator_h2d": 0, "allocator_d2h": 0}

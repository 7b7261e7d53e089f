"""A damaged Ember plan inside a .pte is an error from init, never a crash (contract 7).

Each case damages the plan bytes of a saved program in place (the blob starts with the
plan magic `EMBRPLAN`), then loads the method through `executorch.runtime` in a
subprocess, so a crash would show as a signal rather than take the test run down. The
control: the undamaged file loads and runs.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.exir")
pytest.importorskip("ember_executorch_runtime", reason="the runtime wheel is not installed")

import ember  # noqa: E402

LOAD = """
import sys
import ember_executorch_runtime  # registers EmberBackend
import torch
from executorch.runtime import Runtime
program = Runtime.get().load_program(sys.argv[1])
try:
    method = program.load_method("forward")
    method.execute((torch.ones(2, 8),))
except Exception as e:
    print("LOAD-ERROR:", type(e).__name__, e)
    sys.exit(3)
print("LOADED")
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> bytes:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    path = tmp_path_factory.mktemp("pte") / "m.pte"
    ember.save(model.eval(), path, example_inputs=(torch.randn(2, 8),))
    return path.read_bytes()


def damage(data: bytes, offset_in_plan: int, value: bytes) -> bytes:
    start = data.index(b"EMBRPLAN")
    assert data.count(b"EMBRPLAN") == 1
    out = bytearray(data)
    out[start + offset_in_plan : start + offset_in_plan + len(value)] = value
    return bytes(out)


def load(tmp_path: Path, data: bytes) -> subprocess.CompletedProcess:
    path = tmp_path / "damaged.pte"
    path.write_bytes(data)
    return subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True,
                          text=True, timeout=300)


# (name, offset in the plan, bytes written, the engine's message fragment)
CASES = [
    ("wrong_magic", 0, b"XXXXPLAN", "magic"),
    ("unknown_version", 8, struct.pack("<I", 2), "version"),
    ("truncated", 16, struct.pack("<Q", 1 << 40), "plan_size"),
    ("offset_out_of_range", 64, struct.pack("<Q", 1 << 40), "strings"),
]


def test_undamaged_program_loads(saved, tmp_path):
    result = load(tmp_path, saved)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "LOADED" in result.stdout


@pytest.mark.parametrize("name,offset,value,fragment", CASES, ids=[c[0] for c in CASES])
def test_damaged_plan_is_an_error_not_a_crash(saved, tmp_path, name, offset, value, fragment):
    result = load(tmp_path, damage(saved, offset, value))
    # 3 is the script's own exit for an exception from load_method: not a signal.
    assert result.returncode == 3, (result.returncode, result.stdout, result.stderr)
    assert "LOAD-ERROR" in result.stdout
    # The delegate logs the engine's message naming the cause.
    assert "EmberBackend" in result.stderr + result.stdout
    assert fragment in (result.stderr + result.stdout)

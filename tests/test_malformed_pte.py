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


# ---- what the delegate logs reaches Python whole --------------------------------------
#
# ExecuTorch formats a log line into 256 bytes, and its Python bindings decode each line as
# UTF-8 and end the process on a byte that is not. The delegate logs printable ASCII (other
# bytes as \xNN) in pieces: a compile spec's raw bytes, or a character cut by the
# message's cap on how much of the value it quotes, are an error, not an abort.


@pytest.mark.parametrize("value,shown", [
    (b"gpu", "has value 'gpu'"),  # the control: printable
    (b"\xff", "has value '\\xff'"),
    (("x" * 63 + "\u00fc").encode(), "has value '" + "x" * 63 + "\\xc3'"),
], ids=["printable", "not_utf8", "cut_character"])
def test_compile_spec_bytes_are_an_error_not_a_crash(tmp_path, value, shown):
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    path = tmp_path / "spec.pte"
    ember.save(torch.nn.Linear(8, 4).eval(), path, example_inputs=(torch.randn(2, 8),),
               compile_specs=[CompileSpec("executor", value)])
    result = subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 3, (result.returncode, result.stdout, result.stderr)
    assert shown in result.stderr, result.stderr


def test_a_long_message_is_logged_to_its_end(tmp_path):
    # A dynamic batch out of its bounds, its input named with 150 characters: the engine's
    # message passes 256 bytes, and its end (what the plan expects) still reaches stderr.
    name = "pixel_values_" + "a" * 137
    namespace = {}
    exec(f"def forward(self, {name}):\n    return torch.relu({name})", {"torch": torch},
         namespace)
    model = type("M", (torch.nn.Module,), {"forward": namespace["forward"]})()
    batch = torch.export.Dim("batch", min=2, max=8)
    exported = torch.export.export(model, (torch.randn(4, 8),), dynamic_shapes=({0: batch},))
    path = tmp_path / "long.pte"
    ember.save(exported, path)
    script = LOAD.replace("torch.ones(2, 8)", "torch.ones(1, 8)")
    result = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 3, (result.returncode, result.stdout, result.stderr)
    assert "input 0 ('pixel_values_aaa" in result.stderr, result.stderr
    assert "(continued)" in result.stderr, result.stderr
    assert "the plan expects [s0, 8]" in result.stderr.replace("\n", " "), result.stderr

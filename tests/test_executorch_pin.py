"""The executorch pin: one source (EXECUTORCH_VERSION), every copy in agreement.

test_repo_has_no_drift is the drift test on this checkout. The rest run
tools/update_executorch_pin.py on a temp copy of the files it touches (--root), so the
checkout is never written.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TOOL = REPO_ROOT / "tools" / "update_executorch_pin.py"


@pytest.fixture(scope="module")
def pin_tool(load_tool):
    return load_tool("update_executorch_pin")


def run_tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True)


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


# Stand-ins for the places, used when the checkout lacks one (so these tests exercise the
# tool even before every place exists); the real file is copied when present. Versions
# are spelled out here by pieces so this file holds no literal pin itself.
def _stand_in(rel: str, pin: str) -> str:
    req = "executorch" + "==" + pin
    return {
        "pyproject.toml": f'[project]\nname = "ember-executorch-runtime"\n'
                          f'dependencies = ["{req}"]\n',
        "python/pyproject.toml": f'[project]\nname = "ember"\ndependencies = [\n'
                                 f'    "torch",\n    "{req}",\n]\n',
        "docs/executorch-wheel.md": f"# What the executorch {pin} wheel ships\n\nText.\n",
    }[rel]


@pytest.fixture
def tree(tmp_path, pin_tool, executorch_pin) -> Path:
    """A temp root with EXECUTORCH_VERSION and every PIN_PLACES file (real or stand-in)."""
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(REPO_ROOT / "EXECUTORCH_VERSION", root / "EXECUTORCH_VERSION")
    for rel, _ in pin_tool.PIN_PLACES:
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if (REPO_ROOT / rel).is_file():
            shutil.copy(REPO_ROOT / rel, dest)
        else:
            dest.write_text(_stand_in(rel, executorch_pin))
    return root


def test_repo_has_no_drift():
    result = run_tool("--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_version_file_is_one_line(executorch_pin):
    assert (REPO_ROOT / "EXECUTORCH_VERSION").read_text() == executorch_pin + "\n"


def test_copy_starts_without_drift(tree):
    result = run_tool("--check", "--root", str(tree))
    assert result.returncode == 0, result.stdout + result.stderr


def test_update_rewrites_every_place(tree, pin_tool):
    result = run_tool("1.6.0rc2", "--root", str(tree))
    assert result.returncode == 0, result.stderr
    assert (tree / "EXECUTORCH_VERSION").read_text() == "1.6.0rc2\n"
    for rel, pattern in pin_tool.PIN_PLACES:
        found = [m.group("version") for m in pin_tool._compile(pattern).finditer(
            (tree / rel).read_text())]
        assert found and set(found) == {"1.6.0rc2"}, (rel, found)
        assert f"updated {rel}" in result.stdout
    assert run_tool("--check", "--root", str(tree)).returncode == 0


def test_update_touches_only_the_version(tree, executorch_pin):
    before = snapshot(tree)
    assert run_tool("7.8.9", "--root", str(tree)).returncode == 0
    after = snapshot(tree)
    assert before.keys() == after.keys()  # no temp files left behind
    for rel in before:
        old_lines, new_lines = before[rel].splitlines(), after[rel].splitlines()
        assert len(old_lines) == len(new_lines), rel
        for old, new in zip(old_lines, new_lines):
            if old != new:
                assert b"7.8.9" in new and new.replace(b"7.8.9", executorch_pin.encode()) == old


def test_update_is_idempotent(tree):
    assert run_tool("1.6.0", "--root", str(tree)).returncode == 0
    first = snapshot(tree)
    second_run = run_tool("1.6.0", "--root", str(tree))
    assert second_run.returncode == 0
    assert "updated" not in second_run.stdout
    assert snapshot(tree) == first


def test_update_back_restores_bytes(tree, executorch_pin):
    original = snapshot(tree)
    assert run_tool("2.0.0", "--root", str(tree)).returncode == 0
    assert snapshot(tree) != original
    assert run_tool(executorch_pin, "--root", str(tree)).returncode == 0
    assert snapshot(tree) == original


@pytest.mark.parametrize("version", [
    "1.5", "1", "latest", "1.5.1; rm -rf /", "1.5.1 ", " 1.5.1", "v1.5.1", "1.5.1+cpu",
    "1.5.1-rc1", "1.5.1RC1", "01.5.1", "1.5.1.2", "", "1.5.1\n1.6.0", ">=1.5.1", "1.5.x",
])
def test_malformed_version_refused_and_nothing_written(tree, version):
    before = snapshot(tree)
    result = run_tool("--root", str(tree), "--", version)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "refused" in result.stderr and "nothing written" in result.stderr
    assert snapshot(tree) == before


@pytest.mark.parametrize("version", ["1.5.1", "10.0.0", "1.6.0a1", "1.6.0b2", "1.6.0rc1",
                                     "1.5.1.post1", "1.6.0.dev20250101", "1.6.0rc1.post2.dev3"])
def test_wellformed_versions_accepted(pin_tool, version):
    assert pin_tool.validate(version) is None


def test_hand_edit_is_drift_naming_the_file(tree, pin_tool):
    for rel, pattern in pin_tool.PIN_PLACES:
        path = tree / rel
        original = path.read_text()
        m = pin_tool._compile(pattern).search(original)
        path.write_text(original[:m.start("version")] + "1.4.9" + original[m.end("version"):])
        result = run_tool("--check", "--root", str(tree))
        assert result.returncode == 1, rel
        drift = [line for line in result.stdout.splitlines() if line.startswith("drift:")]
        assert len(drift) == 1 and drift[0].startswith(f"drift: {rel}:"), drift
        assert "'1.4.9'" in drift[0]
        path.write_text(original)
    assert run_tool("--check", "--root", str(tree)).returncode == 0


def test_version_file_edit_is_drift_everywhere(tree, pin_tool):
    (tree / "EXECUTORCH_VERSION").write_text("1.4.9\n")
    result = run_tool("--check", "--root", str(tree))
    assert result.returncode == 1
    for rel, _ in pin_tool.PIN_PLACES:
        assert f"drift: {rel}:" in result.stdout


def test_removed_pin_is_drift(tree, pin_tool, executorch_pin):
    rel = pin_tool.PIN_PLACES[0][0]
    path = tree / rel
    path.write_text(path.read_text().replace("executorch" + "==" + executorch_pin, "executorch"))
    result = run_tool("--check", "--root", str(tree))
    assert result.returncode == 1 and f"drift: {rel}: no pin found" in result.stdout
    # And an update refuses rather than silently skipping that place.
    before = snapshot(tree)
    update = run_tool("1.6.0", "--root", str(tree))
    assert update.returncode == 1 and rel in update.stderr
    assert snapshot(tree) == before


def test_literal_pin_outside_table_is_drift(tree, executorch_pin):
    ci = tree / ".ci" / "build.sh"
    ci.parent.mkdir()
    ci.write_text("pip install " + "executorch" + "==" + executorch_pin + "\n")
    result = run_tool("--check", "--root", str(tree))
    assert result.returncode == 1
    assert "drift: .ci/build.sh:1: literal pin" in result.stdout
    # Reading the file instead is not a literal.
    ci.write_text('pip install "executorch==$(cat EXECUTORCH_VERSION)"\n')
    assert run_tool("--check", "--root", str(tree)).returncode == 0


def test_doc_pin_is_first_heading_only(tree, pin_tool):
    doc = tree / "docs" / "executorch-wheel.md"
    doc.write_text("Intro.\n\n# Notes on executorch 9.9.9\n\n## Later executorch 1.0.0\n")
    assert run_tool("1.6.0", "--root", str(tree)).returncode == 0
    assert doc.read_text() == "Intro.\n\n# Notes on executorch 1.6.0\n\n## Later executorch 1.0.0\n"


def test_other_names_ending_in_executorch_untouched(tree, pin_tool):
    rel = "python/pyproject.toml"
    path = tree / rel
    other = '\n[project.optional-dependencies]\nx = ["ember-executorch==0.1.0", "my.executorch==2.0.0"]\n'
    path.write_text(path.read_text() + other)
    assert run_tool("--check", "--root", str(tree)).returncode == 0
    assert run_tool("1.6.0", "--root", str(tree)).returncode == 0
    assert path.read_text().endswith(other)

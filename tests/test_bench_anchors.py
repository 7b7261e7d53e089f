"""bench/run_bench.py's AOTInductor anchor, which runs each row in a child process: a
child that dies must become that row's recorded failure, not end the bench run, and one
that works must come back as a timing. Both run here on the CPU (the bench runs it on the
GPU; what differs there is the device and dtype the child is given)."""

from __future__ import annotations

import importlib.util

import pytest


@pytest.fixture(scope="module")
def run_bench(repo_root):
    spec = importlib.util.spec_from_file_location("run_bench", repo_root / "bench" / "run_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_child_that_dies_is_the_rows_failure(run_bench):
    # The child fails before it builds anything (no such device), with a traceback on
    # stderr and exit status 1: what a crash in aoti_load_package leaves the parent.
    cell = run_bench.aoti_anchor("mlp", 1, 1, device="no_such_device")
    assert set(cell) == {"error"}
    assert cell["error"].startswith("exit 1: RuntimeError")


def test_a_child_that_works_is_the_rows_timing(run_bench):
    # The control: the same path compiles, loads and times the MLP (float32 on the CPU).
    cell = run_bench.aoti_anchor("mlp", 1, 3, device="cpu")
    assert "error" not in cell, cell
    assert cell["n"] == 3 and cell["median"] > 0 and cell["build_s"] > 0
    assert cell["rel_error"] < 1e-5

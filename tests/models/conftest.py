"""Fixtures of the model suite.

- The `slow` marker (registered in pytest.ini): full-size models, skipped unless
  EMBER_SLOW_TESTS=1 (they run for minutes on the CPU reference executor).
- run_pte(path, inputs): the outputs of a .pte's forward method through ExecuTorch's own
  runtime, with EmberBackend registered by importing ember_executorch_runtime.
"""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("EMBER_SLOW_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="full-size model: set EMBER_SLOW_TESTS=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def run_pte():
    pytest.importorskip("executorch.runtime")
    import ember_executorch_runtime  # noqa: F401  (registers EmberBackend)
    from executorch.runtime import Runtime

    runtime = Runtime.get()

    def run(path, inputs):
        method = runtime.load_program(str(path)).load_method("forward")
        return list(method.execute(tuple(inputs)))

    return run

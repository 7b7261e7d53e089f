"""Shared pytest fixtures for Ember's Python suites.

Keep this file small: only what more than one suite needs. Each fixture says what it
gives and when it skips.

- repo_root: the repository root (Path).
- executorch_pin: the pinned executorch version, read from EXECUTORCH_VERSION.
- load_tool: load_tool("check_wheel") imports tools/check_wheel.py as a module (tools/
  is not a package, so it is loaded by path).
- built_wheel: $EMBER_WHEEL if set, else the newest dist/ember_executorch_runtime-*.whl,
  or skip saying how to build one.

At import, `import ember` is made to resolve to python/ember of this checkout (pure
Python, nothing to build), without putting python/ on sys.path, which would also expose
the unbuilt python/ember_executorch_runtime.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _use_checkout_ember() -> None:
    init = REPO_ROOT / "python" / "ember" / "__init__.py"
    loaded = sys.modules.get("ember")
    if loaded is not None and Path(getattr(loaded, "__file__", "")).resolve() == init:
        return
    for name in [n for n in sys.modules if n == "ember" or n.startswith("ember.")]:
        del sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        "ember", init, submodule_search_locations=[str(init.parent)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["ember"] = module
    spec.loader.exec_module(module)


_use_checkout_ember()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def executorch_pin() -> str:
    return (REPO_ROOT / "EXECUTORCH_VERSION").read_text().strip()


def _load_tool(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses need the module registered while it executes
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def load_tool():
    return _load_tool


@pytest.fixture(scope="session")
def built_wheel() -> Path:
    if os.environ.get("EMBER_WHEEL"):
        path = Path(os.environ["EMBER_WHEEL"])
        if not path.is_file():
            pytest.fail(f"EMBER_WHEEL={path} is not a file")
        return path
    wheels = sorted((REPO_ROOT / "dist").glob("ember_executorch_runtime-*.whl"),
                    key=lambda p: p.stat().st_mtime)
    if not wheels:
        pytest.skip("no dist/ember_executorch_runtime-*.whl; build one with "
                    "`pip wheel --no-build-isolation --no-deps -w dist .` at the repo root")
    return wheels[-1]

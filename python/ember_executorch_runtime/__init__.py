"""Ember's ExecuTorch backend: importing this package registers ``EmberBackend``.

    import ember_executorch_runtime  # noqa: F401  (registers EmberBackend)
    from executorch.runtime import Runtime

    program = Runtime.get().load_program("model.pte")
    outputs = program.load_method("forward").execute((tensor,))

The package holds one native library, ``lib/libexecutorch_backend_ember.so``, which
registers the backend with ExecuTorch from a static initializer when it is loaded. The
library has no ``PyInit_``, so a plain import cannot load it; ``register()`` does, with
``ctypes``, once. It links the ``libexecutorch.so`` of the installed executorch wheel
through its RUNPATH, and the dynamic loader shares that one copy with ExecuTorch's own
Python extension, so one runtime serves the process.

Loading ``.pte`` files is ExecuTorch's job: use ``executorch.runtime`` (this package
exports no Program, Method or load wrapper).

Set ``EMBER_SKIP_DELEGATE_REGISTRATION=1`` (or true, yes, on) to import without loading
the library, for tools that only want the metadata.

Importing this module imports neither torch nor executorch.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import sys
import threading

__all__ = [
    "BACKEND_NAME",
    "EmberRuntimeImportError",
    "get_library_path",
    "is_registered",
    "register",
]

#: The backend id: what ahead-of-time lowering writes into a ``.pte`` and what the
#: library registers with ExecuTorch.
BACKEND_NAME = "EmberBackend"

_LIBRARY_FILE = "libexecutorch_backend_ember.so"
_DISTRIBUTION = "ember-executorch-runtime"
_SKIP_VARIABLE = "EMBER_SKIP_DELEGATE_REGISTRATION"
# Compared exactly after lower-casing: " 1" or "2" do not skip.
_SKIP_VALUES = frozenset({"1", "true", "yes", "on"})

_lock = threading.Lock()
_library: ctypes.CDLL | None = None


class EmberRuntimeImportError(ImportError):
    """The Ember backend library could not be loaded.

    The message says why and what to install; ``__cause__`` carries the underlying error
    (the loader's ``OSError``, a missing distribution) where there is one.
    """


def get_library_path() -> str:
    """The absolute path of ``libexecutorch_backend_ember.so`` in this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", _LIBRARY_FILE)


def is_registered() -> bool:
    """Whether this process has loaded the library (and so registered EmberBackend)."""
    return _library is not None


def register() -> None:
    """Load the library, which registers EmberBackend with ExecuTorch.

    Idempotent and thread-safe: the first call loads, later calls return at once. Raises
    EmberRuntimeImportError naming the cause and the fix when the library cannot load:
    executorch missing or of another release than the one this wheel was built against,
    or the library file missing, corrupt or unable to find what it links.
    """
    global _library
    if _library is not None:
        return
    with _lock:
        if _library is not None:
            return
        built = _built_executorch_version()
        _check_executorch(built)
        path = get_library_path()
        try:
            library = ctypes.CDLL(path)
        except OSError as exc:
            raise EmberRuntimeImportError(_load_failure_message(path, exc, built)) from exc
        _library = library


def _built_executorch_version() -> str:
    try:
        from . import _build_info
    except ImportError as exc:
        raise EmberRuntimeImportError(
            "ember_executorch_runtime has no _build_info module, so it was not installed "
            f"from a built wheel. Install the {_DISTRIBUTION} wheel (docs/building.md says "
            "how to build one)."
        ) from exc
    return _build_info.EXECUTORCH_VERSION


def _public_version(version: str) -> str:
    """'1.5.1+cpu' -> '1.5.1': the local label names a build flavour, not a release."""
    return version.split("+", 1)[0].strip()


def _check_executorch(built: str) -> None:
    try:
        installed = importlib.metadata.version("executorch")
    except importlib.metadata.PackageNotFoundError as exc:
        raise EmberRuntimeImportError(
            f"executorch is not installed; {_DISTRIBUTION} needs the executorch {built} "
            f"runtime it was built against. Install it: pip install executorch=={built}"
        ) from exc
    if _public_version(installed) != _public_version(built):
        raise EmberRuntimeImportError(
            f"executorch {installed} is installed, but {_DISTRIBUTION} was built against "
            f"executorch {built}, and its library uses that release's C++ runtime. Install "
            f"the matching release (pip install executorch=={built}) or an "
            f"{_DISTRIBUTION} built for executorch {_public_version(installed)}."
        )


def _load_failure_message(path: str, exc: OSError, built: str) -> str:
    reinstall = f"pip install --force-reinstall {_DISTRIBUTION}"
    if not os.path.exists(path):
        return (
            f"{_LIBRARY_FILE} is missing ({exc}); the {_DISTRIBUTION} installation is "
            f"incomplete. Reinstall it: {reinstall}"
        )
    if "libexecutorch.so" in str(exc):
        # The RUNPATH leads to site-packages/executorch/lib; the version check passed, so
        # that installation is damaged or lives in another site-packages directory.
        return (
            f"could not load {path}: {exc}. The library links the libexecutorch.so of the "
            f"executorch wheel installed beside it (site-packages/executorch/lib). Install "
            f"executorch in the same environment as {_DISTRIBUTION}, or repair it: "
            f"pip install --force-reinstall executorch=={built}"
        )
    return (
        f"could not load {path}: {exc}. The library file may be damaged or built for "
        f"another platform; reinstall the package: {reinstall}"
    )


def _skip_requested() -> bool:
    return os.environ.get(_SKIP_VARIABLE, "").lower() in _SKIP_VALUES


def _running_diagnostics() -> bool:
    """True while `python -m ember_executorch_runtime` imports this package.

    __main__ then calls register() itself and reports a failure among the other facts
    instead of Python printing a traceback before the report. Python sets sys.argv[0] to
    "-m" only while it locates the module given with -m; orig_argv says which one.
    """
    if sys.argv[:1] != ["-m"]:
        return False
    argv = list(getattr(sys, "orig_argv", []))
    for i, arg in enumerate(argv):
        if arg == "-m":
            return argv[i + 1 : i + 2] == [__name__]
        if arg == "-m" + __name__:
            return True
    return False


if not _skip_requested() and not _running_diagnostics():
    register()

"""``python -m ember_executorch_runtime``: report what is installed and whether Ember loads.

Prints the versions involved, the library path, whether it loaded, the backends
ExecuTorch has registered and the CUDA devices visible. Exits 0 when EmberBackend is
registered, 1 when it is not.

Run this way, the package import leaves the load to this module (see
``_running_diagnostics`` in ``__init__``), so a library that cannot load is reported
among the other facts, with its cause, rather than as an import traceback.
"""

from __future__ import annotations

import importlib.metadata
import sys

import ember_executorch_runtime as runtime


def _distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _build_info() -> tuple[str, str, str]:
    try:
        from ember_executorch_runtime import _build_info
    except ImportError:
        return ("unknown (not a built wheel)",) * 3
    return (
        _build_info.EMBER_VERSION,
        _build_info.EXECUTORCH_VERSION,
        getattr(_build_info, "EXECUTORCH_BUILD_VERSION", _build_info.EXECUTORCH_VERSION),
    )


def _registered_backends() -> tuple[list[str] | None, str]:
    try:
        from executorch.runtime import Runtime

        return list(Runtime.get().backend_registry.registered_backend_names), ""
    except Exception as exc:  # noqa: BLE001 - reported, not handled
        return None, f"{type(exc).__name__}: {exc}"


def _cuda_devices() -> str:
    try:
        import torch
    except ImportError:
        return "unknown (torch is not installed)"
    try:
        if not torch.cuda.is_available():
            return "none"
        names = [
            f"{index}: {torch.cuda.get_device_name(index)}"
            for index in range(torch.cuda.device_count())
        ]
        return ", ".join(names)
    except Exception as exc:  # noqa: BLE001 - reported, not handled
        return f"unknown ({type(exc).__name__}: {exc})"


def main() -> int:
    ember_version, built, built_full = _build_info()
    load_error = ""
    try:
        runtime.register()
    except runtime.EmberRuntimeImportError as exc:
        load_error = str(exc)  # our messages already quote the underlying error

    backends, backends_error = _registered_backends()
    in_registry = backends is not None and runtime.BACKEND_NAME in backends

    lines = [
        ("ember-executorch-runtime", ember_version),
        ("executorch built against", built if built == built_full else f"{built} ({built_full})"),
        ("executorch installed", _distribution_version("executorch")),
        ("torch installed", _distribution_version("torch")),
        ("library", runtime.get_library_path()),
        ("library loaded", "yes" if runtime.is_registered() else f"no: {load_error}"),
        (
            "registered backends",
            ", ".join(backends) if backends is not None else f"unknown ({backends_error})",
        ),
        (f"{runtime.BACKEND_NAME} registered", "yes" if in_registry else "no"),
        ("CUDA devices", _cuda_devices()),
    ]
    width = max(len(label) for label, _ in lines)
    for label, value in lines:
        print(f"{label:<{width}}  {value}")

    if not runtime.is_registered() or not in_registry:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

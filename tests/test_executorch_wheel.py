"""The facts about the pinned executorch wheel that Ember stands on (docs/executorch-wheel.md).

Each test reads the installed wheel; if a new pin changes one of these facts, the test
names it, and the design or the doc has to change with it.
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
from pathlib import Path

import pytest

elftools = pytest.importorskip("elftools")
from elftools.elf.dynamic import DynamicSection  # noqa: E402
from elftools.elf.elffile import ELFFile  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PIN = (REPO / "EXECUTORCH_VERSION").read_text().strip()


def package_root() -> Path:
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("executorch is not installed in this environment")
    return Path(list(spec.submodule_search_locations)[0])


def dynamic_tags(path: Path) -> dict[str, list[str]]:
    tags: dict[str, list[str]] = {}
    with open(path, "rb") as f:
        for section in ELFFile(f).iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        tags.setdefault("NEEDED", []).append(tag.needed)
                    elif tag.entry.d_tag == "DT_SONAME":
                        tags.setdefault("SONAME", []).append(tag.soname)
    return tags


def defined_dynamic_symbols(path: Path) -> set[str]:
    with open(path, "rb") as f:
        dynsym = ELFFile(f).get_section_by_name(".dynsym")
        return {s.name for s in dynsym.iter_symbols() if s["st_shndx"] != "SHN_UNDEF"}


def test_installed_version_is_the_pin():
    installed = importlib.metadata.version("executorch")
    assert installed.split("+")[0] == PIN


def test_runtime_library_is_shipped_with_its_soname():
    lib = package_root() / "lib" / "libexecutorch.so"
    assert lib.is_file()
    assert dynamic_tags(lib)["SONAME"] == ["libexecutorch.so"]


def test_backend_registry_lives_in_the_runtime_library():
    symbols = defined_dynamic_symbols(package_root() / "lib" / "libexecutorch.so")
    for prefix in (
        "_ZN10executorch7runtime16register_backend",
        "_ZN10executorch7runtime17get_backend_class",
        "_ZN10executorch7runtime25register_device_allocator",
    ):
        assert any(s.startswith(prefix) for s in symbols), prefix


def test_python_extension_links_the_shared_runtime():
    extensions = glob.glob(str(package_root() / "extension" / "pybindings" / "_C*.so"))
    assert len(extensions) == 1, extensions
    assert "libexecutorch.so" in dynamic_tags(Path(extensions[0]))["NEEDED"]


def test_headers_for_the_backend_interface_are_shipped():
    include = package_root() / "include" / "executorch"
    for header in (
        "runtime/backend/interface.h",
        "runtime/core/evalue.h",
        "runtime/core/device_allocator.h",
        "extension/module/module.h",
        "extension/tensor/tensor.h",
    ):
        assert (include / header).is_file(), header


def test_cmake_package_defines_the_targets_ember_uses():
    config = package_root() / "lib" / "cmake" / "executorch" / "executorch-config.cmake"
    text = config.read_text()
    assert "add_library(executorch::runtime SHARED IMPORTED)" in text
    assert "_executorch_define_component(kernels_optimized" in text
    assert "_executorch_define_component(backend_xnnpack" in text
    assert "C10_USING_CUSTOM_GENERATED_MACROS" in text


def test_wheel_ships_no_cuda_backend():
    # The control for this absence: the XNNPACK delegate library is found by the same glob.
    root = package_root()
    backends = {Path(p).name for p in glob.glob(str(root / "lib" / "libexecutorch_backend_*.so"))}
    assert "libexecutorch_backend_xnnpack.so" in backends
    assert "libexecutorch_backend_cuda.so" not in backends

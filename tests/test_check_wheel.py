"""tools/check_wheel.py: every rule has a control that breaks it and nothing else.

Small shared libraries are built with gcc in a temp dir: one "good" library shaped like
the real backend (imports register_backend, NEEDs a dummy libexecutorch.so, DT_RUNPATH
as in contract 2, everything hidden by a version script), and one variant per rule.
Each is packed into a synthetic wheel. The good wheel must pass; each bad one must fail
with exactly the rule it breaks, so a rule that stops firing, or one that starts firing
where it should not, fails here.

Needs gcc/g++ and pyelftools; skips without them. The last test checks the real wheel
in dist/ if one was built.
"""

from __future__ import annotations

import io
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("elftools", reason="pip install pyelftools")
if not (shutil.which("gcc") and shutil.which("g++")):
    pytest.skip("gcc/g++ not found: the controls are built with them", allow_module_level=True)

GOOD_RUNPATH = "$ORIGIN:$ORIGIN/../../executorch/lib"
NVIDIA_ENTRY = "$ORIGIN/../../nvidia/cu13/lib"
PKG = "ember_executorch_runtime"
LIB = f"{PKG}/lib/libexecutorch_backend_ember.so"
GOOD_TAG = "py3-none-linux_x86_64"

# Same mangled name as the real `executorch::runtime::Error
# executorch::runtime::register_backend(executorch::runtime::Backend const&)`: the return
# type of a non-template function is not part of its mangling.
BACKEND_SOURCE = textwrap.dedent("""
    namespace executorch { namespace runtime {
    struct Backend { const char* name; void* impl; };
    int register_backend(const Backend& backend);
    } }
    namespace {
    const executorch::runtime::Backend kBackend{"EmberBackend", nullptr};
    const int kRegistered = executorch::runtime::register_backend(kBackend);
    }
    """)
DEFINES_REGISTER = textwrap.dedent("""
    namespace executorch { namespace runtime {
    struct Backend;
    int register_backend(const Backend&) { return 0; }
    } }
    """)
PYINIT = 'extern "C" void* PyInit_ember_backend(void) { return nullptr; }\n'
EXTRA_EXPORT = 'extern "C" int ember_extra_entry_point(void) { return 1; }\n'

HIDE_ALL = "{ local: *; };\n"


def _run(cmd: list[str], cwd: Path) -> None:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stderr}"


class Builder:
    """Builds libraries in one temp dir; dummy libexecutorch.so/libcudart.so.13 beside."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.deps = root / "deps"
        self.deps.mkdir()
        (self.deps / "et.cpp").write_text(DEFINES_REGISTER)
        _run(["g++", "-shared", "-fPIC", "-o", "libexecutorch.so",
              "-Wl,-soname,libexecutorch.so", "et.cpp"], self.deps)
        (self.deps / "cudart.c").write_text("int cudaRuntimeGetVersion(int* v){*v=13000;return 0;}\n")
        _run(["gcc", "-shared", "-fPIC", "-o", "libcudart.so.13",
              "-Wl,-soname,libcudart.so.13", "cudart.c"], self.deps)

    def build(self, name: str, *, extra_source: str = "", backend_source: str = BACKEND_SOURCE,
              soname: str = "libexecutorch_backend_ember.so", runpath: str = GOOD_RUNPATH,
              new_dtags: bool = True, link_executorch: bool = True, link_cudart: bool = False,
              version_script: str = HIDE_ALL, extra_ldflags: tuple[str, ...] = ()) -> Path:
        out = self.root / name
        out.mkdir()
        (out / "backend.cpp").write_text(backend_source + extra_source)
        (out / "exports.map").write_text(version_script)
        cmd = ["g++", "-shared", "-fPIC", "-O1", "-o", "libexecutorch_backend_ember.so",
               "backend.cpp", f"-Wl,-soname,{soname}", "-Wl,--version-script=exports.map",
               "-Wl,--enable-new-dtags" if new_dtags else "-Wl,--disable-new-dtags",
               f"-Wl,-rpath,{runpath}", *extra_ldflags, "-Wl,--no-as-needed",
               f"-L{self.deps}"]
        if link_executorch:
            cmd.append("-lexecutorch")
        if link_cudart:
            cmd.append(f"{self.deps}/libcudart.so.13")
        _run(cmd, out)
        return out / "libexecutorch_backend_ember.so"


def _retag(path: Path, old_tag: int, new_tag: int) -> None:
    """Rewrite the d_tag of the one dynamic entry tagged old_tag (Elf64: tag, value)."""
    from elftools.elf.elffile import ELFFile

    data = bytearray(path.read_bytes())
    elf = ELFFile(io.BytesIO(bytes(data)))
    dynamic = elf.get_section_by_name(".dynamic")
    offset, size = dynamic["sh_offset"], dynamic["sh_size"]
    hits = [o for o in range(offset, offset + size, 16)
            if struct.unpack_from("<q", data, o)[0] == old_tag]
    assert len(hits) == 1, hits
    struct.pack_into("<q", data, hits[0], new_tag)
    path.write_bytes(bytes(data))


DT_RPATH, DT_AUDIT = 15, 0x6FFFFEFC
DLOPEN_NAME = ('#include <dlfcn.h>\n'
               'extern "C" void* ember_open_cublaslt() '
               '{ return dlopen("libcublasLt.so.13", RTLD_NOW); }\n')


@pytest.fixture(scope="session")
def libs(tmp_path_factory) -> dict[str, Path]:
    b = Builder(tmp_path_factory.mktemp("elf"))
    libs = {
        "good": b.build("good"),
        "rpath-instead-of-runpath": b.build("rpath", new_dtags=False),
        # A DT_RPATH beside a correct DT_RUNPATH: ld emits only one of the two, so link a
        # DT_AUDIT entry with the same string and retag it as DT_RPATH.
        "rpath-beside-runpath": b.build("rpath2", extra_ldflags=(f"-Wl,--audit,{GOOD_RUNPATH}",)),
        "defined-register-backend": b.build(
            "defreg", extra_source=DEFINES_REGISTER,
            version_script="{ global: _ZN10executorch7runtime16register_backend*; local: *; };\n"),
        "hidden-defined-register-backend": b.build("defreg_hidden", extra_source=DEFINES_REGISTER),
        "no-register-backend": b.build("noreg", backend_source="int ember_unused;\n"),
        "pyinit": b.build("pyinit", extra_source=PYINIT,
                          version_script="{ global: PyInit_*; local: *; };\n"),
        "wrong-soname": b.build("soname", soname="libember.so.1"),
        "no-needed-executorch": b.build("noneeded", link_executorch=False),
        "extra-export": b.build("export", extra_source=EXTRA_EXPORT,
                                version_script="{ global: ember_extra_entry_point; local: *; };\n"),
        "wrong-runpath-order": b.build("order", runpath="$ORIGIN/../../executorch/lib:$ORIGIN"),
        "nvidia-entry-without-cuda": b.build("nvnocuda", runpath=f"{GOOD_RUNPATH}:{NVIDIA_ENTRY}"),
        "needs-cudart-without-entry": b.build("cudanoentry", link_cudart=True),
        "needs-cudart-with-entry": b.build("cudaentry", link_cudart=True,
                                           runpath=f"{GOOD_RUNPATH}:{NVIDIA_ENTRY}"),
        # Names cuBLASLt for dlopen, as the CUDA build does, with and without the entry.
        "dlopens-cublaslt-without-entry": b.build("dlnoentry", extra_source=DLOPEN_NAME),
        "dlopens-cublaslt-with-entry": b.build("dlentry", extra_source=DLOPEN_NAME,
                                               runpath=f"{GOOD_RUNPATH}:{NVIDIA_ENTRY}"),
    }
    _retag(libs["rpath-beside-runpath"], DT_AUDIT, DT_RPATH)
    return libs


GOOD_FILES = {
    f"{PKG}/__init__.py": b"# loads the library\n",
    f"{PKG}/__main__.py": b"# prints versions\n",
    f"{PKG}/_build_info.py": b'EXECUTORCH_VERSION = "1.5.1"\n',
    f"{PKG}/lib/cmake/ember_executorch/ember_executorch-config.cmake": b"# config\n",
    f"{PKG}/lib/cmake/ember_executorch/ember_executorch-config-version.cmake": b"# version\n",
}


def make_wheel(directory: Path, files: dict[str, bytes], tag: str = GOOD_TAG,
               wheel_tags: list[str] | None = None) -> Path:
    """A minimal wheel: the files plus a dist-info with METADATA, WHEEL and RECORD."""
    dist_info = "ember_executorch_runtime-0.1.0.dist-info"
    path = directory / f"ember_executorch_runtime-0.1.0-{tag}.whl"
    if wheel_tags is None:  # WHEEL lists the compressed tag set expanded, one per line
        py, abi, plat = tag.split("-")
        wheel_tags = [f"{p}-{a}-{q}" for p in py.split(".") for a in abi.split(".")
                      for q in plat.split(".")]
    tags = "".join(f"Tag: {t}\n" for t in wheel_tags)
    meta = {
        f"{dist_info}/METADATA": b"Metadata-Version: 2.1\nName: ember-executorch-runtime\nVersion: 0.1.0\n",
        f"{dist_info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n{tags}".encode(),
    }
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in {**files, **meta}.items():
            zf.writestr(name, data)
        zf.writestr(f"{dist_info}/RECORD", "".join(f"{n},,\n" for n in [*files, *meta])
                    + f"{dist_info}/RECORD,,\n")
    return path


@pytest.fixture
def wheel(tmp_path, libs):
    """wheel(lib="good", add={}, remove=(), tag=...) -> path of a synthetic wheel."""
    def build(lib: str = "good", add: dict[str, bytes] | None = None, remove=(), **kw) -> Path:
        files = {**GOOD_FILES, LIB: libs[lib].read_bytes(), **(add or {})}
        for name in remove:
            del files[name]
        return make_wheel(tmp_path, files, **kw)
    return build


@pytest.fixture(scope="session")
def cw(load_tool):
    return load_tool("check_wheel")


def rules(violations) -> set[str]:
    return {v.rule for v in violations}


def test_good_library_passes(cw, libs):
    assert cw.check_library(libs["good"]) == []


def test_good_wheel_passes(cw, wheel):
    assert cw.check_wheel(wheel()) == []


def test_every_rule_has_a_control(cw):
    covered = set().union(*(r for _, r in LIBRARY_CONTROLS), *(r for *_, r in WHEEL_CONTROLS))
    assert covered == set(cw.RULES)


# (library variant, rules its wheel must violate: exactly these)
LIBRARY_CONTROLS = [
    ("rpath-beside-runpath", {"no-rpath"}),
    # With RPATH instead of RUNPATH the library breaks two rules: it has a DT_RPATH, and
    # it lacks the DT_RUNPATH; both are reported.
    ("rpath-instead-of-runpath", {"no-rpath", "runpath"}),
    ("wrong-runpath-order", {"runpath"}),
    ("nvidia-entry-without-cuda", {"runpath"}),
    ("needs-cudart-without-entry", {"runpath"}),
    ("defined-register-backend", {"register-backend-imported"}),
    ("hidden-defined-register-backend", {"register-backend-imported"}),
    ("no-register-backend", {"register-backend-imported"}),
    ("pyinit", {"no-pyinit"}),
    ("wrong-soname", {"soname"}),
    ("no-needed-executorch", {"needs-executorch"}),
    ("extra-export", {"exports"}),
]


@pytest.mark.parametrize("variant,expected", LIBRARY_CONTROLS, ids=[v for v, _ in LIBRARY_CONTROLS])
def test_library_control_fails_with_its_rule(cw, wheel, variant, expected):
    violations = cw.check_wheel(wheel(variant))
    assert rules(violations) == expected, [str(v) for v in violations]


# (id, wheel(...) arguments, rules violated)
WHEEL_CONTROLS = [
    ("second-so", dict(add={f"{PKG}/lib/libember_helper.so": b"\x7fELF" + b"\0" * 60}),
     {"one-native-file"}),
    ("elf-without-so-suffix", dict(add={f"{PKG}/lib/helper": b"\x7fELF" + b"\0" * 60}),
     {"one-native-file"}),
    ("library-missing", dict(remove=[LIB]), {"one-native-file"}),
    ("library-not-elf", dict(add={LIB: b"not an ELF file"}), {"one-native-file"}),
    ("bundled-libexecutorch", dict(add={f"{PKG}/lib/libexecutorch.so": b"\x7fELF" + b"\0" * 60}),
     {"no-bundled-runtime"}),
    ("bundled-portable-lib", dict(add={f"{PKG}/_portable_lib.cpython-311-x86_64-linux-gnu.so": b"\x7fELF"}),
     {"no-bundled-runtime"}),
    ("bundled-pybindings", dict(add={f"{PKG}/_C.cpython-311-x86_64-linux-gnu.so": b"\x7fELF"}),
     {"no-bundled-runtime"}),
    ("bundled-cudart", dict(add={f"{PKG}/lib/libcudart.so.13": b"\x7fELF"}), {"no-bundled-runtime"}),
    ("bundled-cublaslt", dict(add={f"{PKG}/lib/libcublasLt.so.13": b"\x7fELF"}), {"no-bundled-runtime"}),
    ("bundled-nvrtc", dict(add={f"{PKG}/lib/libnvrtc.so.13": b"\x7fELF"}), {"no-bundled-runtime"}),
    ("extra-python-file", dict(add={f"{PKG}/runtime.py": b"class Program: ...\n"}), {"layout"}),
    ("data-dir", dict(add={"ember_executorch_runtime-0.1.0.data/data/x.txt": b"x"}), {"layout"}),
    ("main-missing", dict(remove=[f"{PKG}/__main__.py"]), {"layout"}),
    ("cmake-config-missing",
     dict(remove=[f"{PKG}/lib/cmake/ember_executorch/ember_executorch-config.cmake"]), {"layout"}),
    ("cpython-tag", dict(tag="cp311-cp311-linux_x86_64"), {"wheel-tag"}),
    ("abi3-tag", dict(tag="cp311-abi3-manylinux_2_28_x86_64"), {"wheel-tag"}),
    ("aarch64-tag", dict(tag="py3-none-linux_aarch64"), {"wheel-tag"}),
    ("name-and-WHEEL-disagree", dict(wheel_tags=["cp311-cp311-linux_x86_64"]), {"wheel-tag"}),
]


@pytest.mark.parametrize("args,expected", [(a, r) for _, a, r in WHEEL_CONTROLS],
                         ids=[i for i, _, _ in WHEEL_CONTROLS])
def test_wheel_control_fails_with_its_rule(cw, wheel, args, expected):
    violations = cw.check_wheel(wheel(**args))
    assert rules(violations) == expected, [str(v) for v in violations]


@pytest.mark.parametrize("tag", ["py3-none-linux_x86_64", "py3-none-manylinux_2_28_x86_64",
                                 "py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64"])
def test_allowed_tags_pass(cw, wheel, tag):
    assert cw.check_wheel(wheel(tag=tag)) == []


def test_extra_dist_info_files_allowed(cw, wheel):
    path = wheel(add={"ember_executorch_runtime-0.1.0.dist-info/licenses/LICENSE": b"MIT\n"})
    assert cw.check_wheel(path) == []


def test_cuda_flag_requires_nvidia_entry(cw, wheel):
    # A CUDA build that dlopens its libraries NEEDs none of them, so --cuda asks for the
    # entry; without the entry it fails, with it it passes.
    assert rules(cw.check_wheel(wheel("good"), cuda=True)) == {"runpath"}
    assert cw.check_wheel(wheel("nvidia-entry-without-cuda"), cuda=True) == []


def test_needed_cuda_library_requires_nvidia_entry(cw, libs):
    assert cw.check_library(libs["needs-cudart-with-entry"]) == []
    assert rules(cw.check_library(libs["needs-cudart-without-entry"])) == {"runpath"}


def test_dlopened_cuda_library_requires_nvidia_entry(cw, libs):
    assert cw.check_library(libs["dlopens-cublaslt-with-entry"]) == []
    violations = cw.check_library(libs["dlopens-cublaslt-without-entry"])
    assert rules(violations) == {"runpath"}
    assert "libcublasLt.so.13" in str(violations[0])


def test_explicit_expected_runpath(cw, libs):
    assert cw.check_library(libs["wrong-runpath-order"],
                            ["$ORIGIN/../../executorch/lib", "$ORIGIN"]) == []
    assert rules(cw.check_library(libs["good"], ["$ORIGIN"])) == {"runpath"}


def test_export_allowlist_parameter(cw, libs):
    assert cw.check_library(libs["extra-export"], export_allowlist={"ember_extra_entry_point"}) == []


def test_messages_name_the_rule(cw, wheel):
    for v in cw.check_wheel(wheel("pyinit")):
        assert str(v).startswith("[no-pyinit] ") and "PyInit_ember_backend" in str(v)


def _cli(*args: str) -> subprocess.CompletedProcess:
    tool = Path(__file__).resolve().parent.parent / "tools" / "check_wheel.py"
    return subprocess.run([sys.executable, str(tool), *args], capture_output=True, text=True)


def test_cli_exit_codes_and_output(wheel, tmp_path):
    good = _cli(str(wheel()))
    assert good.returncode == 0, good.stdout + good.stderr
    # Two rules broken at once: both are listed, and the exit status is non-zero.
    bad_wheel = wheel("pyinit", add={f"{PKG}/runtime.py": b"x"})
    bad = _cli(str(bad_wheel))
    assert bad.returncode == 1
    assert "[no-pyinit]" in bad.stdout and "[layout]" in bad.stdout
    assert "no-pyinit" in bad.stderr and "layout" in bad.stderr
    missing = _cli(str(tmp_path / "nope.whl"))
    assert missing.returncode == 2


def test_cli_cuda_flag(wheel):
    path = wheel("nvidia-entry-without-cuda")
    assert _cli(str(path)).returncode == 1
    assert _cli(str(path), "--cuda").returncode == 0


def test_real_wheel(cw, built_wheel):
    """The wheel in dist/ passes every rule. EMBER_WHEEL_CUDA=1 checks it as a CUDA build."""
    cuda = os.environ.get("EMBER_WHEEL_CUDA", "").lower() in ("1", "true", "yes", "on")
    violations = cw.check_wheel(built_wheel, cuda=cuda)
    assert violations == [], "\n".join(map(str, violations))

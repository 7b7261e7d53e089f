#!/usr/bin/env python3
"""Check the ember_executorch_runtime wheel against contracts 1 and 2 of DESIGN.md.

    python tools/check_wheel.py dist/ember_executorch_runtime-*.whl [--cuda]

Every rule has a stable name; a failure prints one line per finding, `[rule] message`,
and the tool exits 1 listing every violated rule (it does not stop at the first). Exit 0
means every rule passed; exit 2 means the input could not be read at all.

ELF is read with pyelftools, never by parsing readelf's output. The checks are also a
library, used by tests/test_check_wheel.py on synthetic wheels:

    check_wheel(path, cuda=False) -> list[Violation]
    check_library(path, expected_runpath=None, cuda=False) -> list[Violation]

Each finding is reported once, by the most specific rule: a bundled libexecutorch.so is
`no-bundled-runtime`, not also `one-native-file` and `layout`; an exported PyInit_ or
register_backend is `no-pyinit` / `register-backend-imported`, not also `exports`. That
way a control that breaks one rule fails with that rule's name alone.

The nvidia RUNPATH entry: if the library NEEDs a library from NVIDIA's pip wheels, or
names one in its data for dlopen (Ember's CUDA build dlopens libcublasLt.so.13, STYLE.md
and contract 8; dlopen searches the calling library's RUNPATH), the entry is required.
`--cuda` requires it too. Otherwise it is forbidden: a CPU build that searches the
nvidia folder could pick up whatever is there.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import io
import os
import posixpath
import re
import sys
import zipfile
from typing import BinaryIO, Iterable, Sequence

PACKAGE = "ember_executorch_runtime"
LIBRARY_NAME = "libexecutorch_backend_ember.so"
LIBRARY_PATH = f"{PACKAGE}/lib/{LIBRARY_NAME}"

# Files the wheel must hold besides the library and *.dist-info/*; nothing else may appear.
REQUIRED_FILES = (
    f"{PACKAGE}/__init__.py",
    f"{PACKAGE}/__main__.py",
    f"{PACKAGE}/_build_info.py",
    f"{PACKAGE}/lib/cmake/ember_executorch/ember_executorch-config.cmake",
    f"{PACKAGE}/lib/cmake/ember_executorch/ember_executorch-config-version.cmake",
)

RUNPATH_BASE = ("$ORIGIN", "$ORIGIN/../../executorch/lib")
RUNPATH_NVIDIA = "$ORIGIN/../../nvidia/cu13/lib"

REGISTER_BACKEND_PREFIX = "_ZN10executorch7runtime16register_backend"
EXECUTORCH_RUNTIME_SONAME = "libexecutorch.so"

# Exported (defined global/weak) dynamic symbols the library may have. Empty on purpose:
# the backend registers itself from a static initializer and has no public API.
EXPORT_ALLOWLIST: frozenset[str] = frozenset()
# Defined by the linker in every shared object; not part of our interface.
LINKER_SYMBOLS = frozenset({"_init", "_fini", "_edata", "_end", "__bss_start"})

# Basenames that are a copy of someone else's runtime (contract 1). Matched
# case-sensitively against every file name in the wheel except our own library.
BUNDLED_RUNTIME_PATTERNS = (
    "libexecutorch*",  # ExecuTorch's runtime and its backends
    "_C*.so", "_C.*", "_portable_lib*", "data_loader*.so",  # ExecuTorch's Python extension
    "libcuda*", "libcudart*", "libcublas*", "libnv*", "libcudnn*", "libcufft*",
    "libcurand*", "libcusolver*", "libcusparse*", "libcupti*", "libnccl*",
)
# NEEDED names that live in NVIDIA's pip wheels (site-packages/nvidia/cu13/lib). The
# driver, libcuda.so.1, is not among them: it comes with the system's driver.
NVIDIA_PIP_LIBRARY_PATTERNS = (
    "libcudart.so*", "libcublas.so*", "libcublasLt.so*", "libnvrtc*", "libnvJitLink*",
    "libcudnn*", "libcufft*", "libcurand*", "libcusolver*", "libcusparse*",
    "libcupti*", "libnccl*", "libnvToolsExt*",
)

_SHARED_SUFFIX = re.compile(r"\.so(\.\d+)*$")
_ALLOWED_TAG = re.compile(
    r"^py3-none-(linux_x86_64|manylinux1_x86_64|manylinux2010_x86_64|"
    r"manylinux2014_x86_64|manylinux_\d+_\d+_x86_64)$"
)

RULES = {
    "one-native-file": f"exactly one native file, at {LIBRARY_PATH}, an x86-64 ELF shared object",
    "layout": "besides the library only __init__.py, __main__.py, _build_info.py, "
    "the CMake package and *.dist-info/*, all present",
    "no-bundled-runtime": "no copy of libexecutorch*, ExecuTorch's Python extension, or a CUDA library",
    "soname": "DT_SONAME equals the library's file name",
    "runpath": "DT_RUNPATH is exactly " + ":".join(RUNPATH_BASE)
    + f" (+ {RUNPATH_NVIDIA} iff a CUDA library is NEEDED or --cuda)",
    "no-rpath": "no DT_RPATH",
    "no-pyinit": "no PyInit_* symbol: the library is not a Python extension",
    "register-backend-imported": "executorch::runtime::register_backend is an undefined "
    "(imported) dynamic symbol and is defined nowhere in the library",
    "needs-executorch": f"DT_NEEDED contains {EXECUTORCH_RUNTIME_SONAME}",
    "exports": "no exported global/weak dynamic symbol outside the allowlist",
    "wheel-tag": "wheel tag is py3-none-linux_x86_64 or py3-none-manylinux*_x86_64",
}


@dataclasses.dataclass(frozen=True)
class Violation:
    rule: str
    message: str

    def __post_init__(self) -> None:
        assert self.rule in RULES, self.rule

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _looks_native(name: str, head: bytes) -> bool:
    return head.startswith(b"\x7fELF") or _SHARED_SUFFIX.search(name) is not None


# Names of NVIDIA pip libraries that a CUDA build dlopens (found as strings in its
# read-only data): dlopen searches the calling library's RUNPATH, so their presence
# requires the nvidia entry just as a DT_NEEDED entry would.
DLOPENED_NVIDIA_LIBRARY = re.compile(rb"lib(?:cublasLt|cublas|cudart|cudnn)\.so\.\d+")


def dlopened_nvidia_libraries(image: bytes) -> list[str]:
    return sorted({m.group().decode() for m in DLOPENED_NVIDIA_LIBRARY.finditer(image)})


def derive_runpath(needed: Sequence[str], cuda: bool = False) -> list[str]:
    """The RUNPATH entries a library with these DT_NEEDED names must carry, in order."""
    entries = list(RUNPATH_BASE)
    if cuda or any(_matches(n, NVIDIA_PIP_LIBRARY_PATTERNS) for n in needed):
        entries.append(RUNPATH_NVIDIA)
    return entries


def check_library(
    library: str | os.PathLike | BinaryIO,
    expected_runpath: Sequence[str] | None = None,
    *,
    cuda: bool = False,
    file_name: str | None = None,
    export_allowlist: Iterable[str] = EXPORT_ALLOWLIST,
) -> list[Violation]:
    """Check one shared library (a path or a binary stream) against contract 2.

    expected_runpath: the exact DT_RUNPATH entries; by default derived from DT_NEEDED
    (and `cuda`) by derive_runpath(). file_name: what SONAME must equal; by default the
    basename of the path.
    """
    # Imported here so `--help` and the wheel-level rules work without pyelftools.
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection
    from elftools.elf.gnuversions import GNUVerDefSection

    if isinstance(library, (str, os.PathLike)):
        file_name = file_name or os.path.basename(os.fspath(library))
        with open(library, "rb") as f:
            stream: BinaryIO = io.BytesIO(f.read())
    else:
        stream = library
    file_name = file_name or LIBRARY_NAME
    out: list[Violation] = []
    position = stream.tell()
    dlopened = dlopened_nvidia_libraries(stream.read())
    stream.seek(position)
    cuda = cuda or bool(dlopened)

    try:
        elf = ELFFile(stream)
        if elf.header["e_type"] != "ET_DYN" or elf.header["e_machine"] != "EM_X86_64":
            return [Violation("one-native-file", f"{file_name} is {elf.header['e_type']} "
                              f"for {elf.header['e_machine']}, not an x86-64 shared object")]
        dynamic = next((s for s in elf.iter_sections() if isinstance(s, DynamicSection)), None)
        dynsym = elf.get_section_by_name(".dynsym")
        symtab = elf.get_section_by_name(".symtab")
        if dynamic is None or not isinstance(dynsym, SymbolTableSection):
            return [Violation("one-native-file", f"{file_name} has no dynamic section or .dynsym")]

        needed, sonames, runpaths, rpaths = [], [], [], []
        for tag in dynamic.iter_tags():
            if tag.entry.d_tag == "DT_NEEDED":
                needed.append(tag.needed)
            elif tag.entry.d_tag == "DT_SONAME":
                sonames.append(tag.soname)
            elif tag.entry.d_tag == "DT_RUNPATH":
                runpaths.append(tag.runpath)
            elif tag.entry.d_tag == "DT_RPATH":
                rpaths.append(tag.rpath)

        version_names = set()
        for section in elf.iter_sections():
            if isinstance(section, GNUVerDefSection):
                for verdef, auxiliaries in section.iter_versions():
                    version_names.update(aux.name for aux in auxiliaries)

        def symbols(section):
            for sym in section.iter_symbols():
                if sym.name:
                    yield sym

        dyn_symbols = list(symbols(dynsym))
        all_symbols = dyn_symbols + (list(symbols(symtab))
                                     if isinstance(symtab, SymbolTableSection) else [])
    except (ELFError, ValueError, KeyError, OSError, AssertionError) as e:
        # A truncated or garbled file; pyelftools raises a few kinds.
        return [Violation("one-native-file", f"{file_name} is not a readable ELF file: {e}")]

    def is_defined(sym) -> bool:
        return sym["st_shndx"] != "SHN_UNDEF"

    def is_exported(sym) -> bool:
        return (is_defined(sym)
                and sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK", "STB_GNU_UNIQUE")
                and sym["st_other"]["visibility"] in ("STV_DEFAULT", "STV_PROTECTED"))

    # soname
    if sonames != [file_name]:
        found = ", ".join(sonames) if sonames else "none"
        out.append(Violation("soname", f"SONAME is {found}, expected {file_name}"))

    # runpath
    want = (list(expected_runpath) if expected_runpath is not None
            else derive_runpath(needed, cuda=cuda))
    if len(runpaths) != 1:
        out.append(Violation("runpath", f"expected one DT_RUNPATH {':'.join(want)!r}, "
                             f"found {len(runpaths)}" + (f": {runpaths}" if runpaths else "")))
    elif runpaths[0].split(":") != want:
        got = runpaths[0].split(":")
        detail = []
        if RUNPATH_NVIDIA in got and RUNPATH_NVIDIA not in want:
            detail.append(f"{RUNPATH_NVIDIA} is forbidden: no NVIDIA pip library is NEEDED "
                          "(pass --cuda for a build that dlopens them)")
        if RUNPATH_NVIDIA in want and RUNPATH_NVIDIA not in got:
            detail.append(f"{RUNPATH_NVIDIA} is required: NEEDED "
                          f"{[n for n in needed if _matches(n, NVIDIA_PIP_LIBRARY_PATTERNS)]}"
                          f", dlopened {dlopened}" + (" / --cuda" if cuda else ""))
        out.append(Violation("runpath", f"DT_RUNPATH is {runpaths[0]!r}, expected "
                             f"{':'.join(want)!r}" + ("; " + "; ".join(detail) if detail else "")))

    # no-rpath
    if rpaths:
        out.append(Violation("no-rpath", f"DT_RPATH present: {rpaths}; use DT_RUNPATH "
                             "(-Wl,--enable-new-dtags)"))

    # no-pyinit
    pyinit = sorted({s.name for s in all_symbols if s.name.startswith("PyInit_")})
    if pyinit:
        out.append(Violation("no-pyinit", f"Python extension entry point(s): {pyinit}"))

    # register-backend-imported
    reg = [s for s in all_symbols if s.name.startswith(REGISTER_BACKEND_PREFIX)]
    reg_defined = sorted({s.name for s in reg if is_defined(s)})
    reg_imported = [s for s in dyn_symbols
                    if s.name.startswith(REGISTER_BACKEND_PREFIX) and not is_defined(s)]
    if reg_defined:
        out.append(Violation("register-backend-imported", f"register_backend is defined in "
                             f"the library ({reg_defined}); it must come from "
                             f"{EXECUTORCH_RUNTIME_SONAME}, or the backend lands in a "
                             "registry nobody reads"))
    elif not reg_imported:
        out.append(Violation("register-backend-imported", "no undefined "
                             f"{REGISTER_BACKEND_PREFIX}* in .dynsym: the library does not "
                             "register through ExecuTorch's registry"))

    # needs-executorch
    if EXECUTORCH_RUNTIME_SONAME not in needed:
        out.append(Violation("needs-executorch", f"DT_NEEDED {needed} lacks "
                             f"{EXECUTORCH_RUNTIME_SONAME}"))

    # exports (PyInit_ and register_backend are left to their own rules)
    allowed = set(export_allowlist) | LINKER_SYMBOLS | version_names
    extra = sorted({s.name for s in dyn_symbols if is_exported(s)
                    and s.name not in allowed
                    and not s.name.startswith(("PyInit_", REGISTER_BACKEND_PREFIX))})
    if extra:
        shown = ", ".join(extra[:20]) + (f", ... ({len(extra)} in all)" if len(extra) > 20 else "")
        out.append(Violation("exports", f"exported symbols outside the allowlist: {shown}"))
    return out


def _wheel_tags(filename: str, wheel_metadata: str | None) -> tuple[list[str], list[str]]:
    tags_from_name: list[str] = []
    stem = filename[:-4] if filename.endswith(".whl") else filename
    parts = stem.split("-")
    if len(parts) in (5, 6):
        py, abi, plat = parts[-3:]
        tags_from_name = [f"{p}-{a}-{q}" for p in py.split(".")
                          for a in abi.split(".") for q in plat.split(".")]
    tags_from_metadata = []
    for line in (wheel_metadata or "").splitlines():
        if line.startswith("Tag:"):
            tags_from_metadata.append(line.split(":", 1)[1].strip())
    return tags_from_name, tags_from_metadata


def check_wheel(path: str | os.PathLike, cuda: bool = False) -> list[Violation]:
    """Check a runtime wheel against contracts 1 and 2; [] means it passes every rule."""
    path = os.fspath(path)
    out: list[Violation] = []
    with zipfile.ZipFile(path) as zf:
        names = [i.filename for i in zf.infolist() if not i.is_dir()]
        heads = {}
        for name in names:
            with zf.open(name) as f:
                heads[name] = f.read(4)

        dist_info = {n.split("/", 1)[0] for n in names
                     if n.split("/", 1)[0].endswith(".dist-info") and "/" in n}

        library_present = False
        for name in names:
            base = posixpath.basename(name)
            native = _looks_native(name, heads[name])
            if name == LIBRARY_PATH:
                library_present = True
                if not heads[name].startswith(b"\x7fELF"):
                    out.append(Violation("one-native-file", f"{name} is not an ELF file"))
            elif _matches(base, BUNDLED_RUNTIME_PATTERNS):
                out.append(Violation("no-bundled-runtime", f"{name} is a copy of another "
                                     "package's runtime; depend on it instead"))
            elif native:
                out.append(Violation("one-native-file", f"extra native file {name}; the "
                                     f"only one allowed is {LIBRARY_PATH}"))
            elif name not in REQUIRED_FILES and name.split("/", 1)[0] not in dist_info:
                out.append(Violation("layout", f"unexpected file {name}"))
        if not library_present:
            out.append(Violation("one-native-file", f"{LIBRARY_PATH} is missing"))
        for required in REQUIRED_FILES:
            if required not in names:
                out.append(Violation("layout", f"{required} is missing"))
        if len(dist_info) != 1:
            out.append(Violation("layout", f"expected one *.dist-info folder, found "
                                 f"{sorted(dist_info) or 'none'}"))

        wheel_file = None
        if len(dist_info) == 1 and f"{next(iter(dist_info))}/WHEEL" in names:
            wheel_file = zf.read(f"{next(iter(dist_info))}/WHEEL").decode("utf-8", "replace")
        from_name, from_metadata = _wheel_tags(os.path.basename(path), wheel_file)
        if not from_name:
            out.append(Violation("wheel-tag", f"cannot read a tag from the file name "
                                 f"{os.path.basename(path)!r}"))
        if wheel_file is None:
            out.append(Violation("wheel-tag", "no WHEEL metadata file in the dist-info"))
        elif not from_metadata:
            out.append(Violation("wheel-tag", "WHEEL metadata has no Tag: line"))
        bad = sorted({t for t in from_name + from_metadata if not _ALLOWED_TAG.match(t)})
        if bad:
            out.append(Violation("wheel-tag", f"tag(s) {bad} not allowed; the payload has no "
                                 "CPython ABI, so py3-none-linux_x86_64 or "
                                 "py3-none-manylinux*_x86_64"))
        elif from_name and from_metadata and set(from_name) != set(from_metadata):
            out.append(Violation("wheel-tag", f"file name tags {from_name} differ from "
                                 f"WHEEL tags {from_metadata}"))

        if library_present and heads[LIBRARY_PATH].startswith(b"\x7fELF"):
            out.extend(check_library(io.BytesIO(zf.read(LIBRARY_PATH)),
                                     cuda=cuda, file_name=LIBRARY_NAME))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", nargs="?", help="the ember_executorch_runtime wheel")
    parser.add_argument("--cuda", action="store_true",
                        help=f"CUDA build: require {RUNPATH_NVIDIA} in DT_RUNPATH")
    parser.add_argument("--list-rules", action="store_true", help="print the rules and exit")
    args = parser.parse_args(argv)
    if args.list_rules:
        for rule, text in RULES.items():
            print(f"{rule:27} {text}")
        return 0
    if not args.wheel:
        parser.error("WHEEL is required")
    try:
        violations = check_wheel(args.wheel, cuda=args.cuda)
    except (OSError, zipfile.BadZipFile) as e:
        print(f"check_wheel: cannot read {args.wheel}: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"check_wheel: {e}; pip install pyelftools", file=sys.stderr)
        return 2
    if not violations:
        print(f"OK {args.wheel}: {len(RULES)} rules pass")
        return 0
    for v in violations:
        print(v)
    rules = sorted({v.rule for v in violations}, key=list(RULES).index)
    print(f"FAIL {args.wheel}: {len(violations)} finding(s), rule(s) violated: "
          f"{', '.join(rules)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

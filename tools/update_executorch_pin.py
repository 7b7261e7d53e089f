#!/usr/bin/env python3
"""Move the executorch pin, or check that every place agrees with it.

    python tools/update_executorch_pin.py 1.6.0          # rewrite the pin everywhere
    python tools/update_executorch_pin.py --check        # drift check; exit 1 on drift
    ... [--root DIR]                                      # operate on another checkout

The version is written once, in EXECUTORCH_VERSION. The places that must repeat it
(because their format cannot read a file) are listed in PIN_PLACES, the one table of
them: a path relative to the root and a regex whose group `version` is the pinned
version. Every match in the file is a pin; a place with no match is drift too. Other
places derive the version from EXECUTORCH_VERSION (the runtime's _build_info at build
time, Makefile, CI) and are not listed.

--check also scans the rest of the tree for a literal pip requirement on executorch
with `==` (what a copy-pasted pin looks like) outside PIN_PLACES, and reports it: either
derive it from EXECUTORCH_VERSION or add it to the table.

Updating validates the version first (a PEP 440 release X.Y.Z, optionally with one
pre-release aN/bN/rcN, .postN, .devN, in canonical form; anything else exits 2 and
writes nothing), then computes every file in memory, and writes only if every place
matched. Running it twice changes nothing the second time.

Exit status: 0 ok, 1 drift (or a place that does not match when updating), 2 bad usage
or a malformed version.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

VERSION_FILE = "EXECUTORCH_VERSION"

_NUM = r"(?:0|[1-9]\d*)"
VERSION_RE = re.compile(
    rf"{_NUM}\.{_NUM}\.{_NUM}(?:(?:a|b|rc){_NUM})?(?:\.post{_NUM})?(?:\.dev{_NUM})?"
)
# What may stand where a version goes when reading a place (so a wrong value is found
# and reported rather than not matched at all).
_ANY_VERSION = r"[0-9A-Za-z][0-9A-Za-z.+!_-]*"
# The requirement name alone: not the tail of another name (ember-executorch==0.1.0).
_EXECUTORCH_REQ = r"(?<![\w.-])executorch\s*==\s*"

# The places that repeat the pin: (path relative to the root, regex with group `version`).
PIN_PLACES: tuple[tuple[str, str], ...] = (
    # The runtime wheel's dependency: its library links this executorch's libexecutorch.so.
    ("pyproject.toml", rf"{_EXECUTORCH_REQ}(?P<version>{_ANY_VERSION})"),
    # The ahead-of-time package writes .pte files for this executorch.
    ("python/pyproject.toml", rf"{_EXECUTORCH_REQ}(?P<version>{_ANY_VERSION})"),
    # What the pinned wheel ships; only its first heading line names the version.
    ("docs/executorch-wheel.md",
     rf"\A(?:(?!#)[^\n]*\n)*#[^\n]*?\b[Ee]xecu[Tt]orch (?P<version>\d[0-9A-Za-z.+!_-]*)"),
)

# --check's scan for unlisted literal pins: file kinds that hold requirements or prose.
_SCAN_SUFFIXES = {".toml", ".txt", ".md", ".rst", ".cfg", ".in", ".yml", ".yaml", ".json",
                  ".sh", ".py", ".cmake", ".mk"}
_SCAN_NAMES = {"Makefile", "CMakeLists.txt", "Dockerfile"}
_SKIP_DIRS = {".git", "build", "dist", "_skbuild", ".venv", "venv", "node_modules",
              "__pycache__", ".whl", ".device", "out", ".pytest_cache"}
_LITERAL_PIN = re.compile(_EXECUTORCH_REQ + r"\d[0-9A-Za-z.+!_-]*")


def validate(version: str) -> str | None:
    """None if `version` is an acceptable pin, else why not."""
    if VERSION_RE.fullmatch(version):
        return None
    return (f"{version!r} is not a release version: expected X.Y.Z, optionally followed "
            "by aN, bN or rcN, .postN, .devN (canonical PEP 440, e.g. 1.5.1, 1.6.0rc2, "
            "1.5.1.post1)")


def _compile(pattern: str) -> re.Pattern:
    return re.compile(pattern, re.MULTILINE)


def read_pin(root: Path) -> str:
    return (root / VERSION_FILE).read_text().strip()


def check(root: Path) -> list[str]:
    """Every disagreement with EXECUTORCH_VERSION, as 'path: what was found'."""
    problems: list[str] = []
    version_path = root / VERSION_FILE
    if not version_path.is_file():
        return [f"{VERSION_FILE}: missing"]
    raw = version_path.read_text()
    pin = raw.strip()
    if validate(pin):
        problems.append(f"{VERSION_FILE}: {validate(pin)}")
    elif raw != pin + "\n":
        problems.append(f"{VERSION_FILE}: expected exactly {pin!r} and a newline, found {raw!r}")

    covered: dict[str, list[tuple[int, int]]] = {}  # spans PIN_PLACES already check
    for rel, pattern in PIN_PLACES:
        path = root / rel
        if not path.is_file():
            problems.append(f"{rel}: missing (listed in PIN_PLACES)")
            continue
        text = path.read_text()
        matches = list(_compile(pattern).finditer(text))
        covered.setdefault(rel, []).extend(m.span() for m in matches)
        if not matches:
            problems.append(f"{rel}: no pin found (pattern {pattern!r})")
        for m in matches:
            if m.group("version") != pin:
                line = text.count("\n", 0, m.start("version")) + 1
                problems.append(f"{rel}:{line}: found {m.group('version')!r} in "
                                f"{m.group(0).splitlines()[-1].strip()!r}, expected {pin!r}")

    this_file = Path(__file__).resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.resolve() == this_file:
                continue
            if path.suffix not in _SCAN_SUFFIXES and name not in _SCAN_NAMES:
                continue
            try:
                if path.stat().st_size > 1 << 20:
                    continue
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            spans = covered.get(rel, [])
            for m in _LITERAL_PIN.finditer(text):
                if any(a <= m.start() < b for a, b in spans):
                    continue
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{line}: literal pin {m.group(0)!r} not covered by "
                                f"PIN_PLACES; derive it from {VERSION_FILE} or add a pattern "
                                "for it to PIN_PLACES")
    return problems


def update(root: Path, version: str) -> list[str]:
    """Rewrite the pin to `version`; returns the files changed. Raises ValueError before
    writing anything if the version is malformed or a place has no pin to rewrite."""
    why = validate(version)
    if why:
        raise ValueError(why)
    new_contents: dict[Path, str] = {root / VERSION_FILE: version + "\n"}
    missing = []
    for rel, pattern in PIN_PLACES:
        path = root / rel
        if not path.is_file():
            missing.append(f"{rel}: missing")
            continue
        text = new_contents.get(path, path.read_text())
        regex = _compile(pattern)
        if not regex.search(text):
            missing.append(f"{rel}: no pin found")
            continue

        def put(m: re.Match) -> str:
            start, end = m.span("version")
            return m.group(0)[: start - m.start()] + version + m.group(0)[end - m.start():]

        new_contents[path] = regex.sub(put, text)
    if missing:
        raise LookupError("; ".join(missing))
    changed = []
    for path, text in new_contents.items():
        if path.is_file() and path.read_text() == text:
            continue
        tmp = path.with_name(path.name + ".pin-tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
        changed.append(path.relative_to(root).as_posix())
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", nargs="?", help="the new executorch version, e.g. 1.6.0")
    parser.add_argument("--check", action="store_true",
                        help="report drift from EXECUTORCH_VERSION; change nothing")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    root = args.root.resolve()

    if args.check:
        if args.version is not None:
            parser.error("--check takes no VERSION: it checks against EXECUTORCH_VERSION")
        problems = check(root)
        if problems:
            for p in problems:
                print(f"drift: {p}")
            print(f"executorch pin: {len(problems)} problem(s) under {root}", file=sys.stderr)
            return 1
        print(f"executorch pin {read_pin(root)}: {VERSION_FILE} and "
              f"{len(PIN_PLACES)} places agree")
        return 0

    if args.version is None:
        parser.error("give VERSION, or --check")
    try:
        changed = update(root, args.version)
    except ValueError as e:
        print(f"update_executorch_pin: refused: {e}; nothing written", file=sys.stderr)
        return 2
    except LookupError as e:
        print(f"update_executorch_pin: {e}; nothing written", file=sys.stderr)
        return 1
    for rel in changed:
        print(f"updated {rel}")
    print(f"executorch pin is {args.version}" + ("" if changed else " (no change)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

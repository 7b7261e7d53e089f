"""Contract 3 (and 5): the installed ember_executorch_runtime package, in fresh processes.

Every test runs Python in a subprocess (sys.executable), since what is under test is
what happens at import time and in the process's address space. The subprocess gets
this process's environment minus EMBER_SKIP_DELEGATE_REGISTRATION, and runs in a temp
directory so a source checkout on the cwd cannot shadow the installed package.

How the failure cases are staged (each has a control that passes with the same staging,
so a failure is due to the one thing changed):

- A broken library: the installed package is copied into a temp "site" directory, next
  to a symlink `executorch` -> the installed executorch package, so the library's
  RUNPATH ($ORIGIN/../../executorch/lib) resolves exactly as in site-packages. The copy
  goes first on PYTHONPATH; the library in it is deleted or corrupted.
- No executorch: `python -S` (no site-packages at all) with PYTHONPATH naming only a copy
  of the package. Neither the module nor its distribution metadata can be found, which
  is what an environment without executorch looks like, with no import hooks to trust.
- Another executorch version: a temp directory first on PYTHONPATH holding
  executorch-9.9.9.dist-info/METADATA. importlib.metadata returns the first distribution
  found along sys.path, so version("executorch") says 9.9.9 (checked by a control). It
  also holds executorch/version.py with __version__ = "9.9.9": executorch is a namespace
  package, so that module shadows the real one too, whichever of the two the package
  reads. (Were executorch ever a regular package, only the metadata would be faked.)
- Loaded once: an LD_PRELOAD shim built with gcc logs every dlopen() of the backend
  library, whoever calls it (ctypes or otherwise); /proc/self/maps is also read.

The module is skipped when ember_executorch_runtime cannot be imported; install the
wheel (`pip install dist/ember_executorch_runtime-*.whl`) to run it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PKG = "ember_executorch_runtime"
LIB_NAME = "libexecutorch_backend_ember.so"
SKIP_ENV = "EMBER_SKIP_DELEGATE_REGISTRATION"
REPO_ROOT = Path(__file__).resolve().parent.parent
PIN = (REPO_ROOT / "EXECUTORCH_VERSION").read_text().strip()


def _base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != SKIP_ENV}
    env.update(extra)
    return env


def _probe() -> dict:
    """Where the installed package and executorch live, asked of a child with loading off."""
    code = textwrap.dedent(f"""
        import importlib.util, json, os
        import {PKG} as m
        spec = importlib.util.find_spec("executorch")
        et = [p for p in (spec.submodule_search_locations or []) if
              os.path.isfile(os.path.join(p, "lib", "libexecutorch.so"))] if spec else []
        print(json.dumps({{"pkg": os.path.dirname(os.path.abspath(m.__file__)),
                          "executorch": os.path.realpath(et[0]) if et else None}}))
        """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=_base_env(**{SKIP_ENV: "1"}), cwd="/")
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


PROBE = _probe()
if "error" in PROBE:
    pytest.skip(f"{PKG} is not importable with {sys.executable} ({PROBE['error']}); "
                "pip install dist/ember_executorch_runtime-*.whl", allow_module_level=True)
PKG_DIR = Path(PROBE["pkg"])
EXECUTORCH_DIR = Path(PROBE["executorch"]) if PROBE["executorch"] else None

# Code the child runs first: helpers to read its own address space and registry.
PRELUDE = textwrap.dedent("""
    import os, sys, json

    def mapped(basename):
        '''Distinct files (device, inode) mapped whose name is exactly `basename`.'''
        files = {}
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and os.path.basename(parts[5].strip()) == basename:
                    files[(parts[3], parts[4])] = parts[5].strip()
        return sorted(files.values())

    def registered_backends():
        from executorch.extension.pybindings import _C
        return list(_C._get_registered_backend_names())
    """)


def run_py(code: str, *, env: dict[str, str] | None = None, flags: tuple[str, ...] = (),
           cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *flags, "-c", PRELUDE + textwrap.dedent(code)],
                          capture_output=True, text=True, env=env or _base_env(),
                          cwd=cwd or "/", timeout=timeout)


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"rc={result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def last_json(result: subprocess.CompletedProcess):
    return json.loads(ok(result).strip().splitlines()[-1])


def with_pythonpath(first: Path, **extra: str) -> dict[str, str]:
    env = _base_env(**extra)
    env["PYTHONPATH"] = os.pathsep.join([str(first), *filter(None, [env.get("PYTHONPATH")])])
    return env


# Imports the package and reports the outcome, whether it raised or not.
IMPORT_REPORT = """
    try:
        import ember_executorch_runtime as m
        out = {"ok": True, "file": m.__file__, "registered": m.is_registered()}
    except ImportError as e:
        out = {"ok": False, "type": type(e).__name__, "message": str(e),
               "mro": [c.__name__ for c in type(e).__mro__],
               "cause": type(e.__cause__).__name__ if e.__cause__ else None,
               "cause_message": str(e.__cause__) if e.__cause__ else None}
    out["mapped"] = mapped("libexecutorch_backend_ember.so")
    print(json.dumps(out))
    """


@pytest.fixture
def site_copy(tmp_path):
    """A temp site dir: a copy of the installed package, and executorch symlinked beside."""
    if EXECUTORCH_DIR is None:
        pytest.skip("executorch's lib/libexecutorch.so not found beside the package")
    site = tmp_path / "site"
    shutil.copytree(PKG_DIR, site / PKG, ignore=shutil.ignore_patterns("__pycache__"))
    (site / "executorch").symlink_to(EXECUTORCH_DIR, target_is_directory=True)
    return site


@pytest.fixture(scope="session")
def dlopen_shim(tmp_path_factory):
    """LD_PRELOAD library that appends each dlopen() path naming the backend to a log."""
    if not shutil.which("gcc"):
        pytest.skip("gcc not found: needed to build the dlopen counting shim")
    d = tmp_path_factory.mktemp("shim")
    (d / "shim.c").write_text(textwrap.dedent("""
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        void* dlopen(const char* file, int mode) {
          static void* (*real)(const char*, int);
          if (!real) real = (void* (*)(const char*, int))dlsym(RTLD_NEXT, "dlopen");
          const char* log = getenv("EMBER_TEST_DLOPEN_LOG");
          if (log && file && strstr(file, "libexecutorch_backend_ember")) {
            FILE* f = fopen(log, "a");
            if (f) { fprintf(f, "%s\\n", file); fclose(f); }
          }
          return real(file, mode);
        }
        """))
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(d / "shim.so"), str(d / "shim.c"),
                    "-ldl"], check=True)
    return d / "shim.so"


def dlopen_env(shim: Path, log: Path, **extra: str) -> dict[str, str]:
    env = _base_env(**extra)
    env["LD_PRELOAD"] = os.pathsep.join(filter(None, [str(shim), env.get("LD_PRELOAD")]))
    env["EMBER_TEST_DLOPEN_LOG"] = str(log)
    return env


def dlopen_count(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


# ---- registration on import ---------------------------------------------------------

def test_bare_import_registers_backend():
    names = last_json(run_py("""
        import ember_executorch_runtime  # noqa: F401  (nothing else is called)
        from executorch.runtime import Runtime
        print(json.dumps(list(Runtime.get().backend_registry.registered_backend_names)))
        """))
    assert "EmberBackend" in names


def test_backend_absent_without_import():
    # Control for the test above: nothing else in the process registers EmberBackend.
    assert "EmberBackend" not in last_json(run_py("print(json.dumps(registered_backends()))"))


def test_import_registers_in_either_order():
    # executorch's runtime loaded first, then the package: still registered, one runtime.
    out = last_json(run_py("""
        names_before = registered_backends()
        import ember_executorch_runtime as m
        print(json.dumps({"before": names_before, "after": registered_backends(),
                          "registered": m.is_registered(),
                          "runtime": mapped("libexecutorch.so")}))
        """))
    assert "EmberBackend" not in out["before"] and "EmberBackend" in out["after"]
    assert out["registered"] is True
    assert len(out["runtime"]) == 1, out["runtime"]


def test_backend_name():
    out = last_json(run_py("""
        import ember_executorch_runtime as m
        print(json.dumps([m.BACKEND_NAME, m.BACKEND_NAME in registered_backends()]))
        """))
    assert out == ["EmberBackend", True]


def test_get_library_path_is_the_mapped_library():
    out = last_json(run_py("""
        import ember_executorch_runtime as m
        p = m.get_library_path()
        print(json.dumps({"type": type(p).__name__, "path": p,
                          "pkg": os.path.dirname(os.path.abspath(m.__file__)),
                          "exists": os.path.isfile(p), "real": os.path.realpath(p),
                          "mapped": mapped("libexecutorch_backend_ember.so")}))
        """))
    assert out["type"] == "str" and os.path.isabs(out["path"]) and out["exists"]
    assert out["path"] == os.path.join(out["pkg"], "lib", LIB_NAME)
    assert out["mapped"] == [out["real"]]


def test_build_info_records_the_pin():
    # The version the library was built against is derived from EXECUTORCH_VERSION.
    out = last_json(run_py("""
        from ember_executorch_runtime import _build_info
        print(json.dumps(_build_info.EXECUTORCH_VERSION))
        """, env=_base_env(**{SKIP_ENV: "1"})))
    assert out == PIN


# ---- register(): once, idempotent, thread-safe --------------------------------------

def test_register_many_times_loads_once(dlopen_shim, tmp_path):
    log = tmp_path / "dlopen.log"
    out = last_json(run_py("""
        import ember_executorch_runtime as m
        results = [m.register() for _ in range(100)]
        print(json.dumps({"mapped": mapped("libexecutorch_backend_ember.so"),
                          "registered": m.is_registered(),
                          "backends": registered_backends().count("EmberBackend")}))
        """, env=dlopen_env(dlopen_shim, log)))
    assert len(out["mapped"]) == 1 and out["registered"] is True and out["backends"] == 1
    assert dlopen_count(log) == 1, log.read_text()


def test_dlopen_shim_counts(dlopen_shim, tmp_path):
    # Control for the shim: a second explicit dlopen of the library is counted.
    log = tmp_path / "dlopen.log"
    ok(run_py("""
        import ctypes, ember_executorch_runtime as m
        ctypes.CDLL(m.get_library_path())
        """, env=dlopen_env(dlopen_shim, log)))
    assert dlopen_count(log) == 2


def test_register_after_first_returns_quickly():
    # Repeated calls must not redo work (no version lookup, no dlopen); the bounds leave
    # ~100x headroom so a loaded machine does not fail it.
    out = last_json(run_py("""
        import statistics, time, ember_executorch_runtime as m
        singles = []
        for _ in range(101):
            t0 = time.perf_counter(); m.register(); singles.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(1000): m.register()
        print(json.dumps([statistics.median(singles), time.perf_counter() - t0]))
        """))
    median, thousand = out
    # A repeated call is a flag test (~1 us); a version lookup alone costs ~250 us.
    assert median < 0.0001, f"a repeated register() takes {median * 1e6:.0f} us (median)"
    assert thousand < 0.05, f"1000 repeated register() calls took {thousand:.3f} s"


def test_register_concurrent_loads_once(dlopen_shim, tmp_path):
    log = tmp_path / "dlopen.log"
    out = last_json(run_py("""
        import threading, ember_executorch_runtime as m
        assert not m.is_registered()
        barrier, seen, errors = threading.Barrier(16), [], []
        def worker():
            barrier.wait()
            try:
                m.register()
                seen.append(m.is_registered())  # true as soon as register() returns
            except BaseException as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=worker) for _ in range(16)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(json.dumps({"seen": seen, "errors": errors,
                          "backends": registered_backends().count("EmberBackend"),
                          "mapped": mapped("libexecutorch_backend_ember.so")}))
        """, env=dlopen_env(dlopen_shim, log, **{SKIP_ENV: "1"})))
    assert out["errors"] == [] and out["seen"] == [True] * 16
    assert out["backends"] == 1 and len(out["mapped"]) == 1
    assert dlopen_count(log) == 1, log.read_text()


# ---- EMBER_SKIP_DELEGATE_REGISTRATION ------------------------------------------------

SKIP_STATE = """
    import ember_executorch_runtime as m
    print(json.dumps({"registered": m.is_registered(),
                      "mapped": mapped("libexecutorch_backend_ember.so")}))
    """


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "True", "yes", "YES", "on", "On"])
def test_skip_values_accepted(value):
    out = last_json(run_py(SKIP_STATE, env=_base_env(**{SKIP_ENV: value})))
    assert out == {"registered": False, "mapped": []}


@pytest.mark.parametrize("value", ["", "0", "false", "no", "off", " 1", "1 ", " true ",
                                   "2", "y", "skip", "1;", "truee"])
def test_skip_values_rejected(value):
    out = last_json(run_py(SKIP_STATE, env=_base_env(**{SKIP_ENV: value})))
    assert out["registered"] is True and len(out["mapped"]) == 1


def test_skipped_import_then_register():
    out = last_json(run_py("""
        import ember_executorch_runtime as m
        before = (m.is_registered(), "EmberBackend" in registered_backends())
        m.register()
        print(json.dumps([before, [m.is_registered(), "EmberBackend" in registered_backends()]]))
        """, env=_base_env(**{SKIP_ENV: "1"})))
    assert out == [[False, False], [True, True]]


# ---- the API surface -----------------------------------------------------------------

def test_no_runtime_wrappers_exported():
    out = last_json(run_py("""
        import importlib, types, ember_executorch_runtime as m
        forbidden = ["Program", "Method", "Module", "Runtime", "load", "load_program",
                     "load_method", "get_runtime", "activate", "runtime", "_portable_lib",
                     "data_loader"]
        present = [n for n in forbidden if hasattr(m, n)]
        submodules = []
        for n in ["runtime", "_portable_lib", "data_loader"]:
            try:
                importlib.import_module("ember_executorch_runtime." + n)
                submodules.append(n)
            except ImportError:
                pass
        own = sorted(n for n, v in vars(m).items() if not n.startswith("_")
                     and callable(v) and getattr(v, "__module__", "").startswith(m.__name__))
        print(json.dumps({"present": present, "submodules": submodules, "own": own}))
        """))
    assert out["present"] == [] and out["submodules"] == []
    assert set(out["own"]) <= {"EmberRuntimeImportError", "get_library_path", "register",
                               "is_registered"}, out["own"]


def test_error_class_is_importerror():
    out = last_json(run_py("""
        import ember_executorch_runtime as m
        print(json.dumps([c.__name__ for c in m.EmberRuntimeImportError.__mro__]))
        """, env=_base_env(**{SKIP_ENV: "1"})))
    assert out[0] == "EmberRuntimeImportError" and "ImportError" in out


# ---- failures carry the real cause ---------------------------------------------------

def test_site_copy_control(site_copy):
    # The staging used below, with the library intact: imports from the copy and loads.
    out = last_json(run_py(IMPORT_REPORT, env=with_pythonpath(site_copy)))
    assert out["ok"] and out["registered"], out
    assert out["file"].startswith(str(site_copy)), out["file"]
    assert out["mapped"] == [os.path.realpath(site_copy / PKG / "lib" / LIB_NAME)]


LOADER_REPORT = IMPORT_REPORT + """
    import ctypes
    try:
        ctypes.CDLL(sys.argv[1])
        out["loader"] = None
    except OSError as e:
        out["loader"] = str(e)
    print(json.dumps(out))
    """


def library_failure(site: Path) -> dict:
    """Import from `site`; also what the dynamic loader itself says about the library."""
    lib = site / PKG / "lib" / LIB_NAME
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(LOADER_REPORT), str(lib)],
                       capture_output=True, text=True, env=with_pythonpath(site), cwd="/",
                       timeout=300)
    out = last_json(r)
    assert out["loader"], "control: the loader accepted the library"
    # The loader's words without the path it was given, in case the package spells the
    # path differently.
    out["loader"] = out["loader"].replace(f"{lib}: ", "")
    return out


def test_missing_library(site_copy):
    (site_copy / PKG / "lib" / LIB_NAME).unlink()
    out = library_failure(site_copy)
    assert not out["ok"] and out["type"] == "EmberRuntimeImportError", out
    assert "ImportError" in out["mro"]
    # The dynamic loader's own words, not a paraphrase.
    assert "cannot open shared object file" in out["loader"]
    assert out["loader"] in out["message"], out
    assert out["cause"] is not None, "the error does not chain its cause (raise ... from e)"


@pytest.mark.parametrize("damage,loader_says", [
    (lambda p: p.write_bytes(p.read_bytes()[:64]), "cannot read file data"),
    (lambda p: p.write_bytes(b""), "file too short"),
    (lambda p: p.write_bytes(b"this is not an ELF file" * 64), "invalid ELF header"),
], ids=["truncated", "empty", "garbage"])
def test_corrupt_library(site_copy, damage, loader_says):
    damage(site_copy / PKG / "lib" / LIB_NAME)
    out = library_failure(site_copy)
    assert loader_says in out["loader"], out["loader"]
    assert not out["ok"] and out["type"] == "EmberRuntimeImportError", out
    assert out["loader"] in out["message"], out
    assert out["cause"] == "OSError" and out["loader"] in out["cause_message"], out
    assert out["mapped"] == []


def test_missing_executorch(tmp_path):
    site = tmp_path / "bare"
    shutil.copytree(PKG_DIR, site / PKG, ignore=shutil.ignore_patterns("__pycache__"))
    env = _base_env()
    env["PYTHONPATH"] = str(site)
    out = last_json(run_py("""
        import importlib.util, importlib.metadata
        assert importlib.util.find_spec("executorch") is None
        try:
            importlib.metadata.version("executorch")
            raise SystemExit("executorch metadata still visible")
        except importlib.metadata.PackageNotFoundError:
            pass
        """ + IMPORT_REPORT, env=env, flags=("-S",)))
    assert not out["ok"] and out["type"] == "EmberRuntimeImportError", out
    assert f"pip install executorch=={PIN}" in out["message"], out["message"]
    assert out["mapped"] == []


def _fake_executorch(root: Path, version: str) -> Path:
    dist = root / f"executorch-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: executorch\nVersion: {version}\n")
    (root / "executorch").mkdir()
    (root / "executorch" / "version.py").write_text(
        f'__version__ = "{version}"\ngit_version = None\n')
    return root


def test_fake_executorch_version_is_seen(tmp_path):
    # Control for the version tests: both ways of asking see the fake.
    env = with_pythonpath(_fake_executorch(tmp_path / "fake", "9.9.9"), **{SKIP_ENV: "1"})
    out = last_json(run_py("""
        import importlib.metadata
        from executorch.version import __version__
        print(json.dumps([importlib.metadata.version("executorch"), __version__]))
        """, env=env))
    assert out == ["9.9.9", "9.9.9"]


@pytest.mark.parametrize("version", ["9.9.9", "1.5.2" if PIN != "1.5.2" else "1.5.3"])
def test_mismatched_executorch_version(tmp_path, version):
    env = with_pythonpath(_fake_executorch(tmp_path / "fake", version))
    out = last_json(run_py(IMPORT_REPORT, env=env))
    assert not out["ok"] and out["type"] == "EmberRuntimeImportError", out
    assert version in out["message"] and PIN in out["message"], out["message"]
    assert out["mapped"] == [], "the library was loaded against the wrong executorch"


def test_local_version_label_accepted(tmp_path):
    # executorch's own wheels carry local labels (1.5.1+cpu); the release is what counts.
    env = with_pythonpath(_fake_executorch(tmp_path / "fake", f"{PIN}+cu130"))
    out = last_json(run_py(IMPORT_REPORT, env=env))
    assert out["ok"] and out["registered"], out


# ---- python -m ember_executorch_runtime ---------------------------------------------

def test_main_reports_and_succeeds():
    r = subprocess.run([sys.executable, "-m", PKG], capture_output=True, text=True,
                       env=_base_env(), cwd="/", timeout=300)
    text = r.stdout + r.stderr
    assert r.returncode == 0, text
    lib = str(PKG_DIR / "lib" / LIB_NAME)
    assert "EmberBackend" in text and PIN in text, text
    assert lib in text or os.path.realpath(lib) in text, text
    assert "cpu" in text.lower() or "cuda" in text.lower(), f"no device listed:\n{text}"


def test_main_fails_on_corrupt_library(site_copy):
    (site_copy / PKG / "lib" / LIB_NAME).write_bytes(b"")
    r = subprocess.run([sys.executable, "-m", PKG], capture_output=True, text=True,
                       env=with_pythonpath(site_copy), cwd="/", timeout=300)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "file too short" in r.stdout + r.stderr, r.stdout + r.stderr


# ---- one ExecuTorch runtime in the process -------------------------------------------

def test_one_executorch_runtime_after_import():
    out = last_json(run_py("""
        import ember_executorch_runtime
        from executorch.runtime import Runtime
        Runtime.get()
        print(json.dumps(mapped("libexecutorch.so")))
        """))
    assert len(out) == 1, out


def _ember_env(tmp_path: Path) -> dict[str, str] | None:
    """An environment where `import ember` works, or None. Uses the installed ember, else
    python/ember from this checkout (alone, so the checkout's runtime package is not
    put on the path)."""
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('ember') is None)"
    if subprocess.run([sys.executable, "-c", probe], env=_base_env(), cwd="/").returncode == 0:
        return _base_env()
    if (REPO_ROOT / "python" / "ember" / "__init__.py").is_file():
        d = tmp_path / "ember_src"
        d.mkdir()
        (d / "ember").symlink_to(REPO_ROOT / "python" / "ember", target_is_directory=True)
        env = with_pythonpath(d)
        if subprocess.run([sys.executable, "-c", probe], env=env, cwd="/").returncode == 0:
            return env
    return None


def test_one_executorch_runtime_after_running_a_program(tmp_path):
    env = _ember_env(tmp_path)
    if env is None:
        pytest.skip("the ember package is not importable: cannot export a program")
    pte = tmp_path / "model.pte"
    export = run_py(f"""
        import torch, ember
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 4)).eval()
        x = torch.randn(2, 8)
        ember.save(model, {str(pte)!r}, example_inputs=(x,))
        torch.save({{"x": x, "y": model(x).detach()}}, {str(tmp_path / "io.pt")!r})
        """, env=env, cwd=tmp_path, timeout=600)
    ok(export)
    out = last_json(run_py(f"""
        import torch
        import ember_executorch_runtime
        from executorch.runtime import Runtime
        io = torch.load({str(tmp_path / "io.pt")!r})
        method = Runtime.get().load_program({str(pte)!r}).load_method("forward")
        y = method.execute((io["x"],))[0]
        print(json.dumps({{"close": bool(torch.allclose(y, io["y"], atol=1e-4, rtol=1e-4)),
                          "runtime": mapped("libexecutorch.so"),
                          "backend": mapped("libexecutorch_backend_ember.so")}}))
        """, cwd=tmp_path))
    assert out["close"], "the program's output differs from eager PyTorch"
    # Control: the program needs EmberBackend, so without the import it cannot load.
    without = run_py(f"""
        from executorch.runtime import Runtime
        Runtime.get().load_program({str(pte)!r}).load_method("forward")
        """, cwd=tmp_path)
    assert without.returncode != 0, "the program does not use EmberBackend"
    assert len(out["runtime"]) == 1, out["runtime"]
    assert len(out["backend"]) == 1, out["backend"]

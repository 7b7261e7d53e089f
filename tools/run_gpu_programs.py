"""Run the programs of tools/make_gpu_programs.py and check them: numbers and copies.

    python tools/run_gpu_programs.py --programs .device-programs --runner RUNNER
                                     [--results DIR] [--python-runtime] [--cpu]

For every program of the "combinations" set, the C++ reference runner (built against the
installed wheels) runs it: with --device-resident for the programs whose inputs and
outputs are recorded on CUDA, else on host memory. Two checks, each of which can fail:

- numbers: the outputs against eager PyTorch in float32 (written by make_gpu_programs.py),
  relative error = max |out - ref| / max |ref|, within 1e-5 for float32 and 1e-2 for
  float16 and bfloat16;
- copies: the host<->device bytes per execute that the runner reads from EmberBackend's
  counters (Ember's engine staging, and ExecuTorch's et_copy operators through the device
  allocator) must equal what the program file implies (the manifest). For the Ember-only
  device-resident programs that is 0 bytes every way, and the runner is also given
  --expect-no-host-device-copies.

--python-runtime also runs each program through executorch.runtime (ExecuTorch's Python
runtime, with `import ember_executorch_runtime`), each in its own process, and records
what happened: this is how the H200 check finds out whether the pinned executorch's
Python extension works beside that machine's torch.

--cpu (a machine without a GPU): runs only the host-memory programs (on Ember's CPU
executor), checks numbers, and skips the copy check (the CPU executor copies nothing).

Writes results.json and results.md into --results; exits 1 when any check fails.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

COPY_LINE = re.compile(
    r"host<->device bytes per execute: ember h2d (\d+) d2h (\d+); "
    r"device allocator h2d (\d+) d2h (\d+)")
ALLOCATOR_LINE = re.compile(r"device allocator: (\S+)")
TIME_LINE = re.compile(r"execute us: median ([0-9.]+)")


def read_array(data: bytes, dtype: str) -> np.ndarray:
    if dtype == "float32":
        return np.frombuffer(data, dtype=np.float32).astype(np.float64)
    if dtype == "float16":
        return np.frombuffer(data, dtype=np.float16).astype(np.float64)
    if dtype == "bfloat16":
        bits = np.frombuffer(data, dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64)
    raise ValueError(f"no reader for {dtype}")


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    if actual.shape != expected.shape:
        return float("inf")
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    error = float(np.max(np.abs(actual - expected))) if expected.size else 0.0
    return error / scale if scale > 0 else error


def run_cpp(entry: dict, programs: Path, runner: Path, work: Path, cpu: bool) -> dict:
    resident = all(t["device"] == "cuda" for t in entry["inputs"] + entry["outputs"])
    expected_copies = entry["copies_per_execute"]
    zero = all(v == 0 for v in expected_copies.values())
    out_file = work / f"{entry['name']}.cpp.out.bin"
    command = [str(runner), str(programs / entry["pte"]), "--inputs",
               str(programs / entry["input_file"]), "--outputs", str(out_file),
               "--iterations", "20"]
    if resident:
        command.append("--device-resident")
    if zero and not cpu:
        command.append("--expect-no-host-device-copies")
    result = {"name": entry["name"], "runner": "c++", "command": " ".join(command[1:])}
    process = subprocess.run(command, capture_output=True, text=True, timeout=300)
    (work / f"{entry['name']}.cpp.log").write_text(process.stdout + process.stderr)
    result["returncode"] = process.returncode
    failures = []
    if process.returncode != 0:
        tail = (process.stdout + process.stderr).strip().splitlines()[-3:]
        failures.append(f"runner exit {process.returncode}: " + " | ".join(tail))
    match = COPY_LINE.search(process.stdout)
    if match:
        result["copies_per_execute"] = dict(zip(
            ("ember_h2d", "ember_d2h", "allocator_h2d", "allocator_d2h"),
            (int(g) for g in match.groups())))
    allocator = ALLOCATOR_LINE.search(process.stdout)
    result["device_allocator"] = allocator.group(1) if allocator else None
    timing = TIME_LINE.search(process.stdout)
    result["median_us"] = float(timing.group(1)) if timing else None
    if process.returncode == 0:
        actual = read_array(out_file.read_bytes(), entry["outputs"][0]["dtype"])
        expected = read_array((programs / entry["expected_file"]).read_bytes(),
                              entry["expected_dtype"])
        error = relative_error(actual, expected)
        result["relative_error"] = error
        if not error <= entry["tolerance"]:
            failures.append(f"relative error {error:.3g} > {entry['tolerance']:g}")
        if not cpu:
            if "copies_per_execute" not in result:
                failures.append("the runner printed no copy counters")
            elif result["copies_per_execute"] != expected_copies:
                failures.append(f"copies per execute {result['copies_per_execute']} != "
                                f"expected {expected_copies}")
    result["failures"] = failures
    result["ok"] = not failures
    return result


PYTHON_RUN = textwrap.dedent(r"""
    import json, sys
    import numpy as np
    entry = json.loads(sys.argv[1]); programs = sys.argv[2]; out_file = sys.argv[3]
    report = {"stage": "import torch"}
    try:
        import torch
        report["torch"] = torch.__version__
        report["stage"] = "import executorch.runtime"
        from executorch.runtime import Runtime
        report["stage"] = "import ember_executorch_runtime"
        import ember_executorch_runtime  # noqa: F401  registers EmberBackend
        runtime = Runtime.get()
        report["backends"] = sorted(runtime.backend_registry.registered_backend_names)
        report["stage"] = "load_program"
        program = runtime.load_program(f"{programs}/{entry['pte']}")
        report["stage"] = "load_method"
        method = program.load_method("forward")
        dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
        spec = entry["inputs"][0]
        raw = open(f"{programs}/{entry['input_file']}", "rb").read()
        x = torch.frombuffer(bytearray(raw), dtype=dtypes[spec["dtype"]]).reshape(spec["shape"])
        if spec["device"] == "cuda":
            x = x.cuda()
        report["stage"] = "execute"
        (y,) = method.execute((x,))
        report["output_device"] = str(y.device)
        report["stage"] = "compare"
        y = y.detach().to("cpu").contiguous()
        open(out_file, "wb").write(y.view(torch.uint8).numpy().tobytes())
        report["stage"] = "done"
    except BaseException as e:  # noqa: BLE001  the point is to record what happened
        report["error"] = f"{type(e).__name__}: {e}"[:600]
    print("REPORT " + json.dumps(report))
""")


def run_python(entry: dict, programs: Path, work: Path) -> dict:
    out_file = work / f"{entry['name']}.py.out.bin"
    out_file.unlink(missing_ok=True)
    result = {"name": entry["name"], "runner": "python"}
    try:
        process = subprocess.run(
            [sys.executable, "-c", PYTHON_RUN, json.dumps(entry), str(programs), str(out_file)],
            capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        result.update(ok=False, failures=["timed out"])
        return result
    (work / f"{entry['name']}.py.log").write_text(process.stdout + process.stderr)
    report = {}
    for line in process.stdout.splitlines():
        if line.startswith("REPORT "):
            report = json.loads(line[len("REPORT "):])
    result["returncode"] = process.returncode
    result["report"] = report
    failures = []
    if process.returncode != 0:
        tail = (process.stdout + process.stderr).strip().splitlines()[-2:]
        failures.append(f"exit {process.returncode} (signal?) at stage "
                        f"{report.get('stage', '?')}: " + " | ".join(tail))
    elif "error" in report:
        failures.append(f"at stage {report['stage']}: {report['error']}")
    elif out_file.exists():
        actual = read_array(out_file.read_bytes(), entry["outputs"][0]["dtype"])
        expected = read_array((programs / entry["expected_file"]).read_bytes(),
                              entry["expected_dtype"])
        error = relative_error(actual, expected)
        result["relative_error"] = error
        if not error <= entry["tolerance"]:
            failures.append(f"relative error {error:.3g} > {entry['tolerance']:g}")
    result["failures"] = failures
    result["ok"] = not failures
    return result


def markdown(results: list[dict], entries: dict) -> str:
    lines = [
        "| program | model | io | dtype | delegates | runner | rel. error | "
        "h2d/d2h bytes per execute: Ember engine | : et_copy via allocator | median us | ok |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        e = entries[r["name"]]
        copies = r.get("copies_per_execute")
        engine = f"{copies['ember_h2d']} / {copies['ember_d2h']}" if copies else "-"
        allocator = f"{copies['allocator_h2d']} / {copies['allocator_d2h']}" if copies else "-"
        delegates = " + ".join(f"{n}x{k.replace('Backend', '')}" for k, n in e["delegates"].items())
        error = r.get("relative_error")
        median = r.get("median_us")
        status = "ok" if r["ok"] else "FAIL: " + "; ".join(r["failures"])[:200]
        lines.append(
            f"| {r['name']} | {e['model']} | {e['io']} | {e['dtype']} | {delegates} | "
            f"{r['runner']} | {'-' if error is None else f'{error:.2e}'} | {engine} | "
            f"{allocator} | {'-' if median is None else f'{median:.1f}'} | {status} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", required=True)
    parser.add_argument("--runner", required=True)
    parser.add_argument("--results", default=None)
    parser.add_argument("--python-runtime", action="store_true")
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args(argv)
    programs = Path(args.programs).resolve()
    results_dir = Path(args.results or programs / "results").resolve()
    work = results_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((programs / "manifest.json").read_text())
    entries = {e["name"]: e for e in manifest["programs"] if e["set"] == "combinations"}
    if args.cpu:
        entries = {n: e for n, e in entries.items() if e["io"] == "host"}

    results = []
    for entry in entries.values():
        result = run_cpp(entry, programs, Path(args.runner), work, args.cpu)
        results.append(result)
        print(f"c++    {entry['name']:28s} {'ok' if result['ok'] else 'FAIL'} "
              f"err={result.get('relative_error')} copies={result.get('copies_per_execute')} "
              f"{'; '.join(result['failures'])}", flush=True)
    if args.python_runtime:
        # Each in its own process (a crash is a finding, not the end of the run), six at once.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=6) as pool:
            python_results = list(pool.map(lambda e: run_python(e, programs, work),
                                           entries.values()))
        for entry, result in zip(entries.values(), python_results):
            results.append(result)
            print(f"python {entry['name']:28s} {'ok' if result['ok'] else 'FAIL'} "
                  f"err={result.get('relative_error')} {'; '.join(result['failures'])}",
                  flush=True)

    (results_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (results_dir / "results.md").write_text(markdown(results, entries))
    cpp_ok = all(r["ok"] for r in results if r["runner"] == "c++")
    py = [r for r in results if r["runner"] == "python"]
    print(f"c++ reference runner: {sum(r['ok'] for r in results if r['runner'] == 'c++')} of "
          f"{sum(r['runner'] == 'c++' for r in results)} programs pass")
    if py:
        print(f"python runtime: {sum(r['ok'] for r in py)} of {len(py)} programs pass")
    return 0 if cpp_ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Ember against PyTorch on one GPU, in one run: the demo MLP and the host overhead.

    python bench/run_bench.py --runner RUNNER --programs .device-programs [--out RESULTS.md]
                              [--iterations 300]

Needs an NVIDIA GPU, PyTorch with CUDA, the C++ reference runner built with CUDA against
the installed executorch and ember_executorch_runtime wheels, and the programs written by
tools/make_gpu_programs.py (tools/gpu_check.sh does all of it on the H200).

Measured, each as the median over --iterations calls after a warm-up, every call timed on
the host clock around the call and a wait for the GPU (so all rows time the same thing:
what a caller waits for):

- The MLP of the demo, 4 x (Linear(1024, 1024) + GELU), float16, batch 1 and 4096, with
  GELU erf (nn.GELU()'s default: the headline) and GELU tanh (which Ember's CUDA executor
  fuses into cuBLASLt's epilogue):
    Ember     ExecuTorch's Module::execute of the device-resident program with Ember,
              from the C++ reference runner (--device-resident: the runner owns the device
              buffers; the execute returns when the outputs are written);
    eager     PyTorch eager, torch.no_grad, then torch.cuda.synchronize();
    compiled  torch.compile(mode="reduce-overhead") (CUDA graphs), then synchronize.
- Host overhead: one Ember execute of a trivial program (ReLU of one float32,
  device-resident) against one replay of a CUDA graph holding one trivial kernel
  (torch.cuda.CUDAGraph, then synchronize), and of an empty graph where PyTorch allows it.

Prints a markdown report (date, machine, versions, the table, ratios) and writes it to
--out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

TIME_LINE = re.compile(r"execute us: median ([0-9.]+) p10 ([0-9.]+) p90 ([0-9.]+)")


def bench_mlp(approximate: str, width: int = 1024, layers: int = 4) -> torch.nn.Module:
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.GELU(approximate=approximate)]
    return torch.nn.Sequential(*blocks).eval()


def time_calls(fn, iterations: int, warmup: int = 20) -> dict:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) * 1e6)
    samples.sort()
    n = len(samples)
    return {"median": statistics.median(samples), "p10": samples[int(0.1 * (n - 1))],
            "p90": samples[int(0.9 * (n - 1))], "n": n}


def run_ember(runner: Path, pte: Path, iterations: int) -> dict:
    process = subprocess.run([str(runner), str(pte), "--device-resident", "--iterations",
                              str(iterations), "--expect-no-host-device-copies"],
                             capture_output=True, text=True, timeout=300)
    match = TIME_LINE.search(process.stdout)
    if process.returncode != 0 or match is None:
        tail = (process.stdout + process.stderr).strip().splitlines()[-4:]
        raise RuntimeError(f"{pte.name}: runner exit {process.returncode}: " + " | ".join(tail))
    median, p10, p90 = (float(g) for g in match.groups())
    return {"median": median, "p10": p10, "p90": p90, "n": iterations}


def graph_replay(iterations: int, empty: bool) -> dict | None:
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    scratch = torch.zeros(1, device="cuda")
    try:
        with torch.cuda.stream(stream):
            with torch.cuda.graph(graph, stream=stream):
                if not empty:
                    scratch.add_(1.0)
        torch.cuda.synchronize()
        return time_calls(graph.replay, iterations, warmup=50)
    except Exception as error:  # noqa: BLE001  an empty capture is refused by some versions
        print(f"graph replay ({'empty' if empty else 'trivial'}): {error}", file=sys.stderr)
        return None


GRAPH_LINE = re.compile(r"graph replay us: (\w+) median ([0-9.]+) p10 ([0-9.]+) p90 ([0-9.]+) n (\d+)")


def native_graph_replay(iterations: int) -> dict:
    """bench/graph_replay.cu, built here with nvcc: an empty graph and a one-kernel graph
    replayed from C++ and waited for, timed like the runner times an Ember execute."""
    import shutil
    import tempfile

    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    source = Path(__file__).resolve().parent / "graph_replay.cu"
    binary = Path(tempfile.mkdtemp()) / "graph_replay"
    subprocess.run([nvcc, "-O2", "-std=c++17", "-o", str(binary), str(source)], check=True,
                   capture_output=True, text=True, timeout=300)
    process = subprocess.run([str(binary), str(iterations)], capture_output=True, text=True,
                             timeout=300, check=True)
    results = {}
    for name, median, p10, p90, n in GRAPH_LINE.findall(process.stdout):
        results[f"native_{name}"] = {"median": float(median), "p10": float(p10),
                                     "p90": float(p90), "n": int(n)}
    return results


def machine() -> dict:
    info = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "cuda (torch)": torch.version.cuda, "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine()}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True)
        info["driver, max SM clock"] = smi.stdout.strip()
    except OSError:
        pass
    for name in ("executorch", "ember_executorch_runtime"):
        try:
            from importlib.metadata import version

            info[name] = version(name.replace("_", "-"))
        except Exception:  # noqa: BLE001
            info[name] = "?"
    return info


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runner", required=True)
    parser.add_argument("--programs", required=True)
    parser.add_argument("--out", default=None)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args(argv)
    programs = Path(args.programs)
    runner = Path(args.runner)
    n = args.iterations

    rows = []
    for form, approximate in (("erf", "none"), ("tanh", "tanh")):
        torch.manual_seed(0)
        model = bench_mlp(approximate).to(device="cuda", dtype=torch.float16)
        for batch in (1, 4096):
            compiled = None
            if not args.no_compile:
                # Static shapes, one compiled graph per batch size, as Ember's programs.
                compiled = torch.compile(model, mode="reduce-overhead", dynamic=False)
            x = torch.randn(batch, 1024, device="cuda", dtype=torch.float16)
            row = {"gelu": form, "batch": batch}
            pte = programs / f"bench_mlp1024_gelu_{form}_b{batch}_f16.pte"
            try:
                row["ember"] = run_ember(runner, pte, n)
            except Exception as error:  # noqa: BLE001
                row["ember_error"] = str(error)
                print(error, file=sys.stderr)
            with torch.no_grad():
                row["eager"] = time_calls(lambda: model(x), n)
                if compiled is not None:
                    start = time.perf_counter()
                    for _ in range(3):
                        compiled(x)
                    torch.cuda.synchronize()
                    row["compile_s"] = time.perf_counter() - start
                    row["compiled"] = time_calls(lambda: compiled(x), n)
            rows.append(row)
            print(json.dumps(row), flush=True)

    overhead = {}
    try:
        overhead["ember_trivial"] = run_ember(runner, programs / "bench_trivial_relu_f32.pte", n)
    except Exception as error:  # noqa: BLE001
        overhead["ember_error"] = str(error)
    try:
        overhead.update(native_graph_replay(max(n, 1000)))
    except Exception as error:  # noqa: BLE001
        overhead["native_error"] = str(error)[:500]
    overhead["graph_trivial"] = graph_replay(max(n, 1000), empty=False)
    overhead["graph_empty"] = graph_replay(max(n, 1000), empty=True)
    print(json.dumps(overhead), flush=True)

    report = render(rows, overhead, machine(), n)
    print(report)
    print("RAW " + json.dumps({"rows": rows, "overhead": overhead}))
    if args.out:
        Path(args.out).write_text(report)
    return 0 if all("ember" in r for r in rows) and "ember_trivial" in overhead else 1


def fmt(cell: dict | None) -> str:
    return "-" if not cell else f"{cell['median']:.1f}"


def ratio(a: dict | None, b: dict | None) -> str:
    return "-" if not a or not b else f"{a['median'] / b['median']:.2f}"


def render(rows, overhead, info, n) -> str:
    today = datetime.date.today().isoformat()
    lines = [
        "# Benchmark: Ember vs PyTorch on the H200",
        "",
        f"Run {today} by `bench/run_bench.py` (from `tools/gpu_check.sh`), one run, every number "
        f"below from it. Median of {n} calls after a warm-up; each call is timed on the host "
        "clock around the call plus a wait for the GPU, so every row times what a caller "
        "waits for. Ember: ExecuTorch `Module::execute` from the C++ reference runner on the "
        "device-resident program (the caller's device buffers bound directly; 0 host<->device "
        "bytes per call, asserted by the runner). Eager: PyTorch, `torch.no_grad()`. "
        "Compiled: `torch.compile(mode=\"reduce-overhead\")`.",
        "",
        "Machine: " + "; ".join(f"{k} {v}" for k, v in info.items()) + ".",
        "",
        "Model: the demo MLP, 4 x (Linear(1024, 1024) + GELU), float16. GELU erf is "
        "`nn.GELU()`'s default (the headline); with GELU tanh, Ember's CUDA executor fuses "
        "bias and activation into cuBLASLt's epilogue.",
        "",
        "| GELU | batch | Ember (us) | eager (us) | reduce-overhead (us) | eager / Ember | "
        "reduce-overhead / Ember |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        ember = r.get("ember")
        lines.append(
            f"| {r['gelu']} | {r['batch']} | {fmt(ember) if ember else 'error'} | "
            f"{fmt(r.get('eager'))} | {fmt(r.get('compiled'))} | {ratio(r.get('eager'), ember)} | "
            f"{ratio(r.get('compiled'), ember)} |")
    lines += ["", "Ratios above 1 mean Ember is faster. Reproduce: `python tools/make_gpu_programs.py` "
              "(any machine), then `tools/gpu_check.sh` on the GPU machine (section `bench`; "
              "`SECTIONS=wheel,bench` for this table alone).", "",
              "## Host overhead of one execute", "",
              "| what | median (us) | p10 | p90 |", "| --- | --- | --- | --- |"]
    labels = (("ember_trivial", "Ember: one ExecuTorch execute (C++ `Module::execute`) of a "
               "device-resident ReLU of one float32"),
              ("native_empty", "C++: `cudaGraphLaunch` of an empty graph + `cudaStreamSynchronize`"),
              ("native_one_kernel", "C++: `cudaGraphLaunch` of a one-kernel graph + "
               "`cudaStreamSynchronize`"),
              ("graph_trivial", "Python: `torch.cuda.CUDAGraph.replay()` of one trivial kernel + "
               "`torch.cuda.synchronize()`"),
              ("graph_empty", "Python: the same with an empty capture"))
    for key, label in labels:
        cell = overhead.get(key)
        if cell:
            lines.append(f"| {label} | {cell['median']:.1f} | {cell['p10']:.1f} | {cell['p90']:.1f} |")
        else:
            lines.append(f"| {label} | - | - | - |")
    ember_trivial = overhead.get("ember_trivial")
    lines += [
        "",
        "Host overhead of one Ember execute, as a multiple of an empty CUDA graph replay "
        f"(both from C++): {ratio(ember_trivial, overhead.get('native_empty'))}; of a one-kernel "
        f"graph replay from C++: {ratio(ember_trivial, overhead.get('native_one_kernel'))}; of a "
        "one-kernel `torch.cuda.CUDAGraph` replay from Python: "
        f"{ratio(ember_trivial, overhead.get('graph_trivial'))}.",
    ]
    one_kernel = overhead.get("native_one_kernel")
    if ember_trivial and one_kernel:
        lines.append(
            "\nWhat an Ember execute adds over the GPU round trip it cannot avoid (launching one "
            "kernel and waiting for it, from C++): "
            f"{ember_trivial['median'] - one_kernel['median']:.1f} us "
            "(ExecuTorch's Method::execute, and Ember's argument checks, binding and "
            "counters).")
    if "native_error" in overhead:
        lines.append(f"\nThe C++ graph replay could not be measured: {overhead['native_error']}")
    if "ember_error" in overhead:
        lines.append(f"\nEmber trivial program failed: {overhead['ember_error']}")
    for r in rows:
        if "ember_error" in r:
            lines.append(f"\n{r['gelu']} batch {r['batch']}: Ember failed: {r['ember_error']}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

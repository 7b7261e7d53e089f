"""Ember against PyTorch on one GPU: the whole table of issue 6 in one run.

    python bench/run_bench.py --runner RUNNER [--work DIR] [--out RESULTS.md]
        [--models mlp,resnet18,encoder] [--dtypes float16,bfloat16] [--iterations 200]
        [--no-compile] [--aoti] [--profile]

Needs an NVIDIA GPU, PyTorch with CUDA, the pinned executorch and the two Ember wheels
installed (ember and ember_executorch_runtime), and the C++ reference runner built with
CUDA against them (tools/gpu_check.sh does all of it on the H200). Everything is made in
this run, on this machine: the programs are exported here (in parallel, on the CPU), the
anchors measured here.

Rows (the models of issue 6; the encoder and resnet18 are tests/models/models.py's):
  mlp        4 x (Linear(1024, 1024) + GELU()), GELU erf (nn.GELU's default), batch 1, 4096
  mlp_tanh   the same with GELU tanh (reported beside, not a target)
  resnet18   resnet18 at 224 x 224, batch 1, 64
  encoder    nn.TransformerEncoder, 4 layers, d_model 768, 12 heads, ff 3072, seq 128,
             batch 1, 32
  decoder    the GPT-style decoder block of issue 5 at d_model 1024 (accuracy on the GPU;
             no target)
Columns, each the median of --iterations calls after a warm-up, every call timed on the
host clock around the call and a wait for the GPU (what a caller waits for):
  eager      PyTorch eager in float16, torch.no_grad, then torch.cuda.synchronize()
  compiled   torch.compile(mode="reduce-overhead", dynamic=False) in float16
  Ember      ExecuTorch's Module::execute from the C++ reference runner of the program
             exported device-resident (the runner's own device buffers bound directly; 0
             host<->device bytes per call, asserted by the runner), per --dtypes
Also: each Ember output against the float32 eager model (relative error = max|diff| /
max|reference|), init time (load_method) against weights / host-to-device bandwidth +
50 ms, the MLP at batch 4096 against the fp16 GEMM rate cuBLASLt reaches alone, the host
overhead of one execute against CUDA graph replays, whether executorch's Python runtime
runs here, and (--aoti) AOTInductor as an anchor on the rows with a target, each in a
child process (a crash costs the row, and after one failure the rest are not tried).
--profile adds Ember's per-step GPU time (EMBER_CUDA_PROFILE=1) for every float16
program.

Prints a markdown report and writes it to --out; the raw numbers follow a "RAW " line.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "models"))
sys.path.insert(0, str(REPO / "examples"))

import torch  # noqa: E402

TIME_LINE = re.compile(r"execute us: median ([0-9.]+) p10 ([0-9.]+) p90 ([0-9.]+)")
LOAD_LINE = re.compile(r"load_method ms: ([0-9.]+)")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}

# model -> (batches, target us per batch, description)
ROWS = {
    "mlp": ((1, 4096), {1: 25, 4096: 70}, "4 x (Linear(1024, 1024) + GELU erf)"),
    "mlp_tanh": ((1, 4096), {}, "4 x (Linear(1024, 1024) + GELU tanh)"),
    "resnet18": ((1, 64), {1: 200, 64: 700}, "resnet18, 224 x 224"),
    "encoder": ((1, 32), {1: 180, 32: 600}, "TransformerEncoder 4 x d768, 12 heads, seq 128"),
    "decoder": ((1,), {}, "GPT-style decoder block, d1024, 16 heads, vocab 8192, seq 128"),
}


# ---- models --------------------------------------------------------------------------------


def bench_mlp(approximate: str, width: int = 1024, layers: int = 4) -> torch.nn.Module:
    torch.manual_seed(0)
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.GELU(approximate=approximate)]
    return torch.nn.Sequential(*blocks).eval()


def build(model_name: str) -> torch.nn.Module:
    """The float32 model, the same weights in every process (fixed seeds)."""
    import models

    if model_name == "mlp":
        return bench_mlp("none")
    if model_name == "mlp_tanh":
        return bench_mlp("tanh")
    if model_name == "resnet18":
        return models.resnet("full")
    if model_name == "encoder":
        return models.encoder("full")
    if model_name == "decoder":
        return models.decoder("full")
    raise ValueError(model_name)


def example_input(model_name: str, batch: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    if model_name == "decoder":
        return torch.randint(0, 8192, (batch, 128), generator=generator)
    shape = {"mlp": (batch, 1024), "mlp_tanh": (batch, 1024),
             "resnet18": (batch, 3, 224, 224), "encoder": (batch, 128, 768)}[model_name]
    return torch.randn(*shape, generator=generator)


def cast_input(x: torch.Tensor, dtype) -> torch.Tensor:
    """Float inputs take the model's dtype; token ids stay integers."""
    return x.to(dtype) if x.is_floating_point() else x


class Relu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def export_one(model_name: str, batch: int, dtype_name: str, path: str) -> None:
    """Runs in a child process: exports one device-resident program."""
    import ember
    from export_device_resident import device_resident_config, target_device_spec

    torch.set_num_threads(2)
    dtype = DTYPES[dtype_name]
    if model_name == "trivial":
        model, x = Relu(), torch.zeros(1, dtype=dtype)
    else:
        model = build(model_name).to(dtype)
        x = cast_input(example_input(model_name, batch), dtype)
    ember.save(model, path, (x,), compile_specs=[target_device_spec()],
               executorch_backend_config=device_resident_config())


def export_all(jobs: list[tuple[str, int, str, Path]], workers: int) -> dict:
    """Exports every (model, batch, dtype) in child processes; returns errors by path."""
    errors = {}

    def one(job):
        model_name, batch, dtype_name, path = job
        started = time.perf_counter()
        process = subprocess.run(
            [sys.executable, __file__, "--export-one", model_name, str(batch), dtype_name,
             str(path)], capture_output=True, text=True, timeout=900,
            env={**os.environ, "OMP_NUM_THREADS": "2"})
        took = time.perf_counter() - started
        if process.returncode != 0:
            errors[str(path)] = (process.stdout + process.stderr).strip().splitlines()[-3:]
        print(f"export {path.name}: {'ok' if process.returncode == 0 else 'FAILED'} "
              f"({took:.1f} s)", flush=True)

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, jobs))
    return errors


# ---- timing --------------------------------------------------------------------------------


def summarize(samples: list[float]) -> dict:
    samples = sorted(samples)
    n = len(samples)
    return {"median": statistics.median(samples), "p10": samples[int(0.1 * (n - 1))],
            "p90": samples[int(0.9 * (n - 1))], "n": n}


def time_calls(fn, iterations: int, warmup: int = 20, sync=None) -> dict:
    sync = sync or torch.cuda.synchronize
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - start) * 1e6)
    return summarize(samples)


def run_ember(runner: Path, pte: Path, iterations: int, inputs: Path | None = None,
              outputs: Path | None = None, profile: bool = False,
              extra_env: dict | None = None) -> dict:
    command = [str(runner), str(pte), "--device-resident", "--iterations", str(iterations),
               "--expect-no-host-device-copies"]
    if inputs is not None:
        command += ["--inputs", str(inputs)]
    if outputs is not None:
        command += ["--outputs", str(outputs)]
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)  # the wheel's RUNPATH finds what it needs
    if profile:
        env["EMBER_CUDA_PROFILE"] = "1"
    env.update(extra_env or {})
    process = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    match = TIME_LINE.search(process.stdout)
    if process.returncode != 0 or match is None:
        tail = (process.stdout + process.stderr).strip().splitlines()[-4:]
        raise RuntimeError(f"{pte.name}: runner exit {process.returncode}: " + " | ".join(tail))
    median, p10, p90 = (float(g) for g in match.groups())
    result = {"median": median, "p10": p10, "p90": p90, "n": iterations}
    load = LOAD_LINE.search(process.stdout)
    if load:
        result["load_ms"] = float(load.group(1))
    if profile:
        result["profile"] = "\n".join(line for line in process.stderr.splitlines()
                                      if line.startswith(("ember profile", "  ")))
    return result


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


def gemm_rate_tflops(m: int, n: int, k: int, dtype, reps: int = 200) -> float:
    """What cuBLAS(Lt) reaches alone on one m x n x k GEMM (torch.mm), in TFLOP/s, from
    a CUDA graph of `reps` back-to-back products (no launch gaps)."""
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    out = torch.empty(m, n, device="cuda", dtype=dtype)
    for _ in range(3):
        torch.mm(a, b, out=out)
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        for _ in range(reps):
            torch.mm(a, b, out=out)
    times = []
    for _ in range(5):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) / 1e3 / reps)
    return 2.0 * m * n * k / min(times) / 1e12


def host_to_device_gbps(nbytes: int) -> float:
    """Pageable host -> device copy bandwidth (what an init upload from a mapped .pte sees)."""
    host = torch.ones(max(nbytes, 1 << 20) // 4, dtype=torch.float32)
    device = torch.empty_like(host, device="cuda")
    device.copy_(host)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        device.copy_(host)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return host.numel() * 4 / best / 1e9


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).abs().max() / want.float().abs().max())


def read_output(path: Path, like: torch.Tensor, dtype) -> torch.Tensor:
    data = bytearray(path.read_bytes())
    return torch.frombuffer(data, dtype=dtype).reshape(like.shape).clone()


# ---- optional anchors ----------------------------------------------------------------------


PYTHON_RUNTIME_PROBE = """
import sys, torch
import ember_executorch_runtime  # noqa: F401
from executorch.runtime import Runtime
method = Runtime.get().load_program(sys.argv[1]).load_method("forward")
method.execute((torch.zeros(1, device="cuda"),))
print("ok")
"""


def child_failure(process: subprocess.CompletedProcess, output: str) -> str:
    """A child process's failure in one line: its exit status and the last line of
    `output` (what it wrote) that is not blank."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return f"exit {process.returncode}: " + (lines[-1][:200] if lines else "no message")


def python_runtime_probe(pte: Path) -> str:
    """Whether executorch's own Python runtime runs an Ember program beside this torch, in
    a child process: where executorch's extension does not match this torch, importing it
    can leave the process unable to run torch.compile (seen on the H200: a segfault)."""
    process = subprocess.run([sys.executable, "-c", PYTHON_RUNTIME_PROBE, str(pte)],
                             capture_output=True, text=True, timeout=300)
    if process.returncode == 0 and process.stdout.strip().endswith("ok"):
        return "ok"
    return child_failure(process, process.stderr)


def aoti_one(model_name: str, batch: int, iterations: int, device: str) -> dict:
    """AOTInductor on one row, in this process (the child aoti_anchor starts): export the
    float16 model (float32 on the CPU, which --aoti-one takes to test this path without a
    GPU), compile and package it, load the package, time it like the other anchors."""
    dtype = torch.float16 if device == "cuda" else torch.float32
    model = build(model_name).to(device=device, dtype=dtype).eval()
    x = cast_input(example_input(model_name, batch), dtype).to(device)
    try:
        started = time.perf_counter()
        with torch.no_grad():
            program = torch.export.export(model, (x,))
            package = torch._inductor.aoti_compile_and_package(
                program, package_path=str(Path(tempfile.mkdtemp()) / "model.pt2"))
        built_s = time.perf_counter() - started
        loaded = torch._inductor.aoti_load_package(package)
        with torch.no_grad():
            timing = time_calls(lambda: loaded(x), iterations,
                                sync=torch.cuda.synchronize if device == "cuda" else lambda: None)
            out = loaded(x)
            out = out[0] if isinstance(out, (list, tuple)) else out
            timing["rel_error"] = relative_error(out, model(x))  # against eager, same dtype
        timing["build_s"] = built_s
        return timing
    except Exception as error:  # noqa: BLE001
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}


AOTI_LINE = "AOTI "


def aoti_anchor(model_name: str, batch: int, iterations: int, device: str = "cuda") -> dict:
    """AOTInductor as an anchor, in a child process: on the H200 before Ember existed,
    aoti_load_package crashed the process with torch 2.11, and a crash here must cost the
    row, not the run. Returns the timing, or {"error": what failed} (an exception's first
    line, or the exit status and the last line the child wrote)."""
    try:
        process = subprocess.run(
            [sys.executable, __file__, "--aoti-one", model_name, str(batch), str(iterations),
             device], capture_output=True, text=True, timeout=1200)
    except subprocess.TimeoutExpired:
        return {"error": "no result within 1200 s"}
    for line in process.stdout.splitlines():
        if line.startswith(AOTI_LINE):
            return json.loads(line[len(AOTI_LINE):])
    return {"error": child_failure(process, process.stderr + process.stdout)}


# ---- the run -------------------------------------------------------------------------------


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--export-one"]:
        export_one(argv[1], int(argv[2]), argv[3], argv[4])
        return 0
    if argv[:1] == ["--aoti-one"]:
        print(AOTI_LINE + json.dumps(aoti_one(argv[1], int(argv[2]), int(argv[3]), argv[4])),
              flush=True)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runner", required=True)
    parser.add_argument("--work", default=None, help="where the programs go (default: a temp dir)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--models", default="mlp,mlp_tanh,resnet18,encoder,decoder")
    parser.add_argument("--dtypes", default="float16,bfloat16")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--aoti", action="store_true",
                        help="AOTInductor as an anchor on the rows with a target, each in a "
                             "child process; after one fails, the rest are not tried")
    parser.add_argument("--profile", action="store_true", help="Ember's per-step GPU time")
    parser.add_argument("--export-workers", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--accuracy-f32", action="store_true",
                        help="also float32 at batch 1 for the models of issue 5 (accuracy)")
    parser.add_argument("--anchors-only", action="store_true",
                        help="only PyTorch (eager, torch.compile, AOTI) on the rows with a target")
    parser.add_argument("--reuse-programs", action="store_true",
                        help="keep programs already in --work (from an earlier run of this tree)")
    args = parser.parse_args(argv)
    runner = Path(args.runner)
    work = Path(args.work or tempfile.mkdtemp(prefix="ember-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    model_names = [m for m in args.models.split(",") if m]
    dtype_names = [d for d in args.dtypes.split(",") if d]
    n = args.iterations
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def dtypes_of(model_name: str, batch: int) -> list[str]:
        extra_f32 = (args.accuracy_f32 and batch == 1 and "float32" not in dtype_names
                     and model_name in ("resnet18", "encoder", "decoder"))
        return dtype_names + (["float32"] if extra_f32 else [])

    jobs = [(m, b, d, work / f"{m}_b{b}_{SHORT[d]}.pte")
            for m in model_names for b in ROWS[m][0] for d in dtypes_of(m, b)]
    jobs.append(("trivial", 1, "float32", work / "trivial_f32.pte"))
    if args.reuse_programs:
        jobs = [job for job in jobs if not job[3].exists()]
    if args.anchors_only:
        jobs = []
        model_names = [m for m in model_names if ROWS[m][1]]
    started = time.perf_counter()
    export_errors = export_all(jobs, args.export_workers)
    export_s = time.perf_counter() - started

    rows = []
    for model_name in model_names:
        batches, targets, _ = ROWS[model_name]
        model32 = build(model_name).cuda()
        weight_bytes = {d: sum(p.numel() for p in model32.parameters()) * DTYPES[d].itemsize
                        for d in DTYPES}
        for batch in batches:
            row = {"model": model_name, "batch": batch, "target": targets.get(batch)}
            x32 = example_input(model_name, batch)
            with torch.no_grad():
                for dtype_name in dtypes_of(model_name, batch):
                    dtype = DTYPES[dtype_name]
                    short = SHORT[dtype_name]
                    pte = work / f"{model_name}_b{batch}_{short}.pte"
                    x = cast_input(x32, dtype)
                    reference = model32(x.float().cuda() if x.is_floating_point() else x.cuda())
                    if not args.anchors_only:
                        measure_ember(row, runner, work, pte, x, reference, dtype_name, n,
                                      weight_bytes[dtype_name], args.profile, export_errors)
                    # eager in this dtype (float16 is the anchor of the table)
                    model = build(model_name).to(device="cuda", dtype=dtype)
                    xd = x.cuda()
                    row[f"eager_{short}"] = time_calls(lambda: model(xd), n)
                    row[f"eager_{short}_rel_error"] = relative_error(model(xd), reference)
                    del model
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "profile"}), flush=True)
        del model32
        torch.cuda.empty_cache()

    extra = {"export_s": export_s}
    if "mlp" in model_names and "float16" in dtype_names:
        extra["gemm_tflops_4096x1024x1024_f16"] = gemm_rate_tflops(4096, 1024, 1024, torch.float16)
    extra["h2d_gbps"] = host_to_device_gbps(64 << 20)
    overhead = {}
    trivial = work / "trivial_f32.pte"
    try:
        if not args.anchors_only:
            overhead["ember_trivial"] = run_ember(runner, trivial, max(n, 1000))
            # The same program's one kernel launched by itself: whether a program of one
            # step would wait less without its graph (one_kernel_direct is the anchor).
            overhead["ember_trivial_eager"] = run_ember(runner, trivial, max(n, 1000),
                                                        extra_env={"EMBER_CUDA_GRAPHS": "0"})
    except Exception as error:  # noqa: BLE001
        overhead["ember_error"] = str(error)
    try:
        overhead.update(native_graph_replay(max(n, 1000)))
    except Exception as error:  # noqa: BLE001
        overhead["native_error"] = str(error)[:500]
    overhead["graph_trivial"] = graph_replay(max(n, 1000), empty=False)
    overhead["graph_empty"] = graph_replay(max(n, 1000), empty=True)

    info = machine()

    def write_report() -> str:
        report = render(rows, overhead, extra, info, n, dtype_names)
        if args.out:
            Path(args.out).write_text(report)
        return report

    # The slow anchors last, the report rewritten after each: a run cut short by its time
    # limit keeps everything measured before.
    write_report()
    aoti_failed = ""  # the row where AOTInductor failed first
    with torch.no_grad():
        for row in rows:
            wants_compile = not args.no_compile and row["target"]
            wants_aoti = args.aoti and row["target"]
            if "float16" not in dtype_names or not (wants_compile or wants_aoti):
                continue
            if wants_compile:
                model = build(row["model"]).to(device="cuda", dtype=torch.float16)
                xd = cast_input(example_input(row["model"], row["batch"]), torch.float16).cuda()
                compiled = torch.compile(model, mode="reduce-overhead", dynamic=False)
                t0 = time.perf_counter()
                for _ in range(3):
                    compiled(xd)
                torch.cuda.synchronize()
                row["compile_s"] = time.perf_counter() - t0
                row["compiled_f16"] = time_calls(lambda: compiled(xd), n)
                del compiled, model
                torch._dynamo.reset()
            if wants_aoti:
                if aoti_failed:
                    row["aoti_f16"] = {"error": f"not tried: AOTInductor failed on {aoti_failed}"}
                else:
                    row["aoti_f16"] = aoti_anchor(row["model"], row["batch"], n)
                    if "error" in row["aoti_f16"]:
                        aoti_failed = f"{row['model']} batch {row['batch']}"
            torch.cuda.empty_cache()
            print(json.dumps({k: v for k, v in row.items() if k != "profile"}), flush=True)
            write_report()

    if not args.anchors_only:
        extra["python_runtime"] = python_runtime_probe(trivial)
    print(write_report())
    print("RAW " + json.dumps({"rows": rows, "overhead": overhead, "extra": extra}))
    if args.anchors_only:
        return 0
    ok = all(f"ember_{SHORT[d]}" in r for r in rows for d in dtype_names)
    return 0 if ok and "ember_trivial" in overhead else 1


def measure_ember(row: dict, runner: Path, work: Path, pte: Path, x: torch.Tensor,
                  reference: torch.Tensor, dtype_name: str, n: int, weight_bytes: int,
                  profile: bool, export_errors: dict) -> None:
    """Ember's time, init and error for one program into row[ember_<dtype>] (or the
    error into row[ember_<dtype>_error])."""
    short = SHORT[dtype_name]
    if str(pte) in export_errors:
        row[f"ember_{short}_error"] = "export: " + " | ".join(export_errors[str(pte)])
        return
    inputs, outputs = work / f"{pte.stem}.in.bin", work / f"{pte.stem}.out.bin"
    inputs.write_bytes(x.contiguous().view(torch.uint8).numpy().tobytes())
    try:
        cell = run_ember(runner, pte, n, inputs, outputs)
        got = read_output(outputs, reference, DTYPES[dtype_name])
        cell["rel_error"] = relative_error(got, reference.cpu())
        cell["weight_bytes"] = weight_bytes
        row[f"ember_{short}"] = cell
        if profile and dtype_name == "float16":
            row["profile"] = run_ember(runner, pte, 20, inputs, None, profile=True).get("profile", "")
    except Exception as error:  # noqa: BLE001
        row[f"ember_{short}_error"] = str(error)


def machine() -> dict:
    info = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "cuda (torch)": torch.version.cuda, "python": platform.python_version()}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True)
        info["driver, max SM clock"] = smi.stdout.strip()
    except OSError:
        pass
    from importlib.metadata import version

    for name in ("executorch", "ember-executorch-runtime"):
        try:
            info[name] = version(name)
        except Exception:  # noqa: BLE001
            info[name] = "?"
    return info


# ---- the report ----------------------------------------------------------------------------


def us(cell: dict | None) -> str:
    return "-" if not cell or "median" not in cell else f"{cell['median']:.1f}"


def ratio(a: dict | None, b: dict | None) -> str:
    if not a or not b or "median" not in a or "median" not in b:
        return "-"
    return f"{a['median'] / b['median']:.2f}"


def render(rows, overhead, extra, info, n, dtype_names) -> str:
    today = datetime.date.today().isoformat()
    lines = [
        "# Benchmark: Ember vs PyTorch on the H200",
        "",
        f"Run {today} by `bench/run_bench.py` (from `tools/gpu_check.sh`, section `bench`), one "
        f"run, every number below from it. Median of {n} calls after a warm-up; each call is "
        "timed on the host clock around the call plus a wait for the GPU. Ember: ExecuTorch "
        "`Module::execute` from the C++ reference runner on the device-resident program (0 "
        "host<->device bytes per call, asserted). Eager: PyTorch float16, `torch.no_grad()`. "
        "Compiled: `torch.compile(mode=\"reduce-overhead\")`, float16. Programs exported in "
        f"this run ({extra.get('export_s', 0):.0f} s, in parallel).",
        "",
        "Machine: " + "; ".join(f"{k} {v}" for k, v in info.items()) + ".",
        "",
        "| model | batch | eager f16 (us) | compiled f16 (us) | Ember f16 (us) | target (us) | "
        "eager / Ember | compiled / Ember | Ember bf16 (us) | error f16 | error bf16 | "
        "error f32 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        f16, bf16 = r.get("ember_f16"), r.get("ember_bf16")
        target = r.get("target")
        verdict = ""
        if target and f16:
            verdict = " (met)" if f16["median"] <= target else " (missed)"
        cells = [r["model"], r["batch"], us(r.get("eager_f16")), us(r.get("compiled_f16")),
                 us(f16) if f16 else "error", f"{target or '-'}{verdict}",
                 ratio(r.get("eager_f16"), f16), ratio(r.get("compiled_f16"), f16),
                 us(bf16) if bf16 else ("error" if "bfloat16" in dtype_names else "-"),
                 f"{f16['rel_error']:.2e}" if f16 else "-",
                 f"{bf16['rel_error']:.2e}" if bf16 else "-",
                 f"{r['ember_f32']['rel_error']:.2e}" if r.get("ember_f32") else "-"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", "Ratios above 1: Ember is faster. Error: max |Ember - eager float32| / max "
              "|eager float32| (issue 5's bounds: 1e-2 for float16 and bfloat16, 1e-5 for "
              "float32, where --dtypes has it).", ""]
    # The GEMM rate of the MLP at batch 4096.
    rate = extra.get("gemm_tflops_4096x1024x1024_f16")
    for r in rows:
        if r["model"] == "mlp" and r["batch"] == 4096 and r.get("ember_f16") and rate:
            flops = 4 * 2.0 * 4096 * 1024 * 1024
            ember_rate = flops / (r["ember_f16"]["median"] * 1e-6) / 1e12
            lines.append(f"MLP batch 4096: Ember {ember_rate:.0f} TFLOP/s over the whole call; "
                         f"one 4096x1024x1024 float16 GEMM through cuBLAS alone (graph of "
                         f"back-to-back products): {rate:.0f} TFLOP/s; ratio "
                         f"{ember_rate / rate:.2f} (target >= 0.70).")
    # Init.
    bandwidth = extra.get("h2d_gbps")
    lines += ["", "## Init (load_method) against weights / host-to-device bandwidth + 50 ms", "",
              f"Pageable host-to-device bandwidth measured here: {bandwidth:.1f} GB/s.", "",
              "| program | weights (MB) | load_method (ms) | bound (ms) |", "| --- | --- | --- | --- |"]
    for r in rows:
        for short in ("f16", "bf16", "f32"):
            cell = r.get(f"ember_{short}")
            if cell and "load_ms" in cell:
                bound = cell["weight_bytes"] / (bandwidth * 1e9) * 1e3 + 50
                lines.append(f"| {r['model']} b{r['batch']} {short} | {cell['weight_bytes'] / 1e6:.1f} "
                             f"| {cell['load_ms']:.1f} | {bound:.1f} |")
    # Host overhead.
    lines += ["", "## Host overhead of one execute", "",
              "| what | median (us) | p10 | p90 |", "| --- | --- | --- | --- |"]
    labels = (("ember_trivial", "Ember: one ExecuTorch execute (C++ `Module::execute`) of a "
               "device-resident ReLU of one float32"),
              ("ember_trivial_eager", "Ember: the same with `EMBER_CUDA_GRAPHS=0` (its kernel "
               "launched without a graph)"),
              ("native_empty", "C++: `cudaGraphLaunch` of an empty graph + `cudaStreamSynchronize`"),
              ("native_one_kernel", "C++: `cudaGraphLaunch` of a one-kernel graph + "
               "`cudaStreamSynchronize`"),
              ("native_one_kernel_direct", "C++: that kernel launched without a graph + "
               "`cudaStreamSynchronize`"),
              ("graph_trivial", "Python: `torch.cuda.CUDAGraph.replay()` of one trivial kernel + "
               "`torch.cuda.synchronize()`"),
              ("graph_empty", "Python: the same with an empty capture"))
    for key, label in labels:
        cell = overhead.get(key)
        lines.append(f"| {label} | {cell['median']:.1f} | {cell['p10']:.1f} | {cell['p90']:.1f} |"
                     if cell else f"| {label} | - | - | - |")
    trivial = overhead.get("ember_trivial")
    lines += ["", "One Ember execute as a multiple of an empty graph replay from C++: "
              f"{ratio(trivial, overhead.get('native_empty'))}; from Python: "
              f"{ratio(trivial, overhead.get('graph_empty'))}; of a one-kernel graph replay "
              f"from C++ (the same GPU round trip): {ratio(trivial, overhead.get('native_one_kernel'))}."]
    for key in ("ember_error", "native_error"):
        if key in overhead:
            lines.append(f"\n{key}: {overhead[key]}")
    lines += ["", "## Other anchors and paths", "",
              f"- executorch's Python runtime here: {extra.get('python_runtime')}"]
    for r in rows:
        if "aoti_f16" in r:
            cell = r["aoti_f16"]
            lines.append(f"- AOTInductor, {r['model']} batch {r['batch']} float16: "
                         + (cell["error"] if "error" in cell else
                            f"{cell['median']:.1f} us (AOTI / Ember: {ratio(cell, r.get('ember_f16'))}; "
                            f"built in {cell['build_s']:.0f} s; error against eager float16 "
                            f"{cell['rel_error']:.1e})"))
        for key, value in r.items():
            if key.endswith("_error") and isinstance(value, str):
                lines.append(f"- {r['model']} batch {r['batch']}: {key}: {value}")
    profiles = [r for r in rows if r.get("profile")]
    if profiles:
        lines += ["", "## Where Ember's time goes (EMBER_CUDA_PROFILE=1, float16)", ""]
        for r in profiles:
            lines += [f"### {r['model']} batch {r['batch']}", "", "```", r["profile"], "```", ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

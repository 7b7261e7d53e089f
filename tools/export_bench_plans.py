"""Export the Ember plans of bench models, for timing the engine alone on a GPU.

    python tools/export_bench_plans.py --out DIR MODEL:BATCH [MODEL:BATCH ...]

MODEL is one of bench/run_bench.py's (mlp, mlp_tanh, resnet18, encoder, decoder), built
with the same weights and example input, in float16. Each Ember partition's plan (what
the runtime hands the engine) is written to DIR/<model>_b<batch>_f16.plan, a second
partition's with a suffix 1, 2, ... Exporting needs no GPU. On the GPU machine, copy the
plans next to the engine tests' op plans and time one:

    cp DIR/*.plan build/tests/cuda/cuda_ops/
    build/tests/cuda/test_cuda_ops build/tests/cuda/cuda_ops time=resnet18_b64_f16

(`EMBER_CUDA_PROFILE=1` adds the per-step profile and the init phases.) A variant of an
engine kernel is then a rebuild of the engine and a rerun, with no export, wheel or
ExecuTorch on that machine; the tenth session's conv measurements in bench/RESULTS.md
were taken this way. The numbers are the C API's graph replays, not the bench's
ExecuTorch execute: use bench/run_bench.py for the table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "bench"), str(REPO / "tests" / "models"), str(REPO / "python")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the .plan files")
    parser.add_argument("models", nargs="+", metavar="MODEL:BATCH")
    args = parser.parse_args()

    import run_bench
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    from ember.backend import BACKEND_ID
    from ember.partitioner import EmberPartitioner

    jobs = []
    for spec in args.models:
        name, _, batch = spec.partition(":")
        if not batch.isdigit() or int(batch) < 1:
            parser.error(f"{spec!r}: expected MODEL:BATCH with a batch of 1 or more, e.g. resnet18:64")
        jobs.append((name, int(batch)))
    args.out.mkdir(parents=True, exist_ok=True)
    for name, batch in jobs:
        try:
            model = run_bench.build(name).to(torch.float16)
        except ValueError:
            print(f"error: unknown model {name!r}; bench/run_bench.py has mlp, mlp_tanh, "
                  "resnet18, encoder, decoder", file=sys.stderr)
            return 2
        x = run_bench.cast_input(run_bench.example_input(name, batch), torch.float16)
        with torch.no_grad():
            exported = torch.export.export(model.eval(), (x,))
            edge = to_edge_transform_and_lower(exported, partitioner=[EmberPartitioner()])
        graph = edge.exported_program().graph_module
        written = 0
        for node in graph.graph.nodes:
            if node.op != "get_attr":
                continue
            module = getattr(graph, node.target)
            if not isinstance(module, LoweredBackendModule) or module.backend_id != BACKEND_ID:
                continue
            suffix = "" if written == 0 else str(written)
            path = args.out / f"{name}_b{batch}_f16{suffix}.plan"
            path.write_bytes(bytes(module.processed_bytes))
            written += 1
            print(f"{path}: {len(module.processed_bytes)} bytes")
        if written == 0:
            print(f"error: {name} at batch {batch} has no Ember partition", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

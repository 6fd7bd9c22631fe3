"""Preprocessing with a memory budget: spill path vs in-memory path, measured in one run.

    .venv/bin/python benchmarks/bench_spill.py [--size 1GB] [--budget 128MB] [--workers 2]
        [--repeat 2] [--distinct SHARE] [--keep DIR] [--no-memory-run]

Generates synthetic McAuley input (engine.synth), then runs `python -m engine.preprocess`
interleaved: once with a budget far above the state (the in-memory path) and once with
--budget (the spill path), --repeat times each. For each run: wall seconds and the peak resident
memory summed over the whole process tree (sampled every 50 ms). Prints the spill path's
throughput as a fraction of the in-memory path's (best runs; target >= 0.85), both peaks
(target: spill peak <= 1.5 x the budget's scale, i.e. <= 1.5 GB at a 1 GB budget), and whether
the outputs are identical (dataset.h5 and vocab.json byte for byte; stats.json apart from
timings, budget and spill counters). --no-memory-run runs only the spill path (for inputs too
large for the in-memory path), checking the peak only.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_preprocess import _tree_rss  # noqa: E402

from engine.synth import generate, parse_size  # noqa: E402

VOLATILE = ("seconds", "mb_per_s", "cpu_seconds", "memory_budget", "spill")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(
    path: Path, out: Path, workers: int, budget: int
) -> tuple[float, int, dict[str, Any], float]:
    """(wall s, peak tree RSS bytes, stats, CPU s of the whole process tree) of one
    `python -m engine.preprocess` run."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "engine.preprocess", "-i", str(path), "-o", str(out), "--json",
           "--workers", str(workers), "--memory-budget", str(budget)]  # fmt: skip
    start, cpu = time.perf_counter(), _children_cpu()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, _ = proc.communicate()
    wall = time.perf_counter() - start
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"preprocess failed with exit code {proc.returncode}")
    return wall, peak[0], json.loads(stdout), _children_cpu() - cpu


def identical(a: Path, b: Path) -> dict[str, bool]:
    """Which outputs of two runs are identical."""
    sa, sb = (json.loads((d / "stats.json").read_text()) for d in (a, b))
    for key in VOLATILE:
        sa.pop(key, None)
        sb.pop(key, None)
    return {
        "dataset_h5_bytes": filecmp.cmp(a / "dataset.h5", b / "dataset.h5", shallow=False),
        "vocab_json_bytes": filecmp.cmp(a / "vocab.json", b / "vocab.json", shallow=False),
        "stats_json": sa == sb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="1GB")
    parser.add_argument("--budget", default="128MB")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--distinct", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", default=None, help="folder to keep/reuse the generated input")
    parser.add_argument("--no-memory-run", action="store_true")
    args = parser.parse_args()
    size, budget = parse_size(args.size), parse_size(args.budget, name="--budget")
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_spill_"))
    work.mkdir(parents=True, exist_ok=True)
    tag = f"{size}" + (f"-d{args.distinct}" if args.distinct else "")
    path = work / f"synth-{tag}.jsonl"
    if not path.exists():
        t = time.perf_counter()
        generate(path, size, seed=args.seed, distinct=args.distinct)
        print(f"generated {path} in {time.perf_counter() - t:.0f} s", flush=True)
    mb = path.stat().st_size / 1e6
    runs: dict[str, list[tuple[float, int]]] = {"memory": [], "spill": []}
    cpus: dict[str, list[float]] = {"memory": [], "spill": []}
    stats: dict[str, dict[str, Any]] = {}
    kinds = ["spill"] if args.no_memory_run else ["memory", "spill"]
    for _ in range(args.repeat):  # interleaved: the machine is shared
        for kind in kinds:
            b = budget if kind == "spill" else 1 << 40
            wall, peak, stats[kind], cpu = run(path, work / f"out-{kind}", args.workers, b)
            runs[kind].append((wall, peak))
            cpus[kind].append(cpu)
            print(f"{kind}: {wall:.1f} s, CPU {cpu:.1f} s, peak RSS {peak / 1e6:.0f} MB, "
                  f"spill {stats[kind].get('spill')}", flush=True)  # fmt: skip
    result: dict[str, Any] = {
        "input_mb": round(mb),
        "records": stats["spill"]["read"],
        "distinct": stats["spill"]["distinct"],
        "budget_mb": round(budget / 1e6),
        "workers": args.workers,
        "spill": stats["spill"]["spill"],
        "spill_s": [round(w, 1) for w, _ in runs["spill"]],
        "spill_mb_s": round(mb / min(w for w, _ in runs["spill"]), 1),
        "spill_peak_rss_mb": round(max(p for _, p in runs["spill"]) / 1e6),
        "load_average_1min": round(os.getloadavg()[0], 1),
    }
    if not args.no_memory_run:
        best_mem = min(w for w, _ in runs["memory"])
        best_spill = min(w for w, _ in runs["spill"])
        result.update(
            memory_s=[round(w, 1) for w, _ in runs["memory"]],
            memory_mb_s=round(mb / best_mem, 1),
            memory_peak_rss_mb=round(max(p for _, p in runs["memory"]) / 1e6),
            throughput_ratio=round(best_mem / best_spill, 3),
            memory_cpu_s=[round(c, 1) for c in cpus["memory"]],
            spill_cpu_s=[round(c, 1) for c in cpus["spill"]],
            cpu_throughput_ratio=round(min(cpus["memory"]) / min(cpus["spill"]), 3),
            identical=identical(work / "out-memory", work / "out-spill"),
        )
        print(
            f"spill path throughput / in-memory path: {result['throughput_ratio']:.3f} "
            f"(best {best_spill:.1f} vs {best_mem:.1f} s; target >= 0.85); per CPU-second: "
            f"{result['cpu_throughput_ratio']:.3f} (best {min(cpus['spill']):.1f} vs "
            f"{min(cpus['memory']):.1f} CPU-s)"
        )
        print(f"outputs identical: {result['identical']}")
    print(
        f"peak RSS of the process tree: spill {result['spill_peak_rss_mb']} MB at budget "
        f"{result['budget_mb']} MB" + (f"; in-memory {result['memory_peak_rss_mb']} MB"
                                       if not args.no_memory_run else "")
    )  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()

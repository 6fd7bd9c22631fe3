"""Preprocessing throughput, scaling and memory, as ratios measured in one run.

    .venv/bin/python benchmarks/bench_preprocess.py [--size 256MB] [--rss-size 1GB] [--keep DIR]

1. Generates McAuley-format input on the fly (engine.synth; ≥ 200 MB).
2. Bare tokenise loop (orjson + bytes.translate + split, one core) over the same file: MB/s.
3. End to end (parse → clean → dedupe → encode → HDF5) with 1 worker: MB/s per core and its
   fraction of the bare loop (target ≥ 40 MB/s/core and ≥ 0.5).
4. The same with 2 workers: speed-up over 1 worker (target ≥ 1.7× on 2 cores), measured two
   ways, interleaved: (a) each run in a fresh process, as `sentitop preprocess` runs (imports
   done before the clock starts, so both start with a cold heap) — the figure the target is
   judged on; (b) in this process, as before (the 1-worker run reuses the heap earlier runs
   grew, which no real run gets). Wall-clock figures need a quiet machine; CPU seconds are
   printed too, per stage summed over the processes (stats.json cpu_seconds: map, shuffle,
   reduce, encode in the workers; parent and combine serial), with a projection for idle
   cores: CPU(1 worker) / (serial + workers' stages / 2).
5. Peak RSS (sum over the process tree, sampled) at --rss-size input with all cores
   (target ≤ 1.5 GB at 1 GB), and the peak at the smaller input for comparison.
6. The host's own two-process capacity, interleaved with the fresh-process runs: the bare loop
   in one fresh process alone, and two copies at once (2 × alone ÷ the pair's wall time); the
   runner's 2-worker speed-up as a fraction of it (issue 12 target ≥ 0.9).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.config import PreprocessConfig  # noqa: E402
from engine.preprocess import run_preprocess  # noqa: E402
from engine.preprocess.text import CLEAN_TABLE  # noqa: E402


def parse_size(text: str) -> int:
    """'256MB' / '1GB' / '1000000' → bytes (decimal units)."""
    units = {"KB": 10**3, "MB": 10**6, "GB": 10**9}
    text = text.strip().upper()
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def make_input(path: Path, size: int, seed: int) -> None:
    """McAuley 2014 lines of about `size` bytes (engine.synth)."""
    from engine.synth import generate

    generate(path, size, seed=seed)


def bare_tokenise(path: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of the bare loop: read blocks, split lines, orjson, translate, split."""
    loads, table = orjson.loads, CLEAN_TABLE
    start, cpu = time.perf_counter(), time.process_time()
    words = 0
    with open(path, "rb") as fh:
        carry = b""
        while chunk := fh.read(8 << 20):
            cut = chunk.rfind(b"\n")
            lines = (carry + chunk[:cut]).split(b"\n")
            carry = chunk[cut + 1 :]
            for line in lines:
                try:  # noqa: SIM105 (a try block is cheaper than contextlib.suppress here)
                    words += len(loads(line)["reviewText"].encode().translate(table).split())
                except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
                    pass
    return time.perf_counter() - start, time.process_time() - cpu


def _cpu_seconds() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def timed_run(path: Path, out: Path, workers: int) -> tuple[float, float, float, dict[str, Any]]:
    """(wall s, CPU s of this process, CPU s of its worker processes, stats) of one run."""
    cfg = PreprocessConfig(inputs=[str(path)], output=str(out), workers=workers)
    (own, kids), start = _cpu_seconds(), time.perf_counter()
    stats = run_preprocess(cfg)
    wall = time.perf_counter() - start
    for child in multiprocessing.active_children():  # reaped, so their CPU time is counted
        child.join()
    own2, kids2 = _cpu_seconds()
    return wall, own2 - own, kids2 - kids, stats


FRESH = """
import json, multiprocessing, resource, sys, time
from engine.config import PreprocessConfig
from engine.preprocess.pipeline import run_preprocess  # its imports before the clock starts
cfg = PreprocessConfig(inputs=[sys.argv[1]], output=sys.argv[2], workers=int(sys.argv[3]))
start, cpu = time.perf_counter(), time.process_time()
stats = run_preprocess(cfg)
wall = time.perf_counter() - start
for child in multiprocessing.active_children():
    child.join()
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = time.process_time() - cpu + kids.ru_utime + kids.ru_stime
print(json.dumps({"wall": wall, "cpu": cpu, "kept": stats["kept"]}))
"""


BARE = """
import sys, time
sys.path.insert(0, sys.argv[2])
from bench_preprocess import bare_tokenise
from pathlib import Path
print(bare_tokenise(Path(sys.argv[1]))[0])
"""


def host_capacity(path: Path) -> tuple[float, float]:
    """(wall s of the bare loop alone, wall s of two copies at once), each copy a fresh
    process started the same way as fresh_run's, timed inside the process."""
    here = str(Path(__file__).resolve().parent)
    cmd = [sys.executable, "-c", BARE, str(path), here]

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)

    alone = float(start().communicate()[0])
    pair = [start(), start()]
    both = max(float(p.communicate()[0]) for p in pair)
    return alone, both


def fresh_run(path: Path, out: Path, workers: int) -> tuple[float, float, float]:
    """(wall s of the job, its CPU s, wall s of the whole command) in a fresh process: imports
    done before the clock starts, so the heap is as cold as a `sentitop preprocess` run's."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", FRESH, str(path), str(out), str(workers)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    command = time.perf_counter() - start
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return got["wall"], got["cpu"], command


def _tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack.extend(children.get(p, []))
    return total


def peak_rss(path: Path, out: Path, workers: int) -> tuple[int, float]:
    """(peak summed RSS in bytes, seconds) of `python -m engine.preprocess` on `path`."""
    cmd = [
        sys.executable,
        "-m",
        "engine.preprocess",
        "-i",
        str(path),
        "-o",
        str(out),
        "--json",
        "--workers",
        str(workers),
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    rc = proc.wait()
    sampler.join()
    if rc:
        raise SystemExit(f"preprocess failed with exit code {rc}")
    return peak[0], time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="256MB", help="input size for throughput (>= 200MB)")
    parser.add_argument("--rss-size", default="1GB", help="input size for the memory check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2, help="measurements (best is kept)")
    parser.add_argument("--keep", default=None, help="folder to keep/reuse the generated inputs")
    args = parser.parse_args()
    size, rss_size = parse_size(args.size), parse_size(args.rss_size)
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_preprocess_"))
    work.mkdir(parents=True, exist_ok=True)
    small, big = work / f"synth-{size}.jsonl", work / f"synth-{rss_size}.jsonl"
    for path, n in ((small, size), (big, rss_size)):
        if not path.exists():
            t = time.perf_counter()
            make_input(path, n, args.seed)
            took = time.perf_counter() - t
            print(f"generated {path} ({path.stat().st_size / 1e6:.0f} MB) in {took:.0f} s")
    mb = small.stat().st_size / 1e6

    bare_wall, bare_cpu, one_wall, one_cpu, two_wall, two_cpu = [], [], [], [], [], []
    fresh: dict[int, list[tuple[float, float, float]]] = {1: [], 2: []}
    stages1: list[dict[str, float]] = []
    stages2: list[dict[str, float]] = []
    capacity: list[tuple[float, float]] = []
    for _ in range(args.repeat):  # interleaved, best of each: the machine may be shared
        capacity.append(host_capacity(small))
        wall, cpu = bare_tokenise(small)
        bare_wall.append(wall)
        bare_cpu.append(cpu)
        for workers in (1, 2):
            fresh[workers].append(fresh_run(small, work / f"fresh{workers}", workers))
        wall, own, kids, stats = timed_run(small, work / "out1", 1)
        one_wall.append(wall)
        one_cpu.append(own + kids)
        stages1.append(stats["cpu_seconds"])
        wall, own, kids, stats2 = timed_run(small, work / "out2", 2)
        two_wall.append(wall)
        two_cpu.append(own + kids)
        stages2.append(stats2["cpu_seconds"])
    assert stats["kept"] == stats2["kept"]
    rss_small, _ = peak_rss(small, work / "out3", os.cpu_count() or 1)
    rss_big, big_s = peak_rss(big, work / "out4", os.cpu_count() or 1)
    bare_rate, one_rate, two_rate = mb / min(bare_wall), mb / min(one_wall), mb / min(two_wall)
    bare_cpu_rate, one_cpu_rate = mb / min(bare_cpu), mb / min(one_cpu)
    best = min(range(args.repeat), key=lambda i: two_cpu[i])
    parallel = sum(stages2[best].get(k, 0.0) for k in ("map", "shuffle", "reduce", "encode"))
    projected = min(one_cpu) / (two_cpu[best] - parallel / 2)
    fresh_best = {w: tuple(min(run[k] for run in fresh[w]) for k in range(3)) for w in (1, 2)}
    fresh_median = {w: statistics.median(run[0] for run in fresh[w]) for w in (1, 2)}
    fresh_speedup = fresh_best[1][0] / fresh_best[2][0]
    alone, pair = min(c[0] for c in capacity), min(c[1] for c in capacity)
    host = 2 * alone / pair
    result = {
        "input_mb": round(mb, 1),
        "records": stats["read"],
        "distinct": stats["distinct"],
        "bare_loop_mb_s_wall": round(bare_rate, 1),
        "bare_loop_mb_s_cpu": round(bare_cpu_rate, 1),
        "one_worker_mb_s_wall": round(one_rate, 1),
        "one_worker_mb_s_cpu": round(one_cpu_rate, 1),
        "fraction_of_bare_wall": round(one_rate / bare_rate, 3),
        "fraction_of_bare_cpu": round(one_cpu_rate / bare_cpu_rate, 3),
        "two_workers_mb_s_wall": round(two_rate, 1),
        "speedup_2_vs_1_fresh_wall": round(fresh_speedup, 2),
        "speedup_2_vs_1_fresh_median_wall": round(fresh_median[1] / fresh_median[2], 2),
        "host_two_process_capacity": round(host, 2),
        "host_capacity_runs_s": [[round(a, 2), round(b, 2)] for a, b in capacity],
        "fraction_of_host_capacity": round(fresh_speedup / host, 3),
        "speedup_2_vs_1_fresh_cpu_projected": round(2 * fresh_best[1][1] / fresh_best[2][1], 2),
        "speedup_2_vs_1_fresh_command_wall": round(fresh_best[1][2] / fresh_best[2][2], 2),
        "fresh_s_1_worker": [round(x, 2) for x in fresh_best[1]],
        "fresh_s_2_workers": [round(x, 2) for x in fresh_best[2]],
        "speedup_2_vs_1_in_process_wall": round(min(one_wall) / min(two_wall), 2),
        "cpu_s_1_worker": round(min(one_cpu), 2),
        "cpu_s_2_workers": round(two_cpu[best], 2),
        "speedup_2_vs_1_in_process_projected_idle": round(projected, 2),
        "stage_cpu_s_1_worker": stages1[min(range(args.repeat), key=lambda i: one_cpu[i])],
        "stage_cpu_s_2_workers": stages2[best],
        "load_average_1min": round(os.getloadavg()[0], 1),
        "peak_rss_mb_small": round(rss_small / 1e6),
        "peak_rss_mb_big": round(rss_big / 1e6),
        "big_input_mb": round(big.stat().st_size / 1e6),
        "big_seconds": round(big_s, 1),
        "cpus": os.cpu_count(),
    }
    print(
        f"input {mb:.0f} MB, {stats['read']:,} records, {stats['distinct']:,} distinct texts; "
        f"best of {args.repeat}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"bare tokenise loop (1 core):  {bare_rate:6.1f} MB/s wall, "
        f"{bare_cpu_rate:6.1f} MB/s per CPU-s"
    )
    print(
        f"end to end, 1 worker:         {one_rate:6.1f} MB/s wall, "
        f"{one_cpu_rate:6.1f} MB/s per CPU-s"
        f"  (target >= 40 MB/s per core)"
    )
    print(
        f"  fraction of the bare loop:  {one_rate / bare_rate:.2f} wall, "
        f"{one_cpu_rate / bare_cpu_rate:.2f} CPU  (target >= 0.5)"
    )
    print(
        f"2 workers vs 1, fresh processes (the job; imports before the clock): "
        f"{fresh_speedup:.2f}x wall (best {fresh_best[1][0]:.2f} vs {fresh_best[2][0]:.2f} s; "
        f"median {fresh_median[1] / fresh_median[2]:.2f}x)  (target >= 1.7x)"
    )
    print(
        f"host two-process capacity (bare loop: 1 alone {alone:.2f} s, 2 at once {pair:.2f} s): "
        f"{host:.2f}x; runner's 2 workers / 1 = {fresh_speedup / host:.3f} of it (target >= 0.9)"
    )
    print(
        f"  CPU s {fresh_best[1][1]:.2f} vs {fresh_best[2][1]:.2f} -> "
        f"{2 * fresh_best[1][1] / fresh_best[2][1]:.2f}x on 2 idle cores; whole command "
        f"(interpreter start and imports too): {fresh_best[1][2] / fresh_best[2][2]:.2f}x"
    )
    print(
        f"2 workers vs 1, in this process:  {two_rate:6.1f} MB/s wall = "
        f"{min(one_wall) / min(two_wall):.2f}x one worker (whose heap earlier runs grew)"
    )
    print(
        f"  CPU s: 1 worker {min(one_cpu):.2f}; 2 workers {two_cpu[best]:.2f} "
        f"({parallel:.2f} in the workers' stages) -> {projected:.2f}x on 2 idle cores"
    )
    for name in ("stage_cpu_s_1_worker", "stage_cpu_s_2_workers"):
        stages = result[name]
        assert isinstance(stages, dict)
        print(f"  {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in stages.items()))
    print(
        f"peak RSS (all processes):     {rss_small / 1e6:6.0f} MB at {mb:.0f} MB input, "
        f"{rss_big / 1e6:.0f} MB at {big.stat().st_size / 1e6:.0f} MB input (target <= 1500 MB)"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()

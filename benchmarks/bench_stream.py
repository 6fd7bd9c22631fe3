"""Training from a split larger than a rank may hold: process-tree memory of a 2-rank run.

Writes a synthetic dataset.h5 whose train split holds ``--rows`` × ``--seq-len`` uint16 ids
(default 16 M × 100 = 3.2 GB), then runs ``sentitop train --nproc 2`` on it (a cold node:
the ranks first make the node's copy in an empty cache) and samples, every 0.2 s, the
anonymous resident memory (RssAnon: what processes hold themselves, not the shared,
reclaimable page cache of the memory-mapped copy) of the whole process tree: the CLI, its
launcher and both ranks. It stops the run after ``--steps`` logged steps and prints the
peak, the peak of each process, the split's size and their ratio.

    nice -n 10 .venv/bin/python benchmarks/bench_stream.py [--rows 16000000] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_loader import write_dataset

ROOT = Path(__file__).resolve().parents[1]


def _status(pid: int) -> tuple[int, int] | None:
    """(parent pid, RssAnon bytes) of ``pid``, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    rss = fields.get("RssAnon", "0 kB").split()[0]
    return int(fields["PPid"]), int(rss) * 1024


def tree_rss(root: int) -> dict[int, int]:
    """RssAnon of ``root`` and every descendant, by pid."""
    procs = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _status(int(entry))) is not None:
            procs[int(entry)] = st
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in procs:
            out[pid] = procs[pid][1]
            todo += [p for p, (ppid, _) in procs.items() if ppid == pid]
    return out


def count_steps(events: Path) -> int:
    """`step` events written so far."""
    try:
        return events.read_text().count('"type":"step"')
    except OSError:
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=16_000_000)
    parser.add_argument("--seq-len", type=int, default=100)
    parser.add_argument("--steps", type=int, default=3, help="logged steps to wait for")
    parser.add_argument("--dir", help="scratch folder (default: a temporary one)")
    parser.add_argument("--timeout", type=float, default=480)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(dir=args.dir, prefix="bench-stream-"))
    try:
        t0 = time.perf_counter()
        data = write_dataset(tmp / "data", args.rows, args.seq_len, test_rows=20_000)
        write_s = time.perf_counter() - t0
        run = tmp / "run"
        env = dict(os.environ, SENTITOP_CACHE_DIR=str(tmp / "cache"), PYTHONPATH=str(ROOT))
        cmd = [sys.executable, "-m", "tui.cli", "train", "--data", str(data), "--run-dir",
               str(run), "--nproc", "2", "--epochs", "1", "--batch-size", "256", "--model",
               "seed", "--log-every", "5", "--checkpoint-every-min", "0", "--threads", "1",
               "--json"]  # fmt: skip
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        peak, per_pid, first_step_s = 0, {}, None
        while proc.poll() is None and time.perf_counter() - start < args.timeout:
            sizes = tree_rss(proc.pid)
            peak = max(peak, sum(sizes.values()))
            for pid, size in sizes.items():
                per_pid[pid] = max(per_pid.get(pid, 0), size)
            steps = count_steps(run / "events.jsonl")
            if steps and first_step_s is None:
                first_step_s = time.perf_counter() - start
            if steps >= args.steps:
                break
            time.sleep(0.2)
        if proc.poll() is None:  # else it ended (failed) first: its stderr says why
            os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        if not (run / "events.jsonl").is_file():
            raise SystemExit(f"the run wrote no events:\n{err[-3000:]}")
        events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
        stage = next((e for e in events if e.get("type") == "train_start"), {})
        step_events = [e for e in events if e.get("type") == "step"]
        if len(step_events) < args.steps:
            raise SystemExit(f"the run did not reach {args.steps} logged steps:\n{err[-3000:]}")
        ids = args.rows * args.seq_len * 2
        result = {
            "train_ids_gb": round(ids / 1e9, 2),
            "write_dataset_s": round(write_s, 1),
            "copy_s_rank0": stage.get("copy_s"),
            "first_step_event_s": round(first_step_s or 0, 1),
            "peak_tree_rss_anon_mb": round(peak / 1e6),
            "peak_rss_anon_mb_per_process": sorted(round(v / 1e6) for v in per_pid.values()),
            "ids_over_peak_tree": round(ids / peak, 2),
            "step_rss_mb": step_events[-1].get("rss_mb"),
            "step_read_mb_s": step_events[-1].get("read_mb_s"),
            "step_samples_per_s": step_events[-1].get("samples_per_s"),
            "load_avg_1m": os.getloadavg()[0],
        }
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

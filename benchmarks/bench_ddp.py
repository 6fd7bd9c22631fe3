"""2-process DDP on CPU (gloo): samples/s and scaling efficiency vs 1 process, same threads.

Three runs through ``engine.sentiment.train.launch_local`` on the same data, in one invocation:

* 1 process × T threads (T = cores);
* 2 processes × T/2 threads, ``grad_sync = overlap`` (DDP buckets all-reduced during backward);
* 2 processes × T/2 threads, ``grad_sync = separate`` (backward, then one flat all-reduce),
  whose ``phase`` events split out the all-reduce share of a step.

Samples/s are of the last epoch (training only). Scaling efficiency = 2-process samples/s /
1-process samples/s (same total threads, so 1.0 is perfect).

    .venv/bin/python benchmarks/bench_ddp.py [--rows 4096] [--epochs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_loader import write_dataset

from engine.config import ModelConfig, TrainConfig
from engine.events import parse_event_line
from engine.launch import default_threads
from engine.sentiment.train import launch_local


def run(
    data: Path, name: str, nproc: int, threads: int, args: argparse.Namespace, grad_sync: str
) -> dict[str, Any]:
    events: list[dict[str, Any]] = []

    def on_line(rank: int, stream: str, line: str) -> None:
        event = parse_event_line(line) if stream == "stdout" else None
        if event is not None:
            events.append(event)

    cfg = TrainConfig(
        data_dir=str(data),
        data_cache=str(data / "cache"),
        run_dir=str(data / name),
        epochs=args.epochs,
        batch_size=args.batch,
        model=ModelConfig(preset=args.model),
        checkpoint_every_min=0,
        log_every=50,
        eval_every=100,
        threads=threads,
        grad_sync=grad_sync,  # type: ignore[arg-type]
    )
    # Passive OpenMP waiting: on a shared, oversubscribed machine spinning threads of the
    # multi-threaded 1-process run would otherwise crawl (same setting for every run).
    env = {**os.environ, "OMP_WAIT_POLICY": args.omp_wait_policy}
    launch_local(cfg, nproc, on_line=on_line, threads=threads, env=env)
    last = args.epochs - 1
    phases = [e for e in events if e["type"] == "phase" and e["epoch"] == last]
    keys = ("data", "h2d", "forward", "backward", "allreduce_opt")
    share = {
        k: sum(p[k] for p in phases) / sum(sum(p[x] for x in keys) for p in phases) for k in keys
    }
    epoch = next(e for e in events if e["type"] == "epoch" and e["epoch"] == last)
    return {
        "samples_per_s": round(epoch["samples_per_s"]),
        "phase_share": {k: round(v, 3) for k, v in share.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--omp-wait-policy", default="PASSIVE", choices=["PASSIVE", "ACTIVE"])
    parser.add_argument("--seq-len", type=int, default=48)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--model", default="seed", choices=["seed", "default"])
    args = parser.parse_args()
    cores = default_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        write_dataset(data, args.rows, args.seq_len)
        one = run(data, "one", 1, cores, args, "overlap")
        two = run(data, "two", 2, max(1, cores // 2), args, "overlap")
        sep = run(data, "sep", 2, max(1, cores // 2), args, "separate")
    result = {
        "cores": cores,
        "rows": args.rows,
        "seq_len": args.seq_len,
        "batch": args.batch,
        "model": args.model,
        "omp_wait_policy": args.omp_wait_policy,
        "one_process": one,
        "two_process_overlap": two,
        "two_process_separate": sep,
        "scaling_efficiency": round(two["samples_per_s"] / one["samples_per_s"], 3),
        "scaling_efficiency_separate": round(sep["samples_per_s"] / one["samples_per_s"], 3),
        "allreduce_share_estimate": round(
            sep["phase_share"]["allreduce_opt"] - one["phase_share"]["allreduce_opt"], 3
        ),
        "load_avg_1m": os.getloadavg()[0],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

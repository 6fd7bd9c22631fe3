"""Planner: predict a local run's wall time from a measurement sweep, run it, compare.

1. A strong sweep of the tiny workload (tests/review/tiny.yaml: 1 thread per rank) at 1 and 2
   processes, MEASURE_EPOCHS epoch(s) each, recorded in a fresh runs folder.
2. `plan` of the target (--nproc processes, --epochs epochs; other epochs than the sweep's, so
   the per-epoch model is extrapolated) from those runs only.
3. The target run itself (`execute_run`), then predicted / actual wall time (target: within 25 %).

Also prints the planner's leave-one-out errors on the sweep runs, and writes the sweep's
review report (--report DIR). Timings on a shared 2-core machine are noisy: run it a few times.

    .venv/bin/python benchmarks/bench_planner.py                    # ~3-6 minutes on 2 cores
    .venv/bin/python benchmarks/bench_planner.py --json --report /tmp/planner-report
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from remote.profile import load_profile
from remote.review.planner import plan_profile
from remote.review.report import write_report
from remote.runner import execute_run
from remote.runs_store import list_runs, load_run
from remote.sweep import plan_sweep, run_sweep

TINY = Path(__file__).resolve().parents[1] / "tests" / "review" / "tiny.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2, help="target processes (default 2)")
    parser.add_argument("--epochs", type=int, default=3, help="target epochs (default 3)")
    parser.add_argument("--measure-epochs", type=int, default=2, help="sweep epochs (default 2)")
    parser.add_argument("--workdir", type=Path, help="keep runs and cache here (default: temp)")
    parser.add_argument("--cache-dir", type=Path, help="data cache (default: WORKDIR/cache)")
    parser.add_argument("--report", type=Path, help="write the sweep's report into this folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-planner-"))
    os.environ["SENTITOP_CACHE_DIR"] = str(args.cache_dir or work / "cache")
    runs_dir = work / "runs"
    base = load_profile(TINY)
    started = time.time()
    sweep = plan_sweep(base, [1, 2], epochs=args.measure_epochs)
    outcomes = asyncio.run(run_sweep(sweep, runs_dir=runs_dir))
    if any(o.status != "ok" for o in outcomes):
        print("measurement sweep failed:", [o.summary.get("reason") for o in outcomes])
        return 1
    measured = list_runs(runs_dir)
    target = plan_sweep(base, [args.nproc], epochs=args.epochs).profiles[0]
    plan = plan_profile(target, measured, epochs=args.epochs)
    assert plan.target_wall_s is not None
    outcome = asyncio.run(execute_run(target, runs_dir=work / "target-runs"))
    if outcome.status != "ok":
        print("target run failed:", outcome.summary.get("reason"))
        return 1
    actual = load_run(outcome.run_dir)
    assert actual.wall_s is not None
    ratio = plan.target_wall_s / actual.wall_s
    epoch_ratio = plan.target.epoch_s / actual.epoch_s
    if args.report:
        write_report(measured, args.report)
    result = {
        "target": f"{args.nproc} process(es), {args.epochs} epoch(s)",
        "predicted_wall_s": round(plan.target_wall_s, 1),
        "actual_wall_s": round(actual.wall_s, 1),
        "wall_ratio": round(ratio, 3),
        "wall_error": round(ratio - 1, 3),
        "within_25pct": abs(ratio - 1) <= 0.25,
        "predicted_epoch_s": round(plan.target.epoch_s, 2),
        "actual_epoch_s": round(actual.epoch_s, 2),
        "epoch_ratio": round(epoch_ratio, 3),
        "predicted_parts_s": {k: round(v, 1) for k, v in plan.wall_parts.items()},
        "actual_parts_s": {
            "train": round(actual.train_s, 1),
            "eval": round(actual.eval_s, 1),
            "prep": round(actual.prep_s, 1),
            "rest": round(actual.wall_s - actual.train_s - actual.eval_s - actual.prep_s, 1),
        },
        "sweep_wall_s": [round(r.wall_s or 0, 1) for r in measured],
        "sweep_epoch_s": [round(r.epoch_s, 2) for r in measured],
        "leave_one_out": [
            {"run": e.run_id, "what": e.what, "error": round(e.error, 3)} for e in plan.errors
        ],
        "inputs": plan.inputs,
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "bench_s": round(time.time() - started, 1),
        "workdir": str(work),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:>20}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

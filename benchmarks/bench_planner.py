"""Planner: predict a local run's wall time from a measurement sweep, run it, compare.

1. A strong sweep of the tiny workload (tests/review/tiny.yaml: 1 thread per rank) at 1 and 2
   processes, MEASURE_EPOCHS epoch(s) each, recorded in a fresh runs folder.
2. `plan` of the target (--nproc processes, --epochs epochs; other epochs than the sweep's, so
   the per-epoch model is extrapolated) from those runs only.
3. The target run itself (`execute_run`), then predicted / actual wall time (target: within 25 %).

Also prints the planner's leave-one-out errors on the sweep runs, and writes the sweep's
review report (--report DIR). Timings on a shared 2-core machine are noisy: run it a few times.

--backtest (seconds, no runs): the GPU model's back-tests instead — every bundled measured rate
predicted from every other one by each device rule (memory bandwidth, FP32 peak, same speed)
and the workload rule; the old study's runs each predicted from the others (leave one out)
with the planner's band; and the seed model's 10 epochs on one GPU of every table model.

    .venv/bin/python benchmarks/bench_planner.py                    # ~3-6 minutes on 2 cores
    .venv/bin/python benchmarks/bench_planner.py --json --report /tmp/planner-report
    .venv/bin/python benchmarks/bench_planner.py --backtest
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
    parser.add_argument("--backtest", action="store_true", help="GPU model back-tests only")
    args = parser.parse_args()
    if args.backtest:
        return backtest(as_json=args.json)

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


def backtest(*, as_json: bool) -> int:
    """Print the transfer back-tests, the old study's leave-one-out and per-GPU predictions."""
    import math

    from remote.review.backtest import STUDY_SAMPLES, study_leave_one_out
    from remote.review.hardware import gpu_table
    from remote.review.transfer import (
        Workload,
        back_tests,
        band_logs,
        bundled_anchors,
        transfer_rate,
    )

    tests = back_tests()
    loo = study_leave_one_out()
    seed = Workload.of_preset("seed", 100, 512)
    per_gpu = []
    for gpu in gpu_table():
        est = transfer_rate(seed, gpu, bundled_anchors())
        hours = 10 * STUDY_SAMPLES / est.samples_per_s / 3600
        band = math.exp(est.band_log)
        per_gpu.append(
            {
                "gpu": gpu,
                "samples_per_s": round(est.samples_per_s),
                "hours_10_epochs": round(hours, 2),
                "band_h": [round(hours / band, 2), round(hours * band, 2)],
                "estimate": est.estimate,
            }
        )
    result = {
        "transfer_back_tests": [
            {
                "kind": t.kind,
                "from": t.source,
                "to": t.target,
                "rule": t.rule,
                "predicted": round(t.predicted, 1),
                "actual": round(t.actual, 1),
                "error": round(t.error, 3),
            }
            for t in tests
        ],
        "band_logs": {k: round(v, 4) for k, v in band_logs().items()},
        "study_leave_one_out": [
            {
                "run": r.run,
                "gpus": r.gpus,
                "predicted_s": round(r.predicted_s),
                "actual_s": round(r.actual_s),
                "error": round(r.error, 3),
                "band": round(r.band, 3),
                "within_band": r.within,
                "band_out_of_sample": None if r.band_out is None else round(r.band_out, 3),
                "within_out_of_sample": r.within_out,
                "basis": r.basis,
            }
            for r in loo
        ],
        "seed_10_epochs_one_gpu": per_gpu,
    }
    if as_json:
        print(json.dumps(result, indent=2))
        return 0
    print("transfer back-tests (predicted from -> to, samples/s):")
    for t in result["transfer_back_tests"]:
        print(
            f"  {t['kind']:8} {t['from']:>18} -> {t['to']:<18} {t['rule']:16} "
            f"{t['predicted']:>9} vs {t['actual']:>9} ({t['error']:+.1%})"
        )
    print("band (|log error|, planner rules):", result["band_logs"])
    print("old study, leave one out (10 epochs, s):")
    for r in result["study_leave_one_out"]:
        print(
            f"  {r['run']:20} {r['gpus']} GPU(s) predicted {r['predicted_s']:>7,} actual "
            f"{r['actual_s']:>7,} ({r['error']:+.1%}) band x{r['band']} "
            f"within: {r['within_band']}; "
            f"out of sample: x{r['band_out_of_sample']} within: {r['within_out_of_sample']}"
        )
    print("seed model, 10 epochs of 19.17 M samples on one GPU:")
    for g in per_gpu:
        print(
            f"  {g['gpu']:5} {g['samples_per_s']:>9,} samples/s  {g['hours_10_epochs']:>6} h  "
            f"band {g['band_h'][0]}-{g['band_h'][1]} h  "
            + ("estimate" if g["estimate"] else "measured")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

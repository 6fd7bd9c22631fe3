"""The README's main job over several seeds, random batches vs length buckets, alternated.

    .venv/bin/python benchmarks/bench_demo_seeds.py [--seeds 10] [--json out.json]

For each seed 0..N-1, `sentitop run` of profiles/local.yaml with `train.seed` set and
`train.length_buckets` false, then true (one cache, so the data is preprocessed once). Prints each
run's test accuracy and wall time, then the mean accuracy of each order with its spread over
seeds, the paired difference with its standard error, and the median wall-time ratio
(random / bucketed): ratios of runs made minutes apart on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def run_once(work: Path, seed: int, buckets: bool) -> tuple[float, float]:
    """(test accuracy, wall seconds) of the main job with this seed and order."""
    profile = yaml.safe_load((ROOT / "profiles" / "local.yaml").read_text())
    profile["train"].update(seed=seed, length_buckets=buckets)
    path = work / f"local-s{seed}-{'buckets' if buckets else 'random'}.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    env = dict(os.environ, SENTITOP_CACHE_DIR=str(work / "cache"))
    done = subprocess.run(
        [str(Path(sys.executable).parent / "sentitop"), "run", str(path), "--json",
         "--runs-dir", str(work / "runs")],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"seed {seed} buckets={buckets}: exit {done.returncode}\n{done.stderr}")
    summary = json.loads(done.stdout)
    if summary.get("status") != "ok" or not summary.get("accuracy"):
        raise SystemExit(f"seed {seed} buckets={buckets}: no usable result: {summary}")
    return float(summary["accuracy"]), float(summary["wall_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="demo-seeds-") as tmp:
        for seed in range(args.seeds):
            random_acc, random_s = run_once(Path(tmp), seed, False)
            bucket_acc, bucket_s = run_once(Path(tmp), seed, True)
            rows.append((seed, random_acc, bucket_acc, random_s, bucket_s))
            print(f"seed {seed}: random {random_acc:.4f} {random_s:.1f} s, "
                  f"buckets {bucket_acc:.4f} {bucket_s:.1f} s", flush=True)  # fmt: skip
    plain, bucketed = [r[1] for r in rows], [r[2] for r in rows]
    diffs = [b - p for p, b in zip(plain, bucketed, strict=True)]
    spread = statistics.stdev if len(rows) > 1 else (lambda _: 0.0)
    result = {
        "seeds": len(rows),
        "random_accuracy_mean": statistics.mean(plain),
        "random_accuracy_sd": spread(plain),
        "buckets_accuracy_mean": statistics.mean(bucketed),
        "buckets_accuracy_sd": spread(bucketed),
        "paired_difference_points": 100 * statistics.mean(diffs),
        "paired_difference_se_points": 100 * spread(diffs) / len(diffs) ** 0.5,
        "wins_losses_ties": [
            sum(d > 0 for d in diffs),
            sum(d < 0 for d in diffs),
            sum(d == 0 for d in diffs),
        ],
        "wall_ratio_random_over_buckets_median": statistics.median(r[3] / r[4] for r in rows),
        "runs": [
            dict(zip(("seed", "random", "buckets", "random_s", "buckets_s"), r, strict=True))
            for r in rows
        ],
    }
    ratio = result["wall_ratio_random_over_buckets_median"]
    print(
        f"accuracy random {result['random_accuracy_mean']:.4f} "
        f"(sd {100 * result['random_accuracy_sd']:.2f} points), buckets "
        f"{result['buckets_accuracy_mean']:.4f} (sd {100 * result['buckets_accuracy_sd']:.2f}); "
        f"paired {result['paired_difference_points']:+.2f} ± "
        f"{result['paired_difference_se_points']:.2f} points (s.e.); wins/losses/ties "
        f"{result['wins_losses_ties']}; whole run {ratio:.2f}× "
        "faster with buckets (median)"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

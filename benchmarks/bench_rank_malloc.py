"""The ranks' malloc settings (engine/rank_malloc.py): training speed and page faults, on and off.

`sentitop train` of the real files (one rank, the default model), alternating glibc's own malloc
behaviour (``SENTITOP_RANK_MALLOC=off``) and the ranks' settings, each with random batches and
with length buckets. Per run: the epoch's samples/s (the summary's), and the minor page faults,
system and user CPU seconds of the whole process tree (this process's waited-for children).
Prints each pair's speed ratio measured in the same run; the fault counts do not depend on the
box's load, the speeds do (medians over --repeat alternations).

    .venv/bin/python benchmarks/bench_rank_malloc.py [--data DIR] [--epochs 1] \\
        [--max-train-samples 4000] [--repeat 2] [--device cpu|cuda] [--speed-only] \\
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_length_buckets import SPEED_ONLY, preprocess, run_train

MODES = ("off", "on")
"""glibc's own malloc, the ranks' settings."""


def train(
    data: Path, run_dir: Path, mode: str, bucketed: bool, args: argparse.Namespace
) -> dict[str, Any]:
    """One `sentitop train` run; its samples/s and accuracy, the tree's faults and CPU."""
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    if mode == "off":
        env["SENTITOP_RANK_MALLOC"] = "off"
    cmd = [sys.executable, "-m", "tui.cli", "train", "--data", str(data), "--run-dir",
           str(run_dir), "--nproc", "1", "--epochs", str(args.epochs), "--threads", "2",
           "--device", args.device, "--max-train-samples", str(args.max_train_samples),
           "--seed", "0", "--length-buckets" if bucketed else "--no-length-buckets"]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run_train(cmd + (SPEED_ONLY if args.speed_only else []), env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "samples_per_s": summary["samples_per_s"],
        "accuracy": summary["accuracy"],
        "faults": after.ru_minflt - before.ru_minflt,
        "sys_s": round(after.ru_stime - before.ru_stime, 2),
        "user_s": round(after.ru_utime - before.ru_utime, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, help="a preprocessed dataset folder")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-train-samples", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument(
        "--speed-only",
        action="store_true",
        help="skip the after-training fits (accuracy is the network's alone)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or preprocess(Path(tmp) / "data", title_rows=False)
        for i in range(args.repeat):
            for bucketed in (False, True):
                for mode in MODES if i % 2 == 0 else MODES[::-1]:
                    name = f"{'buckets' if bucketed else 'plain'}/{mode}"
                    got = train(data, Path(tmp) / f"{i}-{name.replace('/', '-')}", mode,
                                bucketed, args)  # fmt: skip
                    runs.setdefault(name, []).append(got)
                    print(f"  {name:12s} run {i}: {got['samples_per_s']:,.0f} samples/s, "
                          f"{got['faults']:,} faults, sys {got['sys_s']:.1f} s, user "
                          f"{got['user_s']:.1f} s, accuracy {got['accuracy']:.4f}",
                          flush=True)  # fmt: skip
    speed = {k: statistics.median(r["samples_per_s"] for r in v) for k, v in runs.items()}
    faults = {k: statistics.median(r["faults"] for r in v) for k, v in runs.items()}
    ratios = {
        "plain: on / off": speed["plain/on"] / speed["plain/off"],
        "buckets: on / off": speed["buckets/on"] / speed["buckets/off"],
        "buckets on / plain on": speed["buckets/on"] / speed["plain/on"],
        "buckets on / plain off (today's default)": speed["buckets/on"] / speed["plain/off"],
    }
    for label, value in ratios.items():
        print(f"{label}: {value:.2f}x samples/s")
    for name in runs:
        print(f"{name}: median {faults[name]:,.0f} faults, {speed[name]:,.0f} samples/s")
    print(f"load average {os.getloadavg()[0]:.1f}")
    result = {"runs": runs, "ratios": {k: round(v, 3) for k, v in ratios.items()},
              "epochs": args.epochs, "max_train_samples": args.max_train_samples,
              "device": args.device, "speed_only": args.speed_only}  # fmt: skip
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

"""Length buckets (train.length_buckets): padding per step, training speed and accuracy.

1. Padded width: for an even plan over the dataset's training rows, the mean width of a step's
   widest rank batch (what a DDP step waits for; every row runs to it on the GPU path) with
   random batches and with length buckets, at several (world, batch) shapes.
2. Training: `sentitop train` runs alternating plain / bucketed (same data, seed, epochs) on
   one device; samples/s of each and their ratio, and test accuracy (one seed: a sanity check
   that buckets do not cost accuracy, not the yardstick).

The dataset is preprocessed from the real files of ../shared/data (seven McAuley and Fine Food
files) unless --data names one; --title-rows adds the reviews' titles as rows.

    .venv/bin/python benchmarks/bench_length_buckets.py [--device cpu|cuda] [--epochs 2] \\
        [--max-train-samples 8000] [--repeat 2] [--batch-size B] [--speed-only] [--title-rows] \\
        [--data DIR] [--json out.json]
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
from typing import Any

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from engine.sentiment.data import PlanSampler, even_plan  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
FILES = (
    "amazon2014_Cell_Phones_and_Accessories_5.head4776.jsonl.gz",
    "amazon2014_Musical_Instruments_5.jsonl.gz",
    "amazon2018_AMAZON_FASHION_5.jsonl.gz",
    "amazon2018_All_Beauty_5.jsonl.gz",
    "amazon2018_Appliances_5.jsonl.gz",
    "amazon2018_Office_Products_5.balanced9000.jsonl.gz",
    "amazon_fine_food_reviews.head.jsonl.gz",
)
SHAPES = ((1, 256), (2, 256), (4, 512), (8, 2048))
"""(world, global batch) of the padding table."""


def preprocess(out: Path, title_rows: bool) -> Path:
    """The real files preprocessed into ``out`` (the engine's defaults)."""
    inputs = [str(DATA / name) for name in FILES]
    args = [sys.executable, "-m", "engine.preprocess", "-i", *inputs, "-o", str(out), "--json"]
    subprocess.run(args + (["--title-rows"] if title_rows else []), check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return out


def step_widths(lengths: np.ndarray, world: int, batch: int, bucketed: bool) -> float:
    """Mean over an epoch's steps of the widest rank batch."""
    by: dict[str, Any] = {"lengths": lambda ids: lengths[ids], "group": batch} if bucketed else {}
    ranks = [PlanSampler(len(lengths), seed=0, rank=r, **by) for r in range(world)]
    for s in ranks:
        s.set_epoch(0)
        s.add_plan(even_plan(len(lengths), world, batch))
    return float(
        np.mean([max(lengths[s.indices(k)].max() for s in ranks) for k in range(ranks[0].steps)])
    )


def padding_table(data: Path) -> list[dict[str, Any]]:
    with h5py.File(data / "dataset.h5", "r") as fh:
        raw = fh["train/lengths"][()].astype(np.int64)
        width = int(fh["train/tokens"].shape[1])
    lengths = np.minimum(raw, width)
    rows = []
    for world, batch in SHAPES:
        if len(lengths) < world * batch:
            continue
        plain = step_widths(lengths, world, batch, False)
        bucketed = step_widths(lengths, world, batch, True)
        rows.append({"world": world, "batch": batch, "plain": round(plain, 1),
                     "bucketed": round(bucketed, 1), "ratio": round(plain / bucketed, 2),
                     "mean_length": round(float(lengths.mean()), 1)})  # fmt: skip
    return rows


SPEED_ONLY = ["--no-blend-paths", "--no-model-companion"]
"""`sentitop train` flags that skip the after-training fits (the companion's logistic regression
on up to 100 k rows: ≈ 35 CPU-s at the seven files' 27 k rows, longer than two GPU epochs)."""


def run_train(cmd: list[str], env: dict[str, str] | None = None) -> None:
    """Run one `sentitop train`; on failure stop with its command and the end of its stderr."""
    done = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)  # fmt: skip
    if done.returncode:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-3000:]}")


def train(data: Path, run_dir: Path, bucketed: bool, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "tui.cli", "train", "--data", str(data), "--run-dir",
           str(run_dir), "--nproc", "1", "--epochs", str(args.epochs), "--device", args.device,
           "--max-train-samples", str(args.max_train_samples), "--seed", "0",
           "--length-buckets" if bucketed else "--no-length-buckets"]  # fmt: skip
    if args.batch_size:
        cmd += ["--batch-size", str(args.batch_size)]
    run_train(cmd + (SPEED_ONLY if args.speed_only else []))
    summary = json.loads((run_dir / "summary.json").read_text())
    return {k: summary.get(k) for k in ("samples_per_s", "accuracy", "train_s", "n_train")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, help="a preprocessed dataset folder")
    parser.add_argument("--title-rows", action="store_true")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--max-train-samples", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--batch-size", type=int, help="global batch (default: the trainer's)")
    parser.add_argument(
        "--speed-only",
        action="store_true",
        help="skip the after-training fits (accuracy is the network's alone)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or preprocess(Path(tmp) / "data", args.title_rows)
        table = padding_table(data)
        print("padded width of a step's widest rank batch (tokens), random vs length buckets:")
        for row in table:
            print(f"  world {row['world']}, batch {row['batch']}: {row['plain']:.0f} vs "
                  f"{row['bucketed']:.0f} -> {row['ratio']:.2f}x narrower "
                  f"(mean row {row['mean_length']:.0f})")  # fmt: skip
        runs: dict[str, list[dict[str, Any]]] = {"plain": [], "bucketed": []}
        for i in range(args.repeat):
            for name in ("plain", "bucketed") if i % 2 == 0 else ("bucketed", "plain"):
                got = train(data, Path(tmp) / f"{name}{i}", name == "bucketed", args)
                runs[name].append(got)
                print(f"  {name:8s} run {i}: {got['samples_per_s']:,.0f} samples/s, "
                      f"accuracy {got['accuracy']:.4f}")  # fmt: skip
    speed = {k: statistics.median(r["samples_per_s"] for r in v) for k, v in runs.items()}
    accuracy = {k: statistics.mean(r["accuracy"] for r in v) for k, v in runs.items()}
    ratio = speed["bucketed"] / speed["plain"]
    print(f"training on {args.device}: bucketed {speed['bucketed']:,.0f} vs plain "
          f"{speed['plain']:,.0f} samples/s -> {ratio:.2f}x; accuracy {accuracy['bucketed']:.4f} "
          f"vs {accuracy['plain']:.4f}; load {os.getloadavg()[0]:.1f}")  # fmt: skip
    result = {
        "padding": table, "runs": runs, "speed_ratio": round(ratio, 3), "accuracy": accuracy,
        "device": args.device, "epochs": args.epochs, "title_rows": args.title_rows,
        "max_train_samples": args.max_train_samples, "batch_size": args.batch_size,
        "speed_only": args.speed_only,
    }  # fmt: skip
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

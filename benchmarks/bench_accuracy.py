"""The accuracy yardstick: sentitop's default pipeline vs TF-IDF + LR vs always-majority.

Folds over the real review files of ``--data-dir`` (see yardstick_data.py):
- **loco**: leave one Amazon category out — train on the other seven, test on it;
- **imdb**: train on all eight Amazon categories, test on the 50 k IMDB reviews;
- **in_domain**: the eight categories pooled, 10 % of the distinct texts held out by a hash.

Both contenders see the same training texts and select on the same validation split (the
engine's held-out 10 % of the training texts); the test texts of a fold never occur (after
cleaning) in its training texts. Prints one JSON object (``--json FILE`` too) and a Markdown
table: accuracy, F1, ROC AUC per fold, the majority rate, and the mean of the loco folds.

    .venv/bin/python benchmarks/bench_accuracy.py [--kinds loco,imdb,in_domain]
        [--only phones,office] [--preprocess KEY=VALUE ...] [--train KEY=VALUE ...]
        [--model KEY=VALUE ...] [--no-baseline] [--no-pipeline] [--json out.json]
    .venv/bin/python benchmarks/bench_accuracy.py --merge base.json ours-*.json   # one table
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from yardstick_data import CATEGORIES, make_folds
from yardstick_pipeline import parse_overrides, score_run, train_pipeline


def run_fold(fold: Any, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Both contenders on one fold."""
    row: dict[str, Any] = {
        "fold": fold.name,
        "kind": fold.kind,
        "n_train": len(fold.train),
        "n_test": len(fold.test),
        "test_positive_rate": round(fold.test.positive_rate, 4),
        "majority": round(fold.test.majority_rate, 4),
    }
    if not args.no_pipeline:
        start = time.time()
        run = train_pipeline(
            fold.train,
            tmp / fold.name,
            parse_overrides(args.preprocess),
            {"threads": args.threads, **parse_overrides(args.train)},
            parse_overrides(args.model),
        )
        row["ours"] = {**score_run(run, fold.test), "wall_s": round(time.time() - start, 1)}
    if not args.no_baseline:
        from yardstick_baseline import tfidf_lr

        start = time.time()
        row["baseline"] = {**tfidf_lr(fold.train, fold.test), "wall_s": round(time.time() - start)}
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def mean_of(rows: list[dict[str, Any]], who: str, key: str) -> float | None:
    """Mean of ``rows[*][who][key]`` (None when a row lacks it)."""
    values = [r[who][key] for r in rows if who in r and r[who].get(key) is not None]
    return round(sum(values) / len(values), 4) if values and len(values) == len(rows) else None


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table of the folds, ours vs baseline vs majority, with the loco mean."""

    def cell(row: dict[str, Any], who: str, key: str) -> str:
        value = row.get(who, {}).get(key)
        return "—" if value is None else f"{value:.4f}"

    head = (
        "| fold | test texts | majority | ours acc | base acc | Δ acc | ours F1 | base F1 "
        "| ours AUC | base AUC |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    loco = [r for r in rows if r["kind"] == "loco"]
    mean_row = None
    if loco:
        mean_row = {
            "fold": "**loco mean**",
            "n_test": sum(r["n_test"] for r in loco),
            "majority": round(sum(r["majority"] for r in loco) / len(loco), 4),
            **{
                who: {k: mean_of(loco, who, k) for k in ("accuracy", "f1", "auc")}
                for who in ("ours", "baseline")
            },
        }
    for row in [*loco, *([mean_row] if mean_row else []), *[r for r in rows if r not in loco]]:
        ours, base = row.get("ours", {}).get("accuracy"), row.get("baseline", {}).get("accuracy")
        delta = "—" if ours is None or base is None else f"{100 * (ours - base):+.2f}"
        lines.append(
            f"| {row['fold']} | {row['n_test']:,} | {row['majority']:.4f} "
            f"| {cell(row, 'ours', 'accuracy')} | {cell(row, 'baseline', 'accuracy')} | {delta} "
            f"| {cell(row, 'ours', 'f1')} | {cell(row, 'baseline', 'f1')} "
            f"| {cell(row, 'ours', 'auc')} | {cell(row, 'baseline', 'auc')} |"
        )
    return "\n".join(lines)


def merge_results(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fold rows of several runs (e.g. the baseline alone, ours fold by fold), joined by fold."""
    rows: dict[str, dict[str, Any]] = {}
    for result in results:
        for row in result["folds"]:
            rows.setdefault(row["fold"], {}).update(row)
    order = {"loco": 0, "imdb": 1, "in_domain": 2}
    return sorted(rows.values(), key=lambda r: order[r["kind"]])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", default="/work/shared/data")
    parser.add_argument("--kinds", default="loco,imdb,in_domain")
    parser.add_argument("--categories", default=",".join(CATEGORIES))
    parser.add_argument("--only", default="", help="run only these loco folds (comma list)")
    parser.add_argument("--preprocess", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--train", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--model", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: OpenMP spin-waits crawl on a shared machine)",
    )
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--no-pipeline", action="store_true")
    parser.add_argument("--json", help="also write the result to this file")
    parser.add_argument(
        "--merge", nargs="+", metavar="JSON", help="only print the table of earlier --json files"
    )
    args = parser.parse_args()
    if args.merge:
        print(table(merge_results([json.loads(Path(p).read_text()) for p in args.merge])))
        return
    names = args.categories.split(",")
    only = [n for n in args.only.split(",") if n]
    folds = make_folds(Path(args.data_dir), names, args.kinds.split(","), only)
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="yardstick-") as tmp:
        rows = [run_fold(fold, args, Path(tmp)) for fold in folds]
    result = {
        "command": " ".join(sys.argv),
        "categories": {n: CATEGORIES[n] for n in names},
        "preprocess": args.preprocess,
        "train": args.train,
        "model": args.model,
        "folds": rows,
        "wall_s": round(time.time() - start),
        "load_avg_1m": os.getloadavg()[0],
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    print(table(rows))


if __name__ == "__main__":
    main()

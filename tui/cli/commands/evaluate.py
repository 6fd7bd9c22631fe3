"""`sentitop eval`: score a finished run on new raw review files."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(subparsers: Any) -> None:
    """Add the `eval` parser."""
    parser = subparsers.add_parser(
        "eval",
        help="accuracy/precision/recall/F1 of a trained run on raw review files",
        description="Applies the run's own preprocessing and vocabulary to the files.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="folder of a `sentitop train` run")
    parser.add_argument(
        "--input",
        nargs="+",
        required=True,
        metavar="FILE",
        help="raw review files (McAuley JSON / JSON lines, optionally .gz)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the metrics."""
    from engine.sentiment.evaluate import evaluate_files, load_run

    metrics = evaluate_files(load_run(args.run_dir), args.input)
    if args.json:
        print(json.dumps(metrics))
        return 0
    (tn, fp), (fn, tp) = metrics["confusion"]
    print(
        f"n {metrics['n']}  accuracy {metrics['accuracy']:.4f}  precision "
        f"{metrics['precision']:.4f}  recall {metrics['recall']:.4f}  f1 {metrics['f1']:.4f}"
    )
    print("confusion (rows = true, columns = predicted)")
    print(f"            pred neg  pred pos\ntrue neg  {tn:>9} {fp:>9}\ntrue pos  {fn:>9} {tp:>9}")
    return 0

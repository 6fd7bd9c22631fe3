"""`sentitop predict`: P(positive) of each text with a trained run."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tui.cli.commands import RUN_HELP


def register(subparsers: Any) -> None:
    """Add the `predict` parser."""
    parser = subparsers.add_parser("predict", help="P(positive) of each given text")
    parser.add_argument("run_dir", metavar="RUN", help=RUN_HELP)
    parser.add_argument("texts", nargs="+", metavar="TEXT", help="review texts")
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print one probability per text."""
    from engine.sentiment.evaluate import load_run, predict_proba
    from tui.cli.commands import train_folder

    proba = predict_proba(load_run(train_folder(args.run_dir)), args.texts)
    if args.json:
        print(
            json.dumps(
                [
                    {"text": t, "p_positive": float(p)}
                    for t, p in zip(args.texts, proba, strict=True)
                ]
            )
        )
        return 0
    for text, p in zip(args.texts, proba, strict=True):
        print(f"{p:.4f}  {text}")
    return 0

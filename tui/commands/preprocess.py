"""`sentitop preprocess`: raw reviews → dataset.h5, vocab.json, stats.json."""

from __future__ import annotations

import argparse
from typing import Any

from engine.preprocess.cli import HELP, add_arguments


def register(subparsers: Any) -> None:
    """Add the `preprocess` subcommand."""
    parser = subparsers.add_parser("preprocess", help=HELP, description=HELP)
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run preprocessing with a progress bar and a summary table (or --json / --events)."""
    from engine.preprocess.cli import run_cli

    return run_cli(args)

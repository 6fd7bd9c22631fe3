"""`sentitop replay RUN_DIR [--speed X]`: play a recorded run through the dashboard."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tui.cli.commands import RUN_HELP


def register(subparsers: Any) -> None:
    """Add the replay command."""
    parser = subparsers.add_parser(
        "replay",
        help="watch a recorded run (events.jsonl) in the dashboard",
        description="Play a run folder's events.jsonl through the dashboard screens.",
    )
    parser.add_argument("run_dir", metavar="RUN", help=RUN_HELP + ", or an events.jsonl file")
    parser.add_argument(
        "--speed",
        type=float,
        default=10.0,
        help="times the recorded pace (default 10; 0 = as fast as possible)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check the run folder, then open the dashboard on the Run screen."""
    from engine.errors import InputError
    from tui.replay import events_path

    if args.speed < 0:
        raise InputError(
            f"--speed {args.speed} is negative", hint="use 0 (fastest) or a positive factor"
        )
    if Path(args.run_dir).is_file():
        path = events_path(args.run_dir)
    else:
        from remote.run_folder import EVENTS_FILE, resolve_run_dir

        path = resolve_run_dir(args.run_dir, want=EVENTS_FILE) / EVENTS_FILE
    from tui.app import run_dashboard

    return run_dashboard(replay=path.parent, speed=args.speed)

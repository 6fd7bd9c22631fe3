"""`sentitop replay RUN_DIR [--speed X]`: play a recorded run through the dashboard."""

from __future__ import annotations

import argparse
import math
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
    from remote.run_folder import EVENTS_FILE
    from tui.replay import check_has_events, events_path

    if not math.isfinite(args.speed) or args.speed < 0:
        raise InputError(
            f"--speed {args.speed} is not a factor ≥ 0",
            hint="use 0 (fastest) or a positive factor",
        )
    if Path(args.run_dir).is_file():
        path = events_path(args.run_dir)
    else:
        from remote.run_folder import resolve_run_dir

        path = resolve_run_dir(args.run_dir, want=EVENTS_FILE) / EVENTS_FILE
    check_has_events(path)
    from tui.app import run_dashboard

    # a folder's events.jsonl replays under the run's name; another file under its own
    replay = path.parent if path.name == EVENTS_FILE else path
    return run_dashboard(replay=replay, speed=args.speed)

"""`sentitop run PROFILE`: the whole job headless — data, preprocess, train — with a summary."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    """Add the `run` subcommand."""
    parser = sub.add_parser("run", help="run a profile end to end (headless)", description=__doc__)
    parser.add_argument("profile", help="profile file or name (e.g. profiles/local.yaml)")
    parser.add_argument("--json", action="store_true", help="print only the summary as JSON")
    parser.add_argument("--runs-dir", type=Path, help="where run folders go (default ./runs)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the profile, run it, show progress and the summary; exit 0/1/2/130."""
    from rich.console import Console
    from rich.text import Text

    from remote.profile import load_profile
    from remote.runner import execute_run
    from tui.cli.console import make_console
    from tui.cli.headless import HeadlessProgress, summary_table

    profile = load_profile(args.profile)
    err = Console(stderr=True)
    for warning in profile.warnings():
        err.print(Text(f"warning: {warning}", "yellow"))
    epochs = profile.to_train_config(".", ".").epochs
    if args.json:
        outcome = asyncio.run(execute_run(profile, runs_dir=args.runs_dir))
        print(json.dumps(outcome.summary, indent=2))
    else:
        console = make_console()
        with HeadlessProgress(console, epochs) as display:
            outcome = asyncio.run(
                execute_run(
                    profile,
                    runs_dir=args.runs_dir,
                    on_event=display.on_event,
                    on_line=display.on_line,
                )
            )
        console.print(summary_table(outcome.summary))
        console.print(Text(f"run folder: {outcome.run_dir}"))
    if outcome.error is not None:
        print(outcome.error.user_message(), file=sys.stderr)
    return outcome.exit_code

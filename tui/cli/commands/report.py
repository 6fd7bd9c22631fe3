"""`sentitop report RUN... --output DIR`: Markdown + PNG cost/speed review of a series of runs.

RUN is a run folder (runs/<id>, or its train/ subfolder), a run id or sweep id under the runs
folder ($SENTITOP_RUNS_DIR, default ./runs), or a CSV file of published results (see
remote.runs_store.CSV_COLUMNS).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tui.cli.arguments import take_negative_values
from tui.cli.commands.plan import parse_hours


def register(sub: Any) -> None:
    """Add the `report` subcommand."""
    parser = sub.add_parser(
        "report",
        help="cost/speed report with plots of some runs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run folder (runs/<id> or runs/<id>/train), run id, sweep id or CSV file",
    )
    parser.add_argument(
        "--output",
        "-o",
        type=output_folder,
        required=True,
        metavar="DIR",
        help="folder for report.md and the PNG plots",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        metavar="N",
        help="epochs the $ and hours are for (default: the runs')",
    )
    parser.add_argument(
        "--deadline",
        type=parse_hours,
        metavar="TIME",
        help="highlight the cheapest configuration finishing within TIME (2h, 90m, 1.5)",
    )
    parser.add_argument(
        "--runs-dir", type=Path, help="runs folder (default $SENTITOP_RUNS_DIR, else ./runs)"
    )
    take_negative_values(parser)  # --deadline -2h: "expected hours", not "expected one argument"
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the report; exit 2 on unknown runs or bad CSV rows. Ctrl-C (exit 130) and SIGTERM
    (143) stop it with no partial report left: an earlier report in DIR stays as it was."""
    from engine.errors import InputError
    from remote.review.report import write_report
    from remote.runs_store import resolve_runs
    from tui.cli.stop_signals import Terminated, ending, stop_signals

    if args.epochs is not None and args.epochs < 1:
        raise InputError(f"--epochs {args.epochs}: expected an integer >= 1")
    _refuse_unfinished(args.runs, args.runs_dir)
    runs = resolve_runs(args.runs, args.runs_dir)
    try:
        with stop_signals() as guard:
            report = write_report(
                runs,
                args.output,
                epochs=args.epochs,
                deadline_h=args.deadline,
                progress=lambda _name: guard.check(),  # a stop Python dropped ends it here
            )
            guard.check()
    except (KeyboardInterrupt, Terminated) as exc:
        code, words = ending(exc)
        print(f"{words}: no partial report was left in {args.output}", file=sys.stderr)
        return code
    print(f"report: {report.markdown}")
    for path in report.plots.values():
        print(f"plot:   {path}")
    pick = report.pick
    if pick is not None:
        from remote.review.candidates import hours_text
        from remote.review.money_text import duration_text

        took = duration_text(pick.hours * 3600)

        print(
            f"cheapest within {hours_text(args.deadline)}: {pick.label} ({took}, ${pick.usd:.4g})"
        )
    return 0


def output_folder(value: str) -> Path:
    """An --output argument (argparse ``type``): an empty one is a usage error, not the current
    folder (where report.md and five PNGs would land unasked)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("empty; name the folder for report.md and the plots")
    return Path(value)


def _refuse_unfinished(refs: list[str], root: Path | None) -> None:
    """A run folder with events but no summary yet is named as unfinished, not as no run."""
    from engine.errors import InputError
    from engine.events import has_live_writer
    from remote.run_folder import EVENTS_FILE, SUMMARY_FILE, resolve_run_dir

    for ref in refs:
        try:
            resolve_run_dir(ref, want=SUMMARY_FILE, root=root)
            continue
        except InputError:
            pass
        try:
            folder = resolve_run_dir(ref, want=EVENTS_FILE, root=root)
        except InputError:
            continue  # not a run folder: resolve_runs says what it tried
        if has_live_writer(folder / EVENTS_FILE):
            raise InputError(
                f"{folder}: still running (no {SUMMARY_FILE} yet)",
                hint=f"report it once it has ended; `sentitop replay {ref}` shows it so far",
            )
        raise InputError(
            f"{folder}: stopped before its end ({EVENTS_FILE} but no {SUMMARY_FILE}, and no "
            "process writes it: killed or crashed)",
            hint=f"leave it out; `sentitop replay {ref}` shows how far it got",
        )

"""`sentitop runs [--json]`: the recorded runs (run folders) with their sweep, cost and speed."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    """Add the `runs` subcommand."""
    parser = sub.add_parser("runs", help="list recorded runs", description=__doc__)
    add_run_sources(parser, "also list published runs from this CSV")
    parser.set_defaults(func=run)


def add_run_sources(parser: argparse.ArgumentParser, import_help: str) -> None:
    """``--runs-dir``, ``--import CSV`` (repeatable) and ``--json``: shared by runs and plan."""
    parser.add_argument("--runs-dir", type=Path, help="past runs folder (default ./runs)")
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        type=Path,
        default=[],
        metavar="CSV",
        help=import_help,
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def note_unfinished(root: Path, names: list[str]) -> None:
    """Name on stderr the run folders without a summary yet (no final figures to list): still
    running (a process writes their events), or stopped before their end (killed, crashed)."""
    from engine.events import has_live_writer

    live = [n for n in names if has_live_writer(root / n / "events.jsonl")]
    dead = [n for n in names if n not in live]

    def shown(group: list[str]) -> str:
        more = f" (+{len(group) - 3} more)" if len(group) > 3 else ""
        return ", ".join(group[:3]) + more

    if live:
        print(f"note: {len(live)} run(s) still running: {shown(live)}", file=sys.stderr)
    if dead:
        print(
            f"note: {len(dead)} run(s) stopped before their end (no summary.json, and no "
            f"process writes their events: killed or crashed): {shown(dead)}",
            file=sys.stderr,
        )
    if names:
        print("note: `sentitop replay RUN` shows a run so far", file=sys.stderr)


def epochs_done(r: Any) -> int:
    """Epochs ``r`` trained: its summary's, else (a run stopped before its trainer summed up)
    those its events show done, as the Runs screen counts them."""
    return int(r.epochs or r.epochs_in_events)


def row(r: Any) -> dict[str, Any]:
    """One run as JSON-ready fields (``epoch_s``: the median epoch, as `sentitop report` uses)."""
    from remote.review.metrics import median_epoch_s
    from remote.review.outcome import run_outcome

    outcome = run_outcome(r)
    median = median_epoch_s(r)
    return {
        "run": r.run_id,
        "source": r.source,
        "path": str(r.path) + (f":{r.line}" if r.line else ""),
        "profile": r.profile,
        "provider": r.provider,
        "status": r.status,
        "outcome": outcome.status,
        "accuracy_counts": outcome.accuracy_counts,
        "configuration": r.label,
        "hardware": r.hardware,
        "workers": r.workers,
        "epochs": epochs_done(r),
        "epoch_s": None if math.isnan(median) else round(median, 3),
        "epoch_s_mean": None if math.isnan(r.epoch_s) else round(r.epoch_s, 3),
        "wall_s": r.wall_s,
        "time_to_threshold_s": r.time_to_threshold_s,
        "accuracy": r.accuracy,
        "samples_per_s": r.samples_per_s,
        "usd": r.usd,
        "usd_per_hour": r.usd_per_hour,
        "sweep": r.sweep,
        "mode": r.mode,
        "workload": r.task,
        "words_per_s": r.words_per_s,
        "pip_loss": r.pip_loss,
        "recoveries": r.recoveries,
        "downtime_s": r.downtime_s,
        "usd_lost": r.usd_lost,
    }


def warn_unreadable(unreadable: list[str]) -> None:
    """Say on stderr which run folders list_runs left out (nothing when none)."""
    if unreadable:
        print(
            f"warning: left out {len(unreadable)} run folder(s) that cannot be read: "
            + "; ".join(unreadable[:3]),
            file=sys.stderr,
        )


def run(args: argparse.Namespace) -> int:
    """Print the runs (oldest first)."""
    from remote.runs_store import import_csv, list_runs, runs_dir

    if args.runs_dir and not Path(args.runs_dir).expanduser().is_dir():
        from engine.errors import InputError

        raise InputError(f"--runs-dir {args.runs_dir}: no such folder")
    unreadable: list[str] = []
    unfinished: list[str] = []
    records = list_runs(args.runs_dir, unreadable, unfinished)
    warn_unreadable(unreadable)
    note_unfinished(runs_dir(args.runs_dir), unfinished)
    for path in args.imports:
        records.extend(import_csv(path))
    if args.json:
        print(json.dumps([row(r) for r in records], indent=2))
        return 0
    from rich.table import Table
    from rich.text import Text

    from tui.cli.console import make_console

    console = make_console()
    if not records:
        console.print(Text(f"no runs in {runs_dir(args.runs_dir)}"))
        return 0
    table = Table(title=Text(f"runs ({runs_dir(args.runs_dir)})"))
    for col in (
        "run",
        "status",
        "workload",
        "configuration",
        "epochs",
        "median epoch s",
        "wall s",
        "accuracy / PIP",
        "samples/s",
        "$",
        "recoveries",
        "sweep",
    ):
        table.add_column(
            col,
            justify="left"
            if col in ("run", "status", "workload", "configuration", "sweep")
            else "right",
            no_wrap=col != "sweep",
        )
    from remote.review.metrics import median_epoch_s
    from remote.review.outcome import run_outcome

    for r in records:
        outcome = run_outcome(r)
        median = median_epoch_s(r)
        table.add_row(  # ids, labels and sweep names come from folders: never markup
            Text(r.run_id),
            Text(outcome.status, style="" if outcome.accuracy_counts else "bold yellow"),
            Text(r.task),
            Text(r.label),
            str(epochs_done(r)),
            "" if math.isnan(median) else f"{median:,.1f}",
            "" if r.wall_s is None else f"{r.wall_s:,.1f}",
            _quality(r),
            _rate(r),
            "" if r.usd is None else f"{r.usd:.4f}",
            _recoveries(r),
            Text((r.sweep or "") + (f" ({r.mode})" if r.sweep else "")),
        )
    console.print(table)
    return 0


def _recoveries(r: Any) -> str:
    """``2 (41 s, $0.0300)``: recoveries, downtime and dollars lost; empty without any."""
    if not r.recoveries:
        return ""
    return f"{r.recoveries} ({r.downtime_s:,.0f} s, ${r.usd_lost:.4f})"


def _quality(r: Any) -> str:
    """Test accuracy of a sentiment run, final PIP loss of an embeddings run."""
    if r.task == "embeddings":
        return "" if r.pip_loss is None else f"PIP {r.pip_loss:.3f}"
    return "" if r.accuracy is None else f"{r.accuracy:.3f}"


def _rate(r: Any) -> str:
    """Samples/s (sentiment) or words/s (embeddings)."""
    if r.task == "embeddings":
        return "" if r.words_per_s is None else f"{r.words_per_s:,.0f} w/s"
    return "" if r.samples_per_s is None else f"{r.samples_per_s:,.0f}"

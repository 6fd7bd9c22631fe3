"""`sentitop runs [--json]`: the recorded runs (run folders) with their sweep, cost and speed."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    """Add the `runs` subcommand."""
    parser = sub.add_parser("runs", help="list recorded runs", description=__doc__)
    add_run_sources(parser, "also list published runs from this CSV")
    parser.set_defaults(func=run)


def add_run_sources(parser: argparse.ArgumentParser, import_help: str) -> None:
    """``--runs-dir``, ``--import CSV`` (repeatable) and ``--json``: shared by runs and plan."""
    parser.add_argument(
        "--runs-dir", type=Path, help="past runs folder (default $SENTITOP_RUNS_DIR, else ./runs)"
    )
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


RUNNING, KILLED = "running", "killed"
"""States of a run folder without a summary whose events do not say how it ended: a process
still writes them, or none does (killed, crashed)."""


def unfinished_states(root: Path, names: list[str]) -> dict[str, str]:
    """Run folder name → how the run without a summary stands: :data:`RUNNING`, how it ended as
    its events say (a lost summary: "ok", "failed", …), else :data:`KILLED`."""
    from engine.events import has_live_writer

    states = {}
    for name in names:
        events = root / name / "events.jsonl"
        try:
            states[name] = RUNNING if has_live_writer(events) else (_ended_as(events) or KILLED)
        except OSError:  # (`runs` lists the rest)
            states[name] = "unreadable"
    return states


def left_out_rows(
    root: Path, records: list[Any], unfinished: list[str], unreadable: list[str]
) -> list[dict[str, Any]]:
    """`--json` rows of the folders the listing has no figures for, in the shape of
    :func:`row` with every figure null: runs without a summary (``status`` running, killed or
    how their events say they ended) and folders that cannot be read (``status`` unreadable,
    ``error`` its message)."""
    listed = {Path(r.path).name for r in records if r.source == "folder"}

    def blank(folder: Path, status: str, error: str | None = None) -> dict[str, Any]:
        said = {"run": folder.name, "source": "folder", "path": str(folder), "status": status}
        return {**dict.fromkeys(ROW_FIELDS), **said, "resumed_by": [], "summary": False,
                "error": error}  # fmt: skip

    rows = [blank(root / n, state) for n, state in unfinished_states(root, unfinished).items()]
    for folder in sorted(p for p in root.iterdir() if (p / "summary.json").is_file()):
        if folder.name not in listed:
            said = [m for m in unreadable if f"{folder.name}/" in m or m.startswith(folder.name)]
            rows.append(blank(folder, "unreadable", said[0] if said else "cannot be read"))
    return rows


def note_unfinished(root: Path, names: list[str]) -> None:
    """Name on stderr the run folders without a summary yet (no final figures to list): still
    running (a process writes their events), or stopped before their end (killed, crashed)."""
    states = unfinished_states(root, names)
    live = [n for n, state in states.items() if state == RUNNING]
    dead = [n for n, state in states.items() if state == KILLED]
    stopped = {n: state for n, state in states.items() if state not in (RUNNING, KILLED)}

    def shown(group: list[str]) -> str:
        more = f" (+{len(group) - 3} more)" if len(group) > 3 else ""
        return ", ".join(group[:3]) + more

    if live:
        print(f"note: {len(live)} run(s) still running: {shown(live)}", file=sys.stderr)
    if stopped:  # (a `sentitop embed` or `train` stopped or failed: its events say so)
        said = [
            f"{n} ({status}"
            + ("; its earlier finished run is kept in previous/" if _has_previous(root / n) else "")
            + ")"
            for n, status in stopped.items()
        ]
        print(
            f"note: {len(stopped)} run(s) ended without a summary: {shown(said)}",
            file=sys.stderr,
        )
    if dead:
        print(
            f"note: {len(dead)} run(s) stopped before their end (no summary.json, and no "
            f"process writes their events: killed or crashed): {shown(dead)}",
            file=sys.stderr,
        )
    from remote.teardown import cloud_region, torn_down

    recorded = {n: cloud_region(root / n) for n in dead}  # (cloud, region, provider)
    cloudy = [
        n
        for n, (cloud, _, provider) in recorded.items()
        if cloud and provider != "unknown" and not torn_down(root / n)  # teardown said so
    ]
    if cloudy:  # its launcher was killed: nothing tore its machines down
        print(
            f"warning: {shown(cloudy)} ran on cloud machines and never ended: they may still "
            f"be running and billing; `sentitop teardown {cloudy[0]}` terminates what is left "
            "(`sentitop run --resume` does it first too)",
            file=sys.stderr,
        )
    if names:
        print("note: `sentitop replay RUN` shows a run so far", file=sys.stderr)


def warn_leftovers(records: list[Any]) -> None:
    """Warn on stderr about runs whose cloud machines could not be terminated at their end
    (AWS did not answer) and that no `sentitop teardown` has terminated since."""
    from remote.teardown import torn_down

    left = [r.run_id for r in records if r.leftovers and not torn_down(Path(r.path))]
    if left:
        more = f" (+{len(left) - 3} more)" if len(left) > 3 else ""
        print(
            f"warning: {', '.join(left[:3])}{more}: its cloud machines could not be terminated "
            f"when it ended: they may still be running and billing; `sentitop teardown "
            f"{left[0]}` terminates what is left",
            file=sys.stderr,
        )


def _ended_as(events: Path) -> str | None:
    """How a run without a summary ended, as its events tell: a `sentitop run` whose runner
    wrote its run_end (the summary written before it was lost since: "ok" or how it failed), a
    `sentitop embed` or `train` (no runner) whose last stage ended interrupted, failed or over
    budget; None when they stop before an end (killed, crashed)."""
    from engine.events import read_events

    last, runner = None, False
    for event in read_events(events):
        if event["type"] == "run_start":
            runner = True
        elif event["type"] == "run_end" and runner:
            return str(event.get("status") or "ended")
        elif event["type"] == "stage_end" and not runner:
            last = event.get("status")
    return last if last in ("interrupted", "failed", "budget") else None


def _has_previous(folder: Path) -> bool:
    """Whether an embeddings run folder keeps an earlier finished run (RUN/previous)."""
    return (folder / "previous" / "summary.json").is_file()


def epochs_done(r: Any) -> int:
    """Epochs ``r`` trained: its summary's, else (a run stopped before its trainer summed up)
    those its events show done, as the Runs screen counts them."""
    return int(r.epochs or r.epochs_in_events)


@dataclass(frozen=True, slots=True)
class Links:
    """How the listed runs continue each other (remote.resume_chain)."""

    chains: dict[Path, Any]
    """Run folder → the chain it ends (remote.resume_chain.Chain), for runs that resumed another."""
    later: dict[Path, list[str]]
    """Run folder → the runs that continued it."""

    @classmethod
    def of(cls, records: list[Any]) -> Links:
        """The links between ``records`` (runs they continue but do not list are read too)."""
        from remote.resume_chain import Leg, resume_chain, resumed_by

        legs = {
            r.path: Leg(r.path, r.resumed_from, r.usd, r.wall_s, r.status)
            for r in records
            if r.source == "folder"
        }
        chains = {p: c for p, leg in legs.items() if (c := resume_chain(leg, legs)) is not None}
        later = {p: [leg.folder.name for leg in ls] for p, ls in resumed_by(legs.values()).items()}
        return cls(chains, later)

    def chain(self, r: Any) -> Any:
        """The chain ``r`` ends, or None."""
        return self.chains.get(r.path) if r.source == "folder" else None

    def continued_by(self, r: Any) -> list[str]:
        """Names of the runs that continued ``r``."""
        return self.later.get(r.path.absolute().resolve(), []) if r.source == "folder" else []


def row(r: Any, links: Links | None = None) -> dict[str, Any]:
    """One run as JSON-ready fields (``epoch_s``: the median epoch, as `sentitop report` uses;
    ``chain_*``: the whole training of a resumed run, its own figures included)."""
    from remote.review.outcome import run_outcome

    outcome = run_outcome(r)
    chain = links.chain(r) if links else None
    median = _median_epoch(r, chain)
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
        "resumed_from": Path(r.resumed_from).name if r.resumed_from else None,
        "resumed_by": links.continued_by(r) if links else [],
        "chain": [leg.folder.name for leg in chain.legs] if chain else None,
        "chain_usd": round(chain.usd, 6) if chain else None,
        "chain_wall_s": round(chain.wall_s, 3) if chain else None,
        "chain_not_counted": chain.unpriced if chain else None,
        "summary": True,
        "error": None,
    }


ROW_FIELDS = (
    "run",
    "source",
    "path",
    "profile",
    "provider",
    "status",
    "outcome",
    "accuracy_counts",
    "configuration",
    "hardware",
    "workers",
    "epochs",
    "epoch_s",
    "epoch_s_mean",
    "wall_s",
    "time_to_threshold_s",
    "accuracy",
    "samples_per_s",
    "usd",
    "usd_per_hour",
    "sweep",
    "mode",
    "workload",
    "words_per_s",
    "pip_loss",
    "recoveries",
    "downtime_s",
    "usd_lost",
    "resumed_from",
    "resumed_by",
    "chain",
    "chain_usd",
    "chain_wall_s",
    "chain_not_counted",
    "summary",
    "error",
)
"""The fields of every `--json` row, in :func:`row`'s order (tests hold the two together)."""


SHOWN_UNREADABLE = 3
"""Unreadable run folders named by their error; the rest are counted ('… and 2 more')."""


def warn_unreadable(unreadable: list[str]) -> None:
    """Say on stderr which run folders list_runs left out (nothing when none): the first
    :data:`SHOWN_UNREADABLE` with their errors, and how many more."""
    if unreadable:
        rest = len(unreadable) - SHOWN_UNREADABLE
        print(
            f"warning: left out {len(unreadable)} run folder(s) that cannot be read: "
            + "; ".join(unreadable[:SHOWN_UNREADABLE])
            + (f"; … and {rest} more" if rest > 0 else ""),
            file=sys.stderr,
        )


def require_runs_dir(path: Path | None) -> None:
    """Refuse a --runs-dir given but not there (a typo would read as "no past runs"), and a
    runs folder ($SENTITOP_RUNS_DIR, ./runs) that is a file."""
    from engine.errors import InputError

    if path is None:
        from remote.runs_store import runs_dir

        default = runs_dir(None)
        if default.exists() and not default.is_dir():
            raise InputError(
                f"{default}: a file, not a folder (the runs folder: $SENTITOP_RUNS_DIR, else "
                "./runs)",
                hint="point SENTITOP_RUNS_DIR at the folder `sentitop run` writes to",
            )
        return
    if not Path(path).expanduser().is_dir():
        what = "a file, not a folder" if Path(path).expanduser().exists() else "no such folder"
        raise InputError(
            f"--runs-dir {path}: {what}",
            hint="name the folder `sentitop run --runs-dir` wrote to (default ./runs)",
        )


def run(args: argparse.Namespace) -> int:
    """Print the runs (oldest first)."""
    from remote.runs_store import import_csv, list_runs, runs_dir

    require_runs_dir(args.runs_dir)
    unreadable: list[str] = []
    unfinished: list[str] = []
    records = list_runs(args.runs_dir, unreadable, unfinished)
    warn_unreadable(unreadable)
    note_unfinished(runs_dir(args.runs_dir), unfinished)
    warn_leftovers(records)
    for path in args.imports:
        records.extend(import_csv(path))
    links = Links.of(records)
    if args.json:
        listed = [row(r, links) for r in records]
        if runs_dir(args.runs_dir).is_dir():
            listed += left_out_rows(runs_dir(args.runs_dir), records, unfinished, unreadable)
        print(json.dumps(listed, indent=2))
        return 0
    from rich.table import Table
    from rich.text import Text

    from tui.cli.console import make_console

    console = make_console()
    if not records:
        console.print(Text(f"no runs in {runs_dir(args.runs_dir)}"))
        return 0
    from remote.review.outcome import run_outcome

    columns = ("run", "status", "workload", "configuration", "epochs", "median epoch s",
               "wall s", "accuracy / PIP", "samples/s", "$", "recoveries", "sweep")  # fmt: skip
    rows = []
    for r in records:
        outcome = run_outcome(r)
        chain, later = links.chain(r), links.continued_by(r)
        median = _median_epoch(r, chain)
        rows.append(  # ids, labels and sweep names come from folders: never markup
            (
                _run_cell(r, chain, later),
                Text(outcome.status, style=outcome.style),
                Text(r.task),
                Text(r.label),
                str(epochs_done(r)),
                "" if math.isnan(median) else f"{median:,.1f}",
                ("" if r.wall_s is None else f"{r.wall_s:,.1f}")
                + (f"\nΣ {chain.wall_s:,.1f}" if chain else ""),
                _quality(r),
                _rate(r),
                ("" if r.usd is None else f"{r.usd:.4f}")
                + (f"\nΣ {chain.usd:.4f}" if chain else ""),
                _recoveries(r),
                Text((r.sweep or "") + (f" ({r.mode})" if r.sweep else "")),
            )
        )
    optional = ("recoveries", "sweep")  # shown when a run has one: width for the rest
    shown = [i for i, col in enumerate(columns)
             if col not in optional or any(str(cells[i]) for cells in rows)]  # fmt: skip
    left_out = []
    for col in NARROW_DROPS:  # a narrow terminal: columns go before the run ids are cut
        if _table_width(columns, rows, shown) <= console.width:
            break
        if columns.index(col) in shown:
            left_out.append(col)
            shown.remove(columns.index(col))
    table = Table(title=Text(f"runs ({runs_dir(args.runs_dir)})"))
    for i in shown:
        col = columns[i]
        table.add_column(
            col,
            justify="left"
            if col in ("run", "status", "workload", "configuration", "sweep")
            else "right",
            no_wrap=col not in ("sweep", "status"),
            overflow="fold" if col == "status" else "ellipsis",
            min_width=_table_width(columns, rows, [i]) - 4 if col == "run" else None,
        )
    for cells in rows:
        table.add_row(*(cells[i] for i in shown))
    if left_out:
        print(
            f"note: {', '.join(left_out)} left out to fit {console.width} columns (a wider "
            "terminal shows them; --json has every figure)",
            file=sys.stderr,
        )
    console.print(table)
    if links.chains:
        console.print(
            Text(
                "Σ: the whole training of a resumed run, over every run of its chain (its own "
                "figure included); a run resumed by another is part of that chain"
            ),
            style="dim",
        )
    return 0


def _median_epoch(r: Any, chain: Any) -> float:
    """The median epoch of ``r`` as `sentitop report` counts it: a resumed run's whole epochs
    on its own configuration only (an epoch split by a mid-epoch resume reads short)."""
    from remote.review.chains import own_epochs
    from remote.review.metrics import median_epoch_s

    if chain is None:
        return median_epoch_s(r)
    return median_epoch_s(replace(r, epoch_seconds=own_epochs(r, chain)[0]))


NARROW_DROPS = ("sweep", "recoveries", "median epoch s", "workload", "samples/s", "epochs",
                "configuration", "wall s", "$", "accuracy / PIP")  # fmt: skip
"""Columns `sentitop runs` leaves out, in this order, until its table fits the terminal (the
run ids and statuses stay: a cut id cannot be copied into `report` or `--resume`, and a figure
cut to "0.00…" reads as another; a status too wide wraps)."""


def _table_width(columns: tuple[str, ...], rows: list[tuple[Any, ...]], shown: list[int]) -> int:
    """Characters the runs table needs for ``shown`` columns uncut (borders and padding)."""
    width = 1
    for i in shown:
        texts = [str(cells[i]) for cells in rows]
        longest = max((len(line) for text in texts for line in text.split("\n")), default=0)
        width += max(len(columns[i]), longest) + 3
    return width


def _run_cell(r: Any, chain: Any, later: list[str]) -> Any:
    """The run id (a rich Text), with the run it resumed (and the chain's length) or the runs
    that resumed it below it, each id on a line of its own: the column is as wide as the ids,
    so a narrow terminal cut "resumes ID (2 runs)" lines, $ and statuses instead."""
    from rich.text import Text

    cell = Text(r.run_id)
    if chain is not None:
        gone = f", {chain.missing} gone" if chain.missing else ""
        before = chain.legs[-2].folder.name if len(chain.legs) > 1 else chain.missing
        cell.append(f"\n↳ resumes ({len(chain.legs)} runs{gone}):\n{before}", style="cyan")
    for name in later:
        cell.append(f"\n↪ resumed by:\n{name}", style="dim")
    return cell


def _recoveries(r: Any) -> str:
    """``2 (41 s, $0.0300)``: recoveries, downtime and dollars lost; empty without any."""
    if not r.recoveries:
        return ""
    return f"{r.recoveries} ({r.downtime_s:,.0f} s, ${r.usd_lost:.4f})"


def _quality(r: Any) -> str:
    """Test accuracy of a sentiment run, final PIP loss of an embeddings run."""
    if r.task == "embeddings":
        return "" if r.pip_loss is None else f"PIP {r.pip_loss:.3f}"
    if r.accuracy is None and r.stopped_accuracy is not None:  # stopped: its last epoch's
        accuracy, epoch = r.stopped_accuracy
        return f"{accuracy:.3f} (ep {epoch})"
    return "" if r.accuracy is None else f"{r.accuracy:.3f}"


def _rate(r: Any) -> str:
    """Samples/s (sentiment) or words/s (embeddings)."""
    if r.task == "embeddings":
        return "" if r.words_per_s is None else f"{r.words_per_s:,.0f} w/s"
    return "" if r.samples_per_s is None else f"{r.samples_per_s:,.0f}"

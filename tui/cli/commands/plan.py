"""`sentitop plan PROFILE --epochs N [--deadline H]`: predicted hours and $ before launching."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tui.cli.commands.runs import add_run_sources


def register(sub: Any) -> None:
    """Add the `plan` subcommand."""
    parser = sub.add_parser(
        "plan",
        help="predict hours and $ of a profile and of other configurations",
        description=__doc__ + " Predictions come from past runs of the same workload (run "
        "folders, and CSV files given with --import) and a scaling model with the measured "
        "all-reduce cost; the inputs and the model's error on past runs are printed.",
    )
    parser.add_argument("profile", help="profile file or name")
    parser.add_argument("--epochs", type=int, metavar="N", help="epochs (default: the profile's)")
    parser.add_argument(
        "--deadline",
        type=float,
        metavar="H",
        help="hours: pick the cheapest configuration finishing within them",
    )
    add_run_sources(parser, "also use published runs from this CSV (repeatable)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the plan; exit 2 on bad input or when nothing can be predicted."""
    from engine.errors import InputError
    from remote.profile import load_profile
    from remote.review.planner import plan_profile
    from remote.runs_store import import_csv, list_runs

    if args.epochs is not None and args.epochs < 1:
        raise InputError(f"--epochs {args.epochs}: expected an integer >= 1")
    if args.deadline is not None and not args.deadline > 0:
        raise InputError(f"--deadline {args.deadline}: expected hours > 0")
    profile = load_profile(args.profile)
    runs = list_runs(args.runs_dir)
    for path in args.imports:
        runs.extend(import_csv(path))
    plan = plan_profile(profile, runs, epochs=args.epochs, deadline_h=args.deadline)
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
        return 0
    render(plan)
    return 0


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 360 else f"{seconds:,.0f} s"


def render(plan: Any) -> None:
    """The plan as rich tables: target, candidates, inputs, prediction errors."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = plan.target
    console.print(
        f"[bold]{plan.profile}[/bold]: {t.label} on {t.hardware}, {plan.epochs} "
        f"epoch(s): predicted {_hours(t.seconds)}, ${t.usd:.4f} at ${t.usd_per_hour:.4g}/h"
    )
    if plan.target_wall_s is not None:
        parts = ", ".join(f"{k} {v:,.1f} s" for k, v in plan.wall_parts.items())
        console.print(f"  wall time of `sentitop run`: {plan.target_wall_s:,.1f} s ({parts})")
    table = Table(title=f"Candidates for {plan.epochs} epoch(s)")
    for col in (
        "configuration",
        "hardware",
        "workers",
        "$/h",
        "epoch s",
        "time",
        "$",
        "past runs (mean time)",
    ):
        table.add_column(
            col,
            justify="left" if col in ("configuration", "hardware") else "right",
            no_wrap=col == "configuration",
        )
    for c in plan.candidates:
        mark = " *" if c.is_target else ""
        style = "bold green" if plan.pick is c else None
        table.add_row(
            c.label + mark,
            c.hardware,
            str(c.workers),
            f"{c.usd_per_hour:.4g}",
            f"{c.epoch_s:,.1f}",
            _hours(c.seconds),
            f"{c.usd:,.4f}",
            f"{len(c.actual_s)} ({_hours(sum(c.actual_s) / len(c.actual_s))})"
            if c.actual_s
            else "",
            style=style,
        )
    console.print(table)
    console.print("  * = the profile's own configuration")
    if plan.deadline_h is not None:
        if plan.pick is None:
            console.print(f"[red]no configuration meets the {plan.deadline_h:g} h deadline[/red]")
        else:
            console.print(
                f"[green]cheapest within {plan.deadline_h:g} h: {plan.pick.label} "
                f"({_hours(plan.pick.seconds)}, ${plan.pick.usd:.4f})[/green]"
            )
    console.print("[bold]inputs[/bold]")
    for line in plan.inputs:
        console.print(f"  - {line}")
    if plan.errors:
        console.print("[bold]prediction error on past runs[/bold] (each predicted from the others)")
        for e in plan.errors:
            console.print(
                f"  - {e.run_id} ({e.workers} worker(s)) {e.what}: predicted "
                f"{e.predicted_s:,.1f}, actual {e.actual_s:,.1f} ({e.error:+.1%})"
            )
    for line in plan.not_predicted:
        console.print(f"  [dim]{line}[/dim]")

"""`sentitop plan PROFILE [--deadline 2h] [--budget $20]`: hours and $ before paying."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from typing import Any

from remote.review.candidates import (
    SPOT_INTERRUPTIONS_MAX,
    SPOT_INTERRUPTIONS_PER_HOUR,
    hours_text,
)
from remote.review.datasize import MAX_PLAN_BYTES
from remote.review.money_text import duration_text, money
from tui.cli.arguments import take_negative_values
from tui.cli.commands import integer_at_least
from tui.cli.commands.runs import add_run_sources

TOP = 12
"""Rows of the candidates table (--top): the pick and the profile's own, then the best ranked."""


def register(sub: Any) -> None:
    """Add the `plan` subcommand."""
    parser = sub.add_parser(
        "plan",
        help="predict hours and $ of a profile and pick the cheapest configuration",
        description=__doc__ + " Predictions come from past runs of the same workload (run "
        "folders, and CSV files given with --import); GPU types never measured are estimated "
        "from a bundled GPU table (memory bandwidth) with a band from back-tests. Candidates: "
        "every priced GPU instance type at 1-8 instances, two-type mixed sets (load balancer) "
        "and spot where a spot price is known.",
    )
    parser.add_argument("profile", help="profile file or name")
    parser.add_argument("--epochs", type=int, metavar="N", help="epochs (default: the profile's)")
    parser.add_argument(
        "--deadline",
        type=parse_hours,
        metavar="TIME",
        help="pick the cheapest configuration finishing within TIME (2h, 90m, 1.5)",
    )
    parser.add_argument(
        "--budget",
        type=parse_usd,
        metavar="USD",
        help="pick the fastest configuration costing at most USD ($20 or 20)",
    )
    parser.add_argument(
        "--data-size",
        metavar="SIZE",
        help=f"size of the input corpus (92GB, 10TB, 1PB; at most {MAX_PLAN_BYTES / 1e15:g}PB): "
        "training samples and preprocessing per runner; for a synthetic profile the size of "
        "its generated reviews (--write-profile writes it)",
    )
    parser.add_argument(
        "--write-profile",
        metavar="PATH",
        help="write the picked configuration as a new profile (validated; a file there is "
        "replaced only when an earlier plan wrote it)",
    )
    parser.add_argument(
        "--top",
        type=integer_at_least(1),
        default=TOP,
        metavar="N",
        help=f"rows of the candidates table, >= 1 ({TOP}): the pick and the profile's own "
        "configuration, then the best ranked",
    )
    parser.add_argument(
        "--spot-interruptions",
        type=parse_spot_rate,
        default=None,
        metavar="PER_HOUR",
        help="interruptions per spot instance-hour assumed when pricing spot sets, 0 to "
        f"{SPOT_INTERRUPTIONS_MAX:g} (default {SPOT_INTERRUPTIONS_PER_HOUR:g}; each costs a "
        "replacement and half a checkpoint interval of work)",
    )
    add_run_sources(parser, "also use published runs from this CSV (repeatable)")
    take_negative_values(parser)  # --data-size -5GB: "must be positive", not "expected one"
    parser.set_defaults(func=run)


def parse_hours(text: str) -> float:
    """Hours in '2h', '90m', '1h30m', '45min', '90s' or a bare number of hours."""
    raw = text.strip().lower()
    number = r"(\d+(?:\.\d+)?)"
    match = re.fullmatch(
        rf"(?:{number}\s*h)?\s*(?:{number}\s*m(?:in)?)?\s*(?:{number}\s*s(?:ec)?)?", raw
    )  # seconds too: a profile's durations take them (ready_timeout: 90s)
    try:
        if match and any(match.groups()):
            h, m, s = (float(g or 0) for g in match.groups())
            hours = h + m / 60 + s / 3600
        else:
            hours = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a time such as 2h, 90m, 1h30m, 45s or 1.5 (hours)"
        ) from None
    if not (hours > 0 and math.isfinite(hours)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite time > 0")
    return hours


def parse_usd(text: str) -> float:
    """Dollars in '$20', '20', '20usd'."""
    raw = text.strip().lower().removeprefix("$").removesuffix("usd").strip()
    try:
        usd = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected dollars such as $20 or 20") from None
    if not (usd > 0 and math.isfinite(usd)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite amount > 0")
    return usd


def parse_spot_rate(text: str) -> float:
    """Interruptions per spot instance-hour, finite, 0 to SPOT_INTERRUPTIONS_MAX."""
    try:
        rate = float(text)
    except ValueError:
        rate = math.nan
    if not (math.isfinite(rate) and 0.0 <= rate <= SPOT_INTERRUPTIONS_MAX):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected interruptions per instance-hour from 0 to "
            f"{SPOT_INTERRUPTIONS_MAX:g}"
        )
    return rate


def _strict(value: Any) -> Any:
    """``value`` with non-finite floats as None, so that the JSON is strict (no NaN, Infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


def run(args: argparse.Namespace) -> int:
    """Print the plan; exit 2 on bad input."""
    from engine.errors import InputError, SentitopError, visible
    from engine.synth.size import parse_size
    from remote.profile import load_profile
    from remote.profile_inputs import check_input_files
    from remote.review.plan_profile import size_warning, write_profile
    from remote.review.planner import plan_profile
    from remote.runs_store import import_csv, list_runs

    if args.epochs is not None and args.epochs < 1:
        raise InputError(f"--epochs {args.epochs}: expected an integer >= 1")
    size = None if args.data_size is None else parse_size(args.data_size, name="--data-size")
    profile = load_profile(args.profile)
    from engine.sentiment.pretrained import check_init_embeddings

    def embeddings_run(profile: Any) -> None:
        check_init_embeddings(profile.to_train_config("", "train").model)

    for check in (check_input_files, embeddings_run):  # `run` refuses them at its start
        try:
            check(profile)  # a missing input: the plan's data size is not the run's data
        except SentitopError as exc:
            hint = f"; {exc.hint}" if exc.hint else ""
            print(visible(f"warning: {exc.message}{hint}"), file=sys.stderr)
    from tui.cli.commands.runs import require_runs_dir, warn_unreadable

    require_runs_dir(args.runs_dir)
    unreadable: list[str] = []
    runs = list_runs(args.runs_dir, unreadable)
    warn_unreadable(unreadable)  # a measured rate may be missing from the plan: say why
    for path in args.imports:
        runs.extend(import_csv(path))
    from remote.pricing import price_book

    book = price_book(profile.region, live=False)  # bundled, cached (spot too), user: no network
    for line in book.warnings:  # where the dollars come from (a region's fallback prices, age)
        print(f"warning: {line}", file=sys.stderr)
    plan = plan_profile(
        profile,
        runs,
        book=book,
        epochs=args.epochs,
        deadline_h=args.deadline,
        budget_usd=args.budget,
        data_size=size,
        **(
            {}
            if args.spot_interruptions is None
            else {"spot_interruptions_h": args.spot_interruptions}
        ),
    )
    written = None
    if args.write_profile:
        if plan.pick is None:
            raise InputError(
                "--write-profile: nothing to write, no configuration meets the constraints",
                hint="relax --deadline/--budget (the nearest options are printed without "
                "--write-profile)",
            )
        written = write_profile(profile, plan.pick, plan.epochs, args.write_profile, data_size=size)
        warning = size_warning(profile, size)
        if warning:
            print(f"warning: {args.write_profile}: {warning}", file=sys.stderr)
        try:
            written.check_key_files()  # `run` refuses it until the key is there: say so now
        except SentitopError as exc:
            print(f"warning: {exc.message}; {exc.hint}", file=sys.stderr)
    for line in plan.skipped:
        print(f"warning: --import {line}", file=sys.stderr)
    if args.json:
        data = plan.to_dict()
        data["written_profile"] = args.write_profile if written else None
        print(json.dumps(_strict(data), indent=2, allow_nan=False))
        return 0
    render(plan, top=args.top)
    if written is not None and plan.pick is not None:
        print(f"wrote {args.write_profile}: profile {written.name!r} ({plan.pick.label})")
    return 0


def _span(low: float, high: float) -> str:
    """A band of seconds in one unit, its upper end's ("0.02 – 0.27 h", not "69 s – 0.27 h")."""
    return f"{duration_text(low, high).split()[0]} – {duration_text(high)}"


def _amount(usd: float) -> str:
    """:func:`money` without its $ (the table's $ columns say it)."""
    return money(usd).removeprefix("$")


def _row(c: Any) -> list[str]:
    low, high = c.seconds / c.band, c.seconds * c.band
    return [
        c.label + (" *" if c.is_target else ""),
        c.hardware,
        str(c.workers),
        c.market,
        f"{c.usd_per_hour:.4g}",
        duration_text(c.seconds, high),
        _span(low, high) if c.band > 1.0005 else "",
        _amount(c.usd),
        f"{_amount(c.usd_low)} – {_amount(c.usd_high)}" if c.band > 1.0005 else "",
        "estimate" if c.estimate else "measured",
        f"{len(c.actual_s)} ({duration_text(sum(c.actual_s) / len(c.actual_s))})"
        if c.actual_s
        else "",
    ]


def table_rows(ranking: list[Any], pinned: list[Any], top: int) -> list[Any]:
    """``top`` rows (fewer if there are fewer): ``pinned`` ones first in, then the best ranked;
    in ranking order, pinned rows the ranking lacks last."""
    keep: list[Any] = []
    for c in [*pinned, *ranking]:
        if c is not None and len(keep) < top and all(c is not k for k in keep):
            keep.append(c)
    order = [c for c in ranking if any(c is k for k in keep)]
    return order + [k for k in keep if all(k is not c for c in order)]


TRAINING_SET = "training-set size:"
"""How the plan's line on the training samples it assumed begins (shown under the headline)."""


def render(plan: Any, *, top: int = TOP) -> None:
    """The plan as rich tables: target, ranked candidates, basis, inputs, prediction errors."""
    from rich.markup import escape
    from rich.table import Table

    from tui.cli.console import make_console

    console = make_console()
    t = plan.target
    kind = "estimate" if t.estimate else "measured on this hardware"
    paid = [p for p in plan.prep if p.usd and p.runner == plan.prep_runner]
    also = f" + {money(paid[0].usd)} of {paid[0].runner.upper()} preprocessing" if paid else ""
    console.print(
        f"[bold]{escape(plan.profile)}[/bold]: {escape(t.label)} on {escape(t.hardware)}, "
        f"{plan.epochs} epoch(s): predicted {duration_text(t.seconds, t.seconds * t.band)} (band "
        f"{_span(t.seconds / t.band, t.seconds * t.band)}), {money(t.usd)} at "
        f"${t.usd_per_hour:.4g}/h ({kind})" + also
    )
    console.print(f"  basis: {escape(t.basis)}")
    sizes = [line for line in plan.inputs if line.startswith(TRAINING_SET)]
    if sizes:  # what the hours stand on, before the tables (it was at the very end)
        console.print(f"  training set: {escape(sizes[0][len(TRAINING_SET) :].strip())}")
    if plan.target_wall_s is not None:
        parts = ", ".join(f"{k} {v:,.1f} s" for k, v in plan.wall_parts.items())
        console.print(f"  wall time of `sentitop run`: {plan.target_wall_s:,.1f} s ({parts})")
    for p in plan.prep:
        console.print(
            f"  preprocessing ({escape(p.runner)} runner, {escape(p.machines)}, {p.cores} vCPUs): "
            f"{duration_text(p.seconds)}"
            + (f", {money(p.usd)} at ${p.usd_per_hour:.4g}/h" if p.usd else "")
            + f" — {escape(p.basis)}"
        )
    choice = plan.choice
    if choice and choice.nearest:
        ranking = list(choice.nearest)
    else:
        ranking = list(choice.ranked) if choice and choice.ranked else list(plan.candidates)
    shown = table_rows(ranking, [plan.pick, t], top)
    title = f"Candidates for {plan.epochs} epoch(s)"
    if plan.deadline_h is not None or plan.budget_usd is not None:
        limits = []
        if plan.deadline_h is not None:
            limits.append(f"deadline {hours_text(plan.deadline_h)}")
        if plan.budget_usd is not None:
            limits.append(f"budget ${plan.budget_usd:g}")
        title += " meeting " + " and ".join(limits) if not choice.nearest else " (nearest)"
    table = Table(title=title)
    for col in (
        "configuration",
        "hardware",
        "ranks",
        "market",
        "$/h",
        "time",
        "time band",
        "$",
        "$ band",
        "basis",
        "past runs",
    ):
        table.add_column(
            col,
            justify="left" if col in ("configuration", "hardware", "market", "basis") else "right",
            no_wrap=True,
        )
    unsure = [c for c in choice.ranked if all(c is not s for s in choice.sure)] if choice else []
    for c in shown:
        style = "bold green" if plan.pick is c else None
        row = _row(c)
        if any(c is u for u in unsure):  # meets them at the predicted value only
            row[6] = f"{row[6]} !"
        table.add_row(*[escape(x) for x in row], style=style)
    console.print(table)
    console.print(
        f"  * = the profile's own configuration; {len(plan.candidates)} configurations "
        "evaluated (--json lists all)"
    )
    if choice is not None and choice.sure and any(c is u for c in shown for u in unsure):
        console.print(
            "  ! = meets the constraints at the predicted value only: the slow end of its band "
            "misses them; the pick is the best that meets them even there"
        )
    if choice is not None and choice.message:
        console.print(f"[red]{escape(choice.message)}[/red]; nearest options above")
    elif plan.pick is not None and (plan.deadline_h is not None or plan.budget_usd is not None):
        how = "cheapest" if plan.deadline_h is not None else "fastest"
        sure = (
            "even at the slow end of its band"
            if choice.safe
            else "[yellow]at the predicted value only: the slow end of its band misses[/yellow]"
        )
        console.print(
            f"[green]{how} meeting the constraints: {escape(plan.pick.label)} "
            f"({duration_text(plan.pick.seconds)}, {money(plan.pick.usd)})[/green], {sure}"
        )
        console.print(f"  basis: {escape(plan.pick.basis)}")
    for line in plan.notes:
        console.print(f"[yellow]note[/yellow]: {escape(line)}")
    console.print("[bold]inputs[/bold]")
    for line in [line for line in plan.inputs if not line.startswith(TRAINING_SET)]:
        console.print(f"  - {escape(line)}")
    if plan.errors:
        console.print("[bold]prediction error on past runs[/bold] (each predicted from the others)")
        for e in plan.errors:
            console.print(
                f"  - {escape(e.run_id)} ({e.workers} worker(s)) {e.what}: predicted "
                f"{e.predicted_s:,.1f}, actual {e.actual_s:,.1f} ({e.error:+.1%})"
            )
    for line in plan.not_predicted:
        console.print(f"  [dim]{escape(line)}[/dim]")

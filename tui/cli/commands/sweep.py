"""`sentitop sweep PROFILE --nproc 1,2,4 [--weak] [--epochs N]`: a strong or weak scaling series."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

from tui.cli.commands.report import output_folder
from tui.cli.commands.run import termination_as_interrupt, termination_reason


def register(sub: Any) -> None:
    """Add the `sweep` subcommand."""
    parser = sub.add_parser(
        "sweep", help="run a profile at several worker counts (scaling)", description=__doc__
    )
    parser.add_argument("profile", help="profile file or name")
    parser.add_argument(
        "--nproc",
        required=True,
        metavar="N,N,...",
        help="worker counts, e.g. 1,2,4 (local: processes; EC2: GPUs)",
    )
    parser.add_argument(
        "--weak",
        action="store_true",
        help="weak scaling: data and global batch grow with the workers",
    )
    parser.add_argument(
        "--per-worker",
        type=int,
        metavar="N",
        help="weak scaling: training samples of the smallest run "
        "(default: the profile's train.max_train_samples)",
    )
    parser.add_argument("--epochs", type=int, metavar="N", help="override train.epochs")
    parser.add_argument(
        "--runs-dir",
        type=Path,
        help="where run folders go (default $SENTITOP_RUNS_DIR, else ./runs)",
    )
    parser.add_argument(
        "--report",
        type=output_folder,
        metavar="DIR",
        help="write the review report of the sweep into DIR afterwards",
    )
    parser.add_argument("--json", action="store_true", help="print the run summaries as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the series; exit 0 when every run is ok, 130 when interrupted, else 1."""
    from engine.errors import InputError
    from remote.profile import load_profile
    from remote.sweep import parse_counts, plan_sweep, run_sweep
    from tui.cli.console import tolerant
    from tui.cli.two_press import FIRST_PRESS, StoppedAtOnce, run_with_two_press_stop

    if args.epochs is not None and args.epochs < 1:
        raise InputError(f"--epochs {args.epochs}: expected an integer >= 1")
    for flag, folder in (("--runs-dir", args.runs_dir), ("--report", args.report)):
        if folder is not None and folder.expanduser().exists() and not folder.expanduser().is_dir():
            raise InputError(  # found now, not after the sweep has run (and cost)
                f"{flag} {folder} is a file, not a folder", hint="name a folder"
            )
    profile = load_profile(args.profile)
    plan = plan_sweep(
        profile,
        parse_counts(args.nproc),
        weak=args.weak,
        epochs=args.epochs,
        per_worker=args.per_worker,
    )
    err = sys.stderr

    @tolerant  # a reader that left (`| tee` ended by the Ctrl-C) must not stop the sweep's stop
    def on_run(index: int, outcome: Any) -> None:
        s = outcome.summary
        print(
            f"[{index + 1}/{len(plan.profiles)}] {plan.counts[index]} worker(s): "
            f"{_status_words(outcome)} in {s.get('wall_s', 0):.1f} s, ${s.get('usd', 0):.4f} "
            f"— {outcome.run_dir}",
            file=err,
            flush=True,
        )

    print(
        f"sweep {plan.sweep_id}: {plan.mode} scaling over {plan.counts} worker(s)",
        file=err,
        flush=True,
    )
    received: list[int] = []  # SIGTERM/SIGHUP stop the sweep at once, tearing down

    def say(line: str) -> None:
        print(line, file=err, flush=True)

    def first_press_too(line: str) -> None:
        say(line)
        if line == FIRST_PRESS:
            say("the sweep starts no further run")

    try:
        with termination_as_interrupt(received):
            outcomes = asyncio.run(
                run_with_two_press_stop(
                    lambda stop: run_sweep(
                        plan,
                        runs_dir=args.runs_dir,
                        on_run=on_run,
                        stop=stop,
                        interrupt_reason=lambda: termination_reason(received),
                    ),
                    first_press_too,
                    at_once=lambda: bool(received),
                )
            )
    except (KeyboardInterrupt, StoppedAtOnce):
        if not received:
            raise KeyboardInterrupt from None  # Ctrl-C twice: the CLI's message and exit 130
        name = signal.Signals(received[0]).name
        print(f"terminated ({name}): the sweep was stopped and its run torn down", file=err)
        return 128 + received[0]
    _say_outcomes(args, plan, outcomes, err)
    if any(o.status == "interrupted" for o in outcomes):
        return 130
    return 0 if all(o.status == "ok" for o in outcomes) else 1


def _say_outcomes(args: argparse.Namespace, plan: Any, outcomes: list[Any], err: Any) -> None:
    """Write the report (--report), then say the sweep id (or --json), the report and which
    runs were not started: the report is written even where nothing can be said any more."""
    from tui.cli.console import reader_may_leave

    report = None
    if args.report is not None:
        from remote.review.report import write_report
        from remote.runs_store import load_run

        ok = [load_run(o.run_dir) for o in outcomes if o.status == "ok"]
        report = write_report(ok, args.report) if ok else None
    with reader_may_leave():  # the sweep's exit code, not 141, once its runs are done
        if args.json:
            runs = [o.summary for o in outcomes]
            print(json.dumps({"sweep": plan.sweep_id, "mode": plan.mode, "runs": runs}, indent=2))
        else:
            print(f"sweep id: {plan.sweep_id}  (`sentitop report {plan.sweep_id} --output DIR`)")
        if report is not None:
            print(f"report: {report.markdown}")
        elif args.report is not None:
            print(f"no report in {args.report}: no run of the sweep ended ok", file=err)
        stopped_last = bool(outcomes) and outcomes[-1].status == "interrupted"
        if len(outcomes) < len(plan.counts) or stopped_last:
            done, left = plan.counts[: len(outcomes)], plan.counts[len(outcomes) :]
            _say_what_stopped(outcomes, done, left)


def _status_words(outcome: Any) -> str:
    """A finished run's status as `runs` and `report` show it: 'ok, below majority 0.812' for a
    model that does not beat always answering the commoner class, never a bare 'ok'."""
    from engine.errors import SentitopError
    from remote.review.outcome import run_outcome
    from remote.runs_store import load_run

    if outcome.status != "ok":
        return str(outcome.status)
    try:
        return run_outcome(load_run(outcome.run_dir)).status
    except SentitopError:  # its folder cannot be read back: the runner's word stands
        return str(outcome.status)


def _say_what_stopped(outcomes: list[Any], ran: list[int], not_started: list[int]) -> None:
    """After a stopped sweep: the worker counts it never ran, and how to continue the stopped
    run (its checkpoint) on stderr; a run stopped before its first checkpoint is said so."""
    from remote.resume import resume_hint

    if not_started:
        counts = ", ".join(str(n) for n in not_started)
        print(f"not started: the sweep's run(s) with {counts} worker(s)", file=sys.stderr)
    last = outcomes[-1] if outcomes else None
    hint = resume_hint(last.run_dir) if last is not None and last.status != "ok" else None
    if hint:
        print(hint, file=sys.stderr)
    elif last is not None and last.status == "interrupted":
        print(
            f"stopped: the run with {ran[-1]} worker(s), before its first checkpoint "
            f"({last.run_dir}): nothing to continue from; a new sweep over the counts left "
            "measures it",
            file=sys.stderr,
        )

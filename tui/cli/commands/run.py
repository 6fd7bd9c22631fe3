"""`sentitop run PROFILE`: the whole job headless — data, preprocess, train — with a summary;
`sentitop run --resume RUN` continues a stopped run from its last checkpoint."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    """Add the `run` subcommand."""
    parser = sub.add_parser("run", help="run a profile end to end (headless)", description=__doc__)
    parser.add_argument(
        "profile",
        nargs="?",
        help="profile file or name (e.g. profiles/local.yaml); with --resume, default: the "
        "run's own (a given one must have the same data, preprocessing and model)",
    )
    parser.add_argument(
        "--resume",
        metavar="RUN",
        help="continue RUN (a run id or folder that stopped before its end: Ctrl-C, a killed "
        "controller, a budget, a failure) from its last checkpoint, in a new run folder",
    )
    parser.add_argument("--json", action="store_true", help="print only the summary as JSON")
    parser.add_argument(
        "--runs-dir",
        type=Path,
        help="where run folders go (default $SENTITOP_RUNS_DIR, else ./runs)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the profile, run it, show progress and the summary; exit 0/1/2/130."""
    from rich.console import Console
    from rich.text import Text

    from engine.errors import InputError
    from remote.profile import load_profile
    from remote.profile_inputs import check_input_files
    from remote.resume import (
        refuse_fewer_epochs_than_done,
        resumable_or_torn_down,
        resume_hint,
        resume_profile,
    )

    if args.profile is None and args.resume is None:
        raise InputError("give a PROFILE to run, or --resume RUN to continue a stopped run")
    given = load_profile(args.profile) if args.profile is not None else None
    args.resume_from = None
    if args.resume is not None:
        args.resume_from = resumable_or_torn_down(args.resume, args.runs_dir)
        given = resume_profile(args.resume_from, given)
    assert given is not None
    profile = given
    err = Console(stderr=True)
    check_input_files(profile)  # a missing input: exit 2 before a run folder or machine
    for warning in profile.warnings():
        err.print(Text(f"warning: {warning}", "yellow"))
    epochs = profile.to_train_config(".", ".").epochs
    if args.resume_from is not None:  # fewer epochs than it trained: it would train nothing
        refuse_fewer_epochs_than_done(args.resume_from, epochs)
    received: list[int] = []
    started: list[Path] = []
    try:
        with termination_as_interrupt(received):
            return _run(args, profile, epochs, lambda: termination_reason(received), started)
    except KeyboardInterrupt:  # stopped at once (a second Ctrl-C, SIGTERM): no summary table
        hint = resume_hint(started[0]) if started else None
        if started:  # where its summary.json and logs are, as a finished run says
            print(f"run folder: {started[0]}", file=sys.stderr)
        if hint:
            print(hint, file=sys.stderr)
        if not received:
            raise  # Ctrl-C: the CLI's own message and exit code 130
        name = signal.Signals(received[0]).name
        print(f"terminated ({name}): the run was stopped and torn down", file=sys.stderr)
        return 128 + received[0]


TERMINATION_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals `sentitop run` stops on as it does on Ctrl-C (a supervisor's kill, a closed
terminal): the ranks and any cloud machines are torn down and summary.json says so."""


@contextlib.contextmanager
def termination_as_interrupt(received: list[int]) -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP become SIGINT to this process (asyncio's Ctrl-C path:
    the run is cancelled and cleaned up); ``received`` gets the signal's number."""

    def forward(signum: int, _frame: Any) -> None:
        if not received:
            received.append(signum)
        os.kill(os.getpid(), signal.SIGINT)

    previous = {sig: signal.signal(sig, forward) for sig in TERMINATION_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def termination_reason(received: list[int]) -> str | None:
    """The summary's reason for a run stopped by a termination signal (None: Ctrl-C)."""
    return f"terminated by {signal.Signals(received[0]).name}" if received else None


def _run(
    args: argparse.Namespace,
    profile: Any,
    epochs: int,
    interrupt_reason: Callable[[], str | None],
    started: list[Path],
) -> int:
    """Execute the run with the headless display (or --json) and print the outcome; the new
    run folder goes into ``started`` as soon as it exists."""
    from rich.text import Text

    from remote.runner import RunOutcome, execute_run
    from tui.cli.console import make_console, reader_may_leave
    from tui.cli.headless import HeadlessProgress, summary_table
    from tui.cli.two_press import StoppedAtOnce, run_with_two_press_stop

    def start(display: HeadlessProgress | None, say: Callable[[str], None]) -> RunOutcome:
        return asyncio.run(
            run_with_two_press_stop(
                lambda stop: execute_run(
                    profile,
                    runs_dir=args.runs_dir,
                    on_event=None if display is None else display.on_event,
                    on_line=None if display is None else display.on_line,
                    stop=stop,
                    interrupt_reason=interrupt_reason,
                    resume_from=args.resume_from,
                    on_start=started.append,
                ),
                say,
                at_once=lambda: interrupt_reason() is not None,
            )
        )

    try:
        if args.json:
            outcome = start(None, lambda line: print(line, file=sys.stderr, flush=True))
            with reader_may_leave():  # the outcome's exit code, not 141, once the run is done
                print(json.dumps(outcome.summary, indent=2))
        else:
            console = make_console(run=True)
            with HeadlessProgress(console, epochs) as display:
                outcome = start(display, display.say)
            with reader_may_leave():  # the outcome's exit code, not 141, once the run is done
                console.print(summary_table(outcome.summary))
                console.print(Text(f"run folder: {outcome.run_dir}"))
    except StoppedAtOnce:
        raise KeyboardInterrupt from None  # the summary is written: Ctrl-C's message and exit
    with reader_may_leave():
        _say_outcome(outcome)
    return outcome.exit_code


def _say_outcome(outcome: Any) -> None:
    """The run's error and how to continue it, on stderr."""
    if outcome.error is not None:
        print(outcome.error.user_message(), file=sys.stderr)
    if outcome.status != "ok":
        from remote.resume import resume_hint

        hint = resume_hint(outcome.run_dir)
        if hint and outcome.exit_code == 2:  # refused (bad input): the same resume is refused too
            hint = hint.replace("; continue with:", "; once that is fixed, continue with:")
        if hint:
            print(hint, file=sys.stderr)

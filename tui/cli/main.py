"""The `sentitop` command: the dashboard with no arguments, headless subcommands otherwise."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Sequence

from engine.errors import SentitopError
from engine.preprocess.termination import Terminated

COMMAND_MODULES = [
    "preprocess",
    "synth",
    "train",
    "evaluate",
    "predict",
    "run",
    "replay",
    "prices",
    "profiles",
    "runs",
    "sweep",
    "report",
    "plan",
    "embed",
    "teardown",
]
"""Modules under tui.cli.commands; each defines register(subparsers), sets func=run(args)->int."""


def _version() -> str:
    """The installed package's version (the checkout's pyproject.toml before it is installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sentitop")
    except PackageNotFoundError:
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (one subparser per command module that exists)."""
    parser = argparse.ArgumentParser(
        prog="sentitop",
        description="Distributed sentiment-analysis experiments: preprocess, train, watch, review.",
    )
    parser.add_argument("--version", action="version", version=f"sentitop {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"tui.cli.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"tui.cli.commands.{name}":
                continue  # command not built yet
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    try:
        code = _main(argv)
    except KeyboardInterrupt:  # a Ctrl-C while the commands are still being imported
        print("interrupted", file=sys.stderr)
        return 130
    written = sys.modules.get("engine.preprocess.h5_write")  # loaded: h5py was in use
    if argv is None and written is not None:  # the process itself (not a caller's main([...]))
        written.exit_if_unclosed(code)  # an HDF5 file a full disk left open would crash the exit
    return code


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list:
        from tui.app import run_dashboard

        return run_dashboard()
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(args_list)
    except SentitopError as exc:  # raised by an option's own parser (e.g. --straggle)
        print(exc.user_message(), file=sys.stderr)
        return exc.exit_code
    trailing = getattr(args, "trailing_positionals", None)  # e.g. predict RUN --json TEXT...
    if extra and trailing and not any(item.startswith("-") and item != "-" for item in extra):
        setattr(args, trailing, [*getattr(args, trailing), *extra])
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SentitopError as exc:
        print(exc.user_message(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Terminated as exc:  # SIGTERM/SIGHUP in a preprocessing run the command did not catch
        print(exc, file=sys.stderr)  # "terminated (SIGTERM)", after the run's own clean-up
        return 128 + exc.signum
    except BrokenPipeError as exc:  # the reader left (`sentitop ... | head`): quiet, as cat is
        from engine.launch import silence_broken_streams

        silence_broken_streams()  # the interpreter's final flush must not fail again
        stopped = exc.__context__  # said while stopping: a Ctrl-C at `... | tee` ends tee too
        if isinstance(stopped, KeyboardInterrupt):
            return 130
        if isinstance(stopped, SystemExit) and isinstance(stopped.code, int):
            return stopped.code
        return 141  # 128 + SIGPIPE


def entry() -> None:
    """The `sentitop` command: :func:`main`'s exit status. Once it is known (the command
    finished and said so), a Ctrl-C in the interpreter's teardown exits at once with it: it
    turned a finished command, its output in place, into exit 130 or a traceback."""
    status = main()

    def finish_now(signum: int, frame: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(status)

    signal.signal(signal.SIGINT, finish_now)  # the command's own main thread
    sys.exit(status)


if __name__ == "__main__":
    entry()

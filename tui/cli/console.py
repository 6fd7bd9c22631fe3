"""The rich consoles of the headless commands: the terminal's width, or a wide one when piped;
output whose reader left while a run stops."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])

PIPE_WIDTH = 200
"""Columns of output that goes to a pipe or file (rich would cut it to 80), unless $COLUMNS."""


class RunConsole(Console):
    """A Console that goes quiet when its reader leaves, where rich's own exits (SystemExit 1):
    a run's stop, its teardown and its summary must go on after a Ctrl-C that ended `| tee`."""

    def on_broken_pipe(self) -> None:
        from engine.launch import silence_broken_streams

        self.quiet = True
        silence_broken_streams()


def make_console(
    *, stderr: bool = False, min_width: int | None = None, run: bool = False
) -> Console:
    """A Console for stdout (or stderr): a terminal's own width (at least ``min_width``), else
    $COLUMNS or :data:`PIPE_WIDTH`, so piped tables and headers are not cut to 80 columns;
    ``run``: a :class:`RunConsole`."""
    kind = RunConsole if run else Console
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        width = Console(stderr=stderr).width
        return kind(stderr=stderr, width=max(width, min_width or 0))
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH
    return kind(stderr=stderr, width=max(width, min_width or 0))


@contextlib.contextmanager
def reader_may_leave() -> Iterator[None]:
    """Drop what is written in it once the reader has left (EPIPE; from then on the output goes
    to /dev/null): a Ctrl-C at `sentitop run ... | tee log` ends tee too, and a line said while
    the run stopped raised BrokenPipeError into the stop (no checkpoint, exit 1)."""
    try:
        yield
    except BrokenPipeError:
        from engine.launch import silence_broken_streams

        silence_broken_streams()


def tolerant(method: F) -> F:
    """``method`` run in :func:`reader_may_leave`."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with reader_may_leave():
            return method(*args, **kwargs)
        return None

    return call  # type: ignore[return-value]

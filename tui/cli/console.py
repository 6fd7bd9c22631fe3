"""The rich consoles of the headless commands: the terminal's width, or a wide one when piped."""

from __future__ import annotations

import os
import sys

from rich.console import Console

PIPE_WIDTH = 200
"""Columns of output that goes to a pipe or file (rich would cut it to 80), unless $COLUMNS."""


def make_console(*, stderr: bool = False, min_width: int | None = None) -> Console:
    """A Console for stdout (or stderr): a terminal's own width (at least ``min_width``), else
    $COLUMNS or :data:`PIPE_WIDTH`, so piped tables and headers are not cut to 80 columns."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        width = Console(stderr=stderr).width
        return Console(stderr=stderr, width=max(width, min_width or 0))
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH
    return Console(stderr=stderr, width=max(width, min_width or 0))

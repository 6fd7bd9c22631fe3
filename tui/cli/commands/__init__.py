"""Subcommands of the sentitop CLI, one module each; what the run-taking ones share."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

RUN_HELP = (
    "a run: the folder `sentitop run`/`train` printed (runs/<id>), its train/ subfolder, or the "
    "run id (looked up in $SENTITOP_RUNS_DIR, default ./runs)"
)
"""Help of every RUN argument (predict, eval, replay, report)."""
PREVIEW_CHARS = 72
"""`sentitop predict` and `eval --misses` show each text shortened to this many characters
(the full text can be a whole file's worth)."""


def preview(text: str, width: int = PREVIEW_CHARS) -> str:
    """``text`` on one line, at most ``width`` characters: runs of whitespace become one space,
    other control characters (a terminal's escape sequences) their escaped form, and a longer
    text is cut with "…" and its full length."""
    flat = " ".join(text.split())
    flat = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in flat)
    if len(flat) <= width:
        return flat
    tail = f"… ({len(text):,} chars)"
    return flat[: max(1, width - len(tail))].rstrip() + tail


def train_folder(ref: str) -> Path:
    """The training folder (model.json, weights, vocabulary) of a run given as RUN_HELP says."""
    from engine.sentiment.checkpoint import MODEL_SPEC
    from remote.run_folder import resolve_run_dir

    return resolve_run_dir(ref, want=MODEL_SPEC, part="train")


def region_arg(value: str) -> str:
    """An AWS region name given on the command line (argparse ``type``): a bad one is a
    one-line usage error (exit 2), as in a profile, before any AWS client sees it."""
    from remote.profile import REGION_PATTERN

    if not re.fullmatch(REGION_PATTERN, value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an AWS region name (expected a form such as us-east-1)"
        )
    return value


def integer_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number >= ``minimum``: anything else is a one-line
    usage error (exit 2) naming the value."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= {minimum}")
        return value

    return parse

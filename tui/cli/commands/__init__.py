"""Subcommands of the sentitop CLI, one module each; what the run-taking ones share."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

RUN_HELP = (
    "a run: the folder `sentitop run`/`train` printed (runs/<id>), its train/ subfolder, or the "
    "run id (looked up in $SENTITOP_RUNS_DIR, default ./runs)"
)
"""Help of every RUN argument (predict, eval, replay, report)."""


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

"""Subcommands of the sentitop CLI, one module each; what the run-taking ones share."""

from __future__ import annotations

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

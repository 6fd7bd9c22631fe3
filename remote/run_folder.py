"""One resolver from what a user types for a run (``runs/<id>``, ``runs/<id>/train`` or the bare
run id) to the folder a command needs: the run folder itself, or its training folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Literal

from engine.errors import InputError

TRAIN_SUBDIR = "train"
"""Where `sentitop run` keeps the training part of a run (checkpoints, model, vocabulary)."""
EVENTS_FILE = "events.jsonl"
SUMMARY_FILE = "summary.json"
HINT = (
    "pass the folder `sentitop run`/`train` printed (runs/<id>), its train/ subfolder, or the "
    "run id; `sentitop runs` lists them"
)


def runs_root(root: str | Path | None = None) -> Path:
    """The runs folder: ``root`` when given, else $SENTITOP_RUNS_DIR, else ./runs."""
    if root is not None:
        return Path(root).expanduser()
    return Path(os.environ.get("SENTITOP_RUNS_DIR", "runs")).expanduser()


def _candidates(ref: str | Path, part: Literal["run", "train"], root: Path) -> list[Path]:
    path = Path(ref).expanduser()
    bare = len(Path(ref).parts) == 1 and not Path(ref).is_absolute()
    if part == "train":  # the folder with the model: X, X/train
        found = [path, path / TRAIN_SUBDIR]
        if bare:
            found += [root / str(ref), root / str(ref) / TRAIN_SUBDIR]
    else:  # the whole run: X, or X/.. when X is its train/ subfolder
        found = [path.parent] if path.name == TRAIN_SUBDIR else []
        found.append(path)
        if bare:
            found.append(root / str(ref))
    unique: list[Path] = []
    for candidate in found:
        if candidate not in unique:
            unique.append(candidate)
    return unique


def resolve_run_dir(
    ref: str | Path,
    *,
    want: str,
    part: Literal["run", "train"] = "run",
    root: str | Path | None = None,
) -> Path:
    """The folder of run ``ref`` that holds the file ``want``.

    ``part="run"``: the run folder (events.jsonl, summary.json), also when ``ref`` is its
    ``train/`` subfolder; ``part="train"``: the training folder (model, vocabulary), also when
    ``ref`` is the run folder above it. A bare run id is looked up in the runs folder (``root``,
    else ``$SENTITOP_RUNS_DIR`` or ``./runs``). InputError lists every folder tried.
    """
    tried = _candidates(ref, part, runs_root(root))
    for folder in tried:
        if (folder / want).is_file():
            return folder
    if part == "train":  # a run trained on SSH nodes before 2026-12-01 has its model one
        for folder in tried:  # folder too deep (train/train/: see SSHCluster.fetch)
            if folder.name == TRAIN_SUBDIR and (folder / TRAIN_SUBDIR / want).is_file():
                return folder / TRAIN_SUBDIR
    ended = _ended_without(tried, want)
    if ended:
        raise InputError(ended, hint="`sentitop runs` lists the runs and how each ended")
    shown = ", ".join(str(folder) for folder in tried)
    raise InputError(f"{ref}: no run folder with {want} (tried {shown})", hint=HINT)


REASON_SHOWN = 120
"""Characters of a failed run's reason quoted where it blocks a command (summary.json has all)."""


def _first_words(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters where a word ends, marked " …" (an instance id or a
    path is whole or left out); one word longer than the limit is cut inside it."""
    import textwrap

    if len(text) <= limit:
        return text
    cut = textwrap.shorten(text, limit, placeholder=" …")
    return cut if cut != "…" else text[: limit - 1] + "…"


def _ended_without(tried: list[Path], want: str) -> str | None:
    """`run X ended 'failed' (why) before it wrote model.pt` when one of the folders tried is a
    run that ended without ``want`` (it read "no run folder with …" for a run that is there)."""
    import json

    for folder in tried:
        try:
            summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(summary, dict) or summary.get("status") in (None, "ok"):
            continue
        reason = str(summary.get("reason") or "").split("\n", 1)[0]
        why = f" ({_first_words(reason, REASON_SHOWN)})" if reason else ""
        return f"run {folder.name} ended {summary['status']!r}{why} before it wrote {want}"
    return None


def run_id_of(ref: str | Path) -> str:
    """The run id named by ``ref``: a bare id itself, else the name of the run folder the path
    names (its train/ subfolder stands for the run); the folder need not exist here."""
    if len(Path(ref).parts) == 1 and not Path(ref).is_absolute():
        return str(ref)
    path = Path(ref).expanduser().absolute()
    return (path.parent if path.name == TRAIN_SUBDIR else path).name


def events_of(run_dir: str | Path) -> Path:
    """The events.jsonl that records ``run_dir``: its own (a `sentitop train --run-dir`
    folder, or a run folder), else, for the train/ folder of a `sentitop run`, the run
    folder's (the ranks' events go there)."""
    folder = Path(run_dir)
    own = folder / EVENTS_FILE
    parent = folder.parent / EVENTS_FILE
    if not own.is_file() and folder.name == TRAIN_SUBDIR and parent.is_file():
        return parent
    return own


def merge_into(source: Path, target: Path) -> None:
    """Move ``source`` (a file or folder) to ``target``; a folder's entries replace the
    entries of the same name in an existing ``target`` folder, the others are kept."""
    if source.is_dir() and target.is_dir():
        for entry in source.iterdir():
            merge_into(entry, target / entry.name)
        source.rmdir()
        return
    if target.is_dir():
        shutil.rmtree(target)
    os.replace(source, target)

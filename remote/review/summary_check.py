"""Refuse a run's summary.json whose figures cannot be right (wrong type, impossible value)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from engine.errors import InputError

FIGURES = (
    "wall_s",
    "time_to_threshold_s",
    "samples_per_s",
    "usd",
    "usd_per_hour",
    "started",
    "words_per_s",
    "pip_loss",
    "pip_loss_initial",
    "downtime_s",
    "usd_lost",
)
"""Top-level figures the review reads: a number of 0 or more when given (null: not measured)."""
FRACTIONS = ("accuracy", "f1")
"""Top-level figures between 0 and 1."""
COUNTS = ("epochs", "world_size", "recoveries")
"""Top-level counts: an integer of 0 or more."""
TRAIN_FIGURES = ("loss_threshold",)
TRAIN_COUNTS = ("n_train", "global_batch", "world_size")
"""Figures and counts of the nested `train` object (summaries written by `sentitop run`)."""
SHOWN_CHARS = 40
"""At most this much of a wrong value is quoted in the message."""


def shown(value: Any) -> str:
    """``value`` as a message quotes it: its repr, cut to :data:`SHOWN_CHARS` (a summary may hold
    a megabyte where a number belongs); markup in it stays text wherever the message is printed
    plainly, and callers that render with Rich escape it."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _figure(path: Path, name: str, value: Any, high: float | None = None) -> None:
    """Refuse ``value`` unless it is null, a non-finite float (read as not measured, as before)
    or a number in 0..``high``."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return
    want = f"a number from 0 to {high:g}" if high is not None else "a number (0 or more)"
    if not _is_number(value) or value < 0 or (high is not None and value > high):
        raise InputError(f"{path}: {name}: expected {want}, not {shown(value)}")


def _count(path: Path, name: str, value: Any) -> None:
    if value is not None and (type(value) is not int or value < 0):
        raise InputError(f"{path}: {name}: expected a count (0 or more), not {shown(value)}")


def check_summary(summary: dict[str, Any], path: Path) -> None:
    """Raise InputError naming ``path`` and the field when a figure of ``summary`` has the wrong
    type (a string where a number belongs) or an impossible value (a negative time, an accuracy
    above 1): the listing then leaves the run out with a warning, instead of showing it as ok
    with blank columns or averaging a wrong figure into a report."""
    status = summary.get("status")
    if status is not None and not isinstance(status, str):
        raise InputError(f"{path}: status: expected a word such as ok, not {shown(status)}")
    for name in COUNTS:
        _count(path, name, summary.get(name))
    for name in FIGURES:
        _figure(path, name, summary.get(name))
    for name in FRACTIONS:
        _figure(path, name, summary.get(name), high=1.0)
    train = summary.get("train")
    if train is not None and not isinstance(train, dict):
        raise InputError(f"{path}: train: expected an object, not {shown(train)}")
    train = train or {}
    for name in TRAIN_COUNTS:
        _count(path, f"train.{name}", train.get(name))
    for name in TRAIN_FIGURES:
        _figure(path, f"train.{name}", train.get(name))
    for where, owner in (("per_epoch", summary), ("train.per_epoch", train)):
        _check_epochs(path, where, owner.get("per_epoch"))
    _check_cost(path, summary.get("cost"))


def _check_epochs(path: Path, where: str, per_epoch: Any) -> None:
    """Each epoch's `seconds` (a wrong one was dropped silently, and the median moved)."""
    if per_epoch is None:
        return
    if not isinstance(per_epoch, list):
        raise InputError(f"{path}: {where}: expected a list of epochs, not {shown(per_epoch)}")
    for i, epoch in enumerate(per_epoch):
        if not isinstance(epoch, dict):
            raise InputError(f"{path}: {where}[{i}]: expected an object, not {shown(epoch)}")
        _figure(path, f"{where}[{i}].seconds", epoch.get("seconds"))


def _check_cost(path: Path, cost: Any) -> None:
    """The metered lines a run's training rate is read from (`cost.lines`)."""
    if cost is None:
        return
    if not isinstance(cost, dict):
        raise InputError(f"{path}: cost: expected an object, not {shown(cost)}")
    lines = cost.get("lines")
    if lines is None:
        return
    if not isinstance(lines, list):
        raise InputError(f"{path}: cost.lines: expected a list, not {shown(lines)}")
    for i, line in enumerate(lines):
        if not isinstance(line, dict):
            raise InputError(f"{path}: cost.lines[{i}]: expected an object, not {shown(line)}")
        for name in ("usd_per_hour", "start_s", "stop_s"):
            _figure(path, f"cost.lines[{i}].{name}", line.get(name))

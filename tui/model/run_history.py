"""Cheap looks at run folders: change stamps for polling, and epochs/device from events.jsonl."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from engine.events import EVENT_PREFIX, epochs_done_by

Stamp = tuple[Any, ...]
"""Something that changes when a folder's contents (as the runs table shows them) change."""

_PREFIX = EVENT_PREFIX.encode()
_WANTED = (b'"epoch"', b'"checkpoint"', b'"checkpoint_stored"', b'"train_start"', b'"rank_start"')
"""Event types the scan parses (every other line is skipped after a look at its first bytes)."""


def _mtime_ns(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


def run_stamp(run_dir: Path) -> Stamp:
    """A run folder's stamp: its mtime (files added or removed), summary.json's mtime and the
    size of events.jsonl (a live run's row comes from its events)."""
    return (
        _mtime_ns(run_dir),
        _mtime_ns(run_dir / "summary.json"),
        _size(run_dir / "events.jsonl"),
    )


def runs_stamp(runs_dir: Path) -> Stamp:
    """The runs folder's stamp: its listing plus, per run folder, its mtime and summary.json's
    mtime (a few stat calls per run; no file is read)."""
    if not runs_dir.is_dir():
        return ()
    with os.scandir(runs_dir) as entries:
        names = sorted(e.name for e in entries if e.is_dir())
    return tuple(
        (name, _mtime_ns(runs_dir / name), _mtime_ns(runs_dir / name / "summary.json"))
        for name in names
    )


@dataclass(slots=True)
class EventFacts:
    """What a run's events say about its training, for runs whose summary does not."""

    epochs_done: int = 0
    """Epochs completed: the newest `epoch` event's epoch + 1, or where the newest checkpoint
    resumes (its `epoch`), whichever is more."""
    device: str = ""
    """What the ranks trained on (`train_start`'s device, else a `rank_start`'s): cuda:0, cpu."""


def _wanted(line: bytes) -> bool:
    if not line.startswith(_PREFIX):
        return False
    head = line[len(_PREFIX) : len(_PREFIX) + 24].lstrip()
    return head.startswith(_WANTED)


def scan_events(path: Path) -> EventFacts:
    """Epochs done and device from ``path`` (an events.jsonl), parsing only the lines of the
    event types that tell them; a missing file gives empty facts."""
    facts = EventFacts()
    if not path.is_file():
        return facts
    with open(path, "rb") as fh:
        for raw in fh:
            line = raw.strip()
            if not _wanted(line):
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(event, dict):
                _note(facts, event)
    return facts


def _note(facts: EventFacts, event: dict[str, Any]) -> None:
    type_, done = event.get("type"), epochs_done_by(event)
    if done is not None:
        facts.epochs_done = max(facts.epochs_done, done)
    elif type_ == "train_start" and isinstance(event.get("device"), str):
        facts.device = event["device"]
    elif type_ == "rank_start" and not facts.device:
        device = event.get("device")
        facts.device = device if isinstance(device, str) else ""


def device_kind(device: Any) -> str:
    """GPU, CPU or "" (unknown) for a device such as cuda:0, cpu, "Tesla T4"."""
    if not isinstance(device, str) or not device:
        return ""
    return "CPU" if device.lower().startswith("cpu") else "GPU"

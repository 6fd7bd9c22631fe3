"""Chains of resumed runs: a training stopped and resumed one or more times is one training
spread over several run folders; its dollars and hours are the sum of theirs, and a stopped run
that a later one continued is part of that chain, not a result of its own (docs/recovery.md)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.events import has_live_writer, read_events
from remote.run_folder import EVENTS_FILE, SUMMARY_FILE


@dataclass(frozen=True, slots=True)
class Leg:
    """One run of a chain as the chain needs it (its summary.json, else its `run_start`)."""

    folder: Path
    resumed_from: str | None
    """The run it continued, as its summary (a path) or `run_start` event (a name) says."""
    usd: float | None
    """What it cost (None: unknown, e.g. killed before its summary)."""
    wall_s: float | None
    status: str


@dataclass(frozen=True, slots=True)
class Chain:
    """A resumed run and the stopped runs it continues: one training, paid run by run."""

    legs: tuple[Leg, ...]
    """The runs found, oldest first; the resumed run last."""
    missing: str = ""
    """The run the oldest found one continued, when its folder is gone (cost unknown)."""

    @property
    def usd(self) -> float:
        """Dollars of every run found (see :attr:`complete`)."""
        return sum(leg.usd or 0.0 for leg in self.legs)

    @property
    def wall_s(self) -> float:
        """Wall seconds of every run found."""
        return sum(leg.wall_s or 0.0 for leg in self.legs)

    @property
    def unpriced(self) -> list[str]:
        """Runs of the chain whose cost is not counted: folder gone, or no summary."""
        gone = [self.missing] if self.missing else []
        return gone + [leg.folder.name for leg in self.legs if leg.usd is None]

    @property
    def hours(self) -> str:
        """Wall hours of every run found: 2 decimals from one hour, else 3 significant."""
        hours = self.wall_s / 3600
        return f"{hours:,.2f}" if hours >= 1 else f"{hours:.3g}"

    def describe(self) -> str:
        """'resumes B ← A; 3 runs: $0.0048, 0.0092 h in all' (+ what is not counted)."""
        before = [leg.folder.name for leg in reversed(self.legs[:-1])]
        names = " ← ".join(before + ([f"{self.missing} (folder gone)"] if self.missing else []))
        text = f"resumes {names}; {len(self.legs)} runs: ${self.usd:.4f}, {self.hours} h in all"
        if self.unpriced:
            text += f" (not counted: {', '.join(self.unpriced)}: cost unknown)"
        return text


def read_leg(folder: Path) -> Leg | None:
    """The leg of the run in ``folder``: from summary.json, else from the `run_start` event of
    a run without one (running, or killed); None when it holds neither."""
    summary = _read_json(folder / SUMMARY_FILE)
    if summary:
        usd, wall = summary.get("usd"), summary.get("wall_s")
        return Leg(
            folder,
            str(summary["resumed_from"]) if summary.get("resumed_from") else None,
            float(usd) if isinstance(usd, int | float) else None,
            float(wall) if isinstance(wall, int | float) else None,
            str(summary.get("status") or "unknown"),
        )
    events = folder / EVENTS_FILE
    if not events.is_file():
        return None
    status = "running" if has_live_writer(events) else "unfinished"
    for event in read_events(events):
        if event.get("type") == "run_start":
            ref = event.get("resumed_from")
            return Leg(folder, str(ref) if ref else None, None, None, status)
    return Leg(folder, None, None, None, status)


def resume_chain(leg: Leg, known: Mapping[Path, Leg] | None = None) -> Chain | None:
    """The chain that ends with ``leg``'s run (None when it resumed nothing); the runs it
    continued come from ``known`` (by folder) or are read from their folders."""
    if not leg.resumed_from:
        return None
    index = {_key(k): v for k, v in (known or {}).items()}
    legs, seen, current = [leg], {_key(leg.folder)}, leg
    while current.resumed_from:
        folder = _locate(current.folder, current.resumed_from)
        if folder is None:
            return Chain(tuple(reversed(legs)), Path(current.resumed_from).name)
        if _key(folder) in seen:  # a loop (hand-edited summaries): stop where it closes
            break
        seen.add(_key(folder))
        current = index.get(_key(folder)) or read_leg(folder) or Leg(folder, None, None, None, "?")
        legs.append(current)
    return Chain(tuple(reversed(legs)))


def resumed_by(legs: Iterable[Leg]) -> dict[Path, list[Leg]]:
    """For each run folder (resolved) the runs among ``legs`` that continued it."""
    out: dict[Path, list[Leg]] = {}
    for leg in legs:
        before = _locate(leg.folder, leg.resumed_from) if leg.resumed_from else None
        if before is not None:
            out.setdefault(_key(before), []).append(leg)
    return out


def continued_by(folder: Path, later: Mapping[Path, list[Leg]] | None = None) -> Leg | None:
    """The newest run that continued the run in ``folder``: from ``later`` (see
    :func:`successors`), else from the runs beside it in its runs folder."""
    found = (successors(folder.parent) if later is None else later).get(_key(folder))
    return found[-1] if found else None


def successors(runs_folder: Path) -> dict[Path, list[Leg]]:
    """Each run folder (resolved) → the runs in ``runs_folder`` that continued it."""
    folders = sorted(p for p in runs_folder.iterdir() if p.is_dir())
    return resumed_by(leg for p in folders if (leg := read_leg(p)) is not None)


def resumed_at(folder: Path) -> tuple[int, int] | None:
    """(epoch, step within it) where the run in ``folder`` took its training up: its first
    rank-0 `train_start` (None: it never started training, or started fresh)."""
    events = folder / EVENTS_FILE
    if not events.is_file():
        return None
    for event in read_events(events):
        if event.get("type") == "train_start" and event.get("rank", 0) == 0:
            epoch, step = event.get("resumed_epoch"), event.get("resumed_step")
            if not isinstance(epoch, int) or (epoch == 0 and not step):
                return None
            return epoch, step if isinstance(step, int) else 0
    return None


def _locate(folder: Path, ref: str) -> Path | None:
    """The run folder ``ref`` (a `resumed_from`) names: as written when absolute, else the
    folder of that name beside ``folder`` (a moved runs folder, a path relative to where the
    run started), else as written from here; None when it is gone."""
    given = Path(ref).expanduser()
    tries = [given] if given.is_absolute() else []
    tries += [folder.parent / given.name, given]
    return next((p for p in tries if p.is_dir()), None)


def _key(path: Path) -> Path:
    return path.absolute().resolve()


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}

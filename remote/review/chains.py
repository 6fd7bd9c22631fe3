"""A resumed training in the cost-vs-speed review: counted once, as its chain of runs, with
only the epoch times its own configuration trained whole."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import InputError
from remote.resume_chain import Chain, Leg, continued_by, resume_chain, resumed_at, successors

if TYPE_CHECKING:
    from collections.abc import Mapping

    from remote.run_record import RunRecord


def _key(path: Path) -> Path:
    return path.absolute().resolve()


def fold_chains(runs: list[RunRecord]) -> tuple[list[RunRecord], dict[str, Chain], list[str]]:
    """``runs`` with each resumed training counted once: a stopped run that a later one
    continued gives way to the newest run of its chain (named or not); a resumed run keeps only
    the epoch times of whole epochs trained on its own configuration (not those split by a
    mid-epoch resume, nor those a predecessor trained on other machines). Returns (the runs,
    their chains by run id, notes saying what was folded)."""

    from remote.runs_store import load_run

    out: list[RunRecord] = []
    chains: dict[str, Chain] = {}
    notes: list[str] = []
    given = {_key(r.path) for r in runs if r.source == "folder"}
    later: dict[Path, dict[Path, list[Leg]]] = {}  # runs folder → its successors, read once
    for run in runs:
        end = None
        if run.source == "folder":
            parent = _key(run.path).parent
            if parent not in later:
                later[parent] = successors(parent)
            end = _chain_end(run.path, later[parent])
        if end is not None:
            if _key(end.folder) in given or any(_key(r.path) == _key(end.folder) for r in out):
                notes.append(f"{run.run_id}: resumed, counted in the chain of {end.folder.name}")
                continue
            if end.status in ("running", "unfinished"):
                notes.append(
                    f"{run.run_id}: resumed by {end.folder.name}, which has no summary yet "
                    f"({end.status}): report that run once it has ended"
                )
            else:
                notes.append(
                    f"{run.run_id}: resumed; reported as its chain, which ends in {end.folder.name}"
                )
                run = load_run(end.folder)  # the chain stands for it
                given.add(_key(run.path))
        chain = None if run.source != "folder" else resume_chain(_leg(run))
        if chain is not None:
            chains[run.run_id] = chain
            kept, split, elsewhere = own_epochs(run, chain)
            if split or elsewhere:
                notes.append(
                    f"{run.run_id}: left out of its configuration's epoch time: "
                    + ", ".join(
                        text
                        for n, text in (
                            (split, f"{split} epoch(s) split by a mid-epoch resume"),
                            (
                                elsewhere,
                                f"{elsewhere} epoch(s) an earlier run of its chain "
                                "trained on another (or an unknown) configuration",
                            ),
                        )
                        if n
                    )
                )
            run = replace(run, epoch_seconds=kept)  # a copy: the caller's stays
        out.append(run)
    return out, chains, notes


def _leg(run: RunRecord) -> Leg:
    return Leg(run.path, run.resumed_from, run.usd, run.wall_s, run.status)


def _chain_end(folder: Path, after: Mapping[Path, list[Leg]]) -> Leg | None:
    """The newest run of the chain ``folder`` is part of, when a later run continued it."""
    end, seen = None, {_key(folder)}
    while (later := continued_by(end.folder if end else folder, after)) is not None:
        if _key(later.folder) in seen:
            break
        seen.add(_key(later.folder))
        end = later
    return end


def own_epochs(run: RunRecord, chain: Chain) -> tuple[list[float], int, int]:
    """(epoch seconds of ``run`` trained whole on its configuration, how many were split by a
    mid-epoch resume, how many an earlier run trained on another configuration)."""
    from remote.runs_store import load_run

    starts: list[tuple[int, str | None]] = []  # (first epoch it trained, its configuration)
    split: set[int] = set()
    if chain.missing:
        starts.append((0, None))
    for i, leg in enumerate(chain.legs):
        at = resumed_at(leg.folder)
        if at is None and (i or chain.missing):
            return run.epoch_seconds, 0, 0  # where it took over is unknown: keep them all
        if _key(leg.folder) == _key(run.path):
            label: str | None = run.label
        else:
            try:
                label = load_run(leg.folder).label
            except InputError:
                label = None
        starts.append((at[0] if at else 0, label))
        if at and at[1]:
            split.add(at[0])
    kept, elsewhere = [], 0
    for epoch, seconds in enumerate(run.epoch_seconds):
        owner = [label for start, label in starts if start <= epoch][-1]
        if epoch in split:
            continue
        if owner == run.label:
            kept.append(seconds)
        else:
            elsewhere += 1
    return kept, len(run.epoch_seconds) - len(kept) - elsewhere, elsewhere

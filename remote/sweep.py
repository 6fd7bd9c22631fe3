"""Scaling sweeps: one profile run at several worker counts, every run tagged with a sweep id.

Strong scaling keeps the data and the global batch fixed. Weak scaling grows the data with the
workers (``train.max_train_samples`` = per-worker samples x workers) and keeps the per-worker
batch (global batch = profile batch x workers / smallest workers), so every run takes the same
number of steps per epoch. Each run folder gets a ``sweep.json`` (sweep id, mode, index).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine.errors import InputError
from remote.profile import Profile
from remote.run_folder import runs_root
from remote.runner import EventCallback, RunOutcome, execute_run, preflight
from remote.runs_store import SWEEP_FILE
from remote.security import write_private_file


def parse_counts(text: str) -> list[int]:
    """'1,2,4' → [1, 2, 4] (distinct, ascending); InputError naming --nproc otherwise."""
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise InputError(
            f"--nproc {text!r}: expected comma-separated integers, e.g. 1,2,4"
        ) from None
    if not counts or counts[0] < 1:
        raise InputError(f"--nproc {text!r}: expected worker counts >= 1, e.g. 1,2,4")
    return counts


@dataclass(slots=True)
class SweepPlan:
    """The profiles a sweep will run, in order."""

    sweep_id: str
    mode: str
    profiles: list[Profile]
    counts: list[int]


def _with(profile: Profile, changes: dict[str, Any], flag: str = "") -> Profile:
    """``profile`` with the dotted settings of ``changes``; InputError naming ``flag`` (the
    option the changes came from) or the profile when the result does not validate."""
    data = profile.resolved()
    for dotted, value in changes.items():
        *parents, leaf = dotted.split(".")
        node = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[leaf] = value
    try:
        new = type(profile).model_validate(data)
    except ValidationError as exc:  # a setting the sweep made is out of the profile's range
        wrong = "; ".join(
            f"{'.'.join(str(k) for k in err['loc'])} = {err.get('input')!r}: {err['msg']}"
            for err in exc.errors()[:3]
        )
        where = profile.source or profile.name
        if flag:  # the value came from the command line, not the profile
            raise InputError(
                f"{flag}: out of range for {where}: {wrong}",
                hint="give worker counts within the range named",
            ) from None
        raise InputError(f"{where}: the sweep's profile is invalid: {wrong}") from None
    new._source = profile.source
    return new


def _workers_changes(profile: Profile, n: int) -> dict[str, Any]:
    """Profile changes that give ``n`` training workers."""
    if profile.provider == "local":
        return {"train.nproc": n}
    nodes = list(getattr(profile, "nodes", []))
    if profile.provider == "ec2" and len(nodes) == 1:
        per = profile.world_size() // nodes[0].count
        if n % per:
            raise InputError(
                f"--nproc {n}: {nodes[0].instance_type} runs {per} workers per "
                f"instance; give multiples of {per}"
            )
        return {"nodes.0.count": n // per}
    raise InputError(
        f"{profile.source or profile.name}: sweeps change train.nproc (local) or "
        "the count of a single EC2 node group; this profile has neither",
        hint="make one profile per configuration and `sentitop report` their runs",
    )


def plan_sweep(
    profile: Profile,
    counts: list[int],
    *,
    weak: bool = False,
    epochs: int | None = None,
    per_worker: int | None = None,
) -> SweepPlan:
    """The profiles of a strong or weak sweep over ``counts`` workers."""
    mode = "weak" if weak else "strong"
    sweep_id = f"sweep-{time.strftime('%Y%m%d-%H%M%S')}-{profile.name}"[:63]
    base_batch = profile.train.batch_size or 256
    if per_worker is not None and not weak:
        raise InputError("--per-worker sets a weak sweep's samples per worker: add --weak")
    if per_worker is not None and per_worker < 1:
        raise InputError(f"--per-worker {per_worker}: expected samples per worker >= 1")
    if weak:
        per_worker = per_worker or profile.train.max_train_samples
        if per_worker is None:
            raise InputError(
                "--weak needs the samples per worker: set train.max_train_samples "
                "in the profile (samples of the smallest run) or pass --per-worker N"
            )
    profiles = []
    for n in counts:
        changes: dict[str, Any] = {"name": f"{profile.name}-np{n}{'w' if weak else ''}"[:63]}
        changes.update(_workers_changes(profile, n))
        if epochs is not None:
            changes["train.epochs"] = epochs
        if weak:
            assert per_worker is not None
            changes["train.max_train_samples"] = per_worker * n // counts[0]
            changes["train.batch_size"] = max(n, base_batch * n // counts[0])
        profiles.append(_with(profile, changes, f"--nproc {n}"))
    return SweepPlan(sweep_id, mode, profiles, counts)


async def run_sweep(
    plan: SweepPlan,
    *,
    runs_dir: Path | None = None,
    on_event: EventCallback | None = None,
    on_run: Callable[[int, RunOutcome], None] | None = None,
    stop: asyncio.Event | None = None,
    interrupt_reason: Callable[[], str | None] | None = None,
) -> list[RunOutcome]:
    """Run every profile of ``plan`` through execute_run; stops at an interrupted run and starts
    none after ``stop`` is set (the run under way stops after its checkpoint)."""
    for profile in plan.profiles:  # one refused (its $/h over budget): before any run starts
        preflight(profile)
    outcomes: list[RunOutcome] = []
    for index, (n, profile) in enumerate(zip(plan.counts, plan.profiles, strict=True)):
        tag = {
            "sweep": plan.sweep_id,
            "mode": plan.mode,
            "index": index,
            "workers": n,
            "counts": plan.counts,
        }
        started: list[Path] = []
        try:
            outcome = await execute_run(
                profile,
                runs_dir=runs_dir or runs_root(),
                on_event=on_event,
                stop=stop,
                interrupt_reason=interrupt_reason,
                on_start=started.append,
            )
        finally:  # also when cancelled (a second Ctrl-C): the stopped run still belongs to it
            if started:
                write_private_file(started[0] / SWEEP_FILE, json.dumps(tag, indent=2))
        outcomes.append(outcome)
        if on_run is not None:
            on_run(index, outcome)
        if outcome.status == "interrupted" or (stop is not None and stop.is_set()):
            break
    return outcomes

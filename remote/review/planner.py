"""Predict hours and $ of a profile, and of candidate configurations, from past runs.

The scaling model and its inputs are described in :mod:`remote.review.scaling`.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any

from engine.errors import InputError
from remote.pricing import Catalog, load_catalog
from remote.profile import Profile
from remote.review.metrics import billed_usd
from remote.review.scaling import (
    Measurement,
    ScalingModel,
    compute_units,
    fit,
    measure,
    ring,
)
from remote.runs_store import RunRecord

__all__ = ["compute_units", "fit", "measure", "plan_profile", "ring"]

CANDIDATE_COUNTS = (1, 2, 4, 8)
"""Instance counts tried for each candidate GPU instance type."""


@dataclass(slots=True)
class Candidate:
    """One configuration with its predicted hours and $."""

    label: str
    hardware: str
    instance_type: str | None
    count: int
    workers: int
    usd_per_hour: float
    epoch_s: float
    seconds: float
    """Predicted seconds for the N epochs (+ fixed overhead where measured)."""
    usd: float
    is_target: bool = False
    actual_s: list[float] = field(default_factory=list)
    """Measured seconds of past runs of this configuration (same epochs basis)."""

    @property
    def hours(self) -> float:
        """Predicted hours."""
        return self.seconds / 3600.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "label": self.label,
            "hardware": self.hardware,
            "instance_type": self.instance_type,
            "count": self.count,
            "workers": self.workers,
            "usd_per_hour": self.usd_per_hour,
            "epoch_s": round(self.epoch_s, 3),
            "seconds": round(self.seconds, 1),
            "hours": round(self.hours, 4),
            "usd": round(self.usd, 4),
            "is_target": self.is_target,
        }


@dataclass(slots=True)
class ErrorCheck:
    """A past run predicted from the other runs (leave-one-out) vs what it measured."""

    run_id: str
    workers: int
    what: str
    predicted_s: float
    actual_s: float

    @property
    def error(self) -> float:
        """(predicted - actual) / actual."""
        return (self.predicted_s - self.actual_s) / self.actual_s


@dataclass(slots=True)
class Plan:
    """The planner's answer for a profile."""

    profile: str
    epochs: int
    deadline_h: float | None
    target: Candidate
    target_wall_s: float | None
    """Predicted wall time of `sentitop run` of the profile (local: start to end)."""
    wall_parts: dict[str, float]
    candidates: list[Candidate]
    pick: Candidate | None
    inputs: list[str]
    errors: list[ErrorCheck]
    not_predicted: list[str]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready plan."""
        return {
            "profile": self.profile,
            "epochs": self.epochs,
            "deadline_h": self.deadline_h,
            "target": self.target.to_dict(),
            "target_wall_s": self.target_wall_s,
            "wall_parts": {k: round(v, 2) for k, v in self.wall_parts.items()},
            "candidates": [c.to_dict() for c in self.candidates],
            "pick": self.pick.to_dict() if self.pick else None,
            "inputs": self.inputs,
            "prediction_errors": [
                {
                    "run": e.run_id,
                    "workers": e.workers,
                    "what": e.what,
                    "predicted_s": round(e.predicted_s, 2),
                    "actual_s": round(e.actual_s, 2),
                    "error": round(e.error, 4),
                }
                for e in self.errors
            ],
            "not_predicted": self.not_predicted,
        }


# ---------------------------------------------------------------------------- planning
def _target_hardware(profile: Profile, catalog: Catalog) -> tuple[str, str | None, int]:
    """(hardware class, instance type, instance count) of a profile's training machines."""
    if profile.provider == "local":
        return "local CPU", getattr(profile, "instance_type", None), 1
    nodes = list(getattr(profile, "nodes", []))
    types = [n.instance_type for n in nodes if n.instance_type]
    count = sum(getattr(n, "count", 1) for n in nodes)
    specs = catalog.specs(types[0]) if types else None
    models = sorted({s.gpu_model for t in types if (s := catalog.specs(t)) and s.gpu_model})
    hardware = "+".join(models) or (f"CPU {types[0]}" if types else "unknown")
    return hardware, (specs.name if specs else None), count


def _matches(run: RunRecord, profile: Profile, workload: str) -> bool:
    return (
        run.status == "ok"
        and bool(run.epoch_seconds)
        and (run.workload == workload or (run.source == "csv" and run.workload == profile.name))
    )


def _prediction_errors(
    measurements: list[Measurement], hardware: str, epochs: int
) -> list[ErrorCheck]:
    """Each run predicted from the others (leave-one-out), where the others allow a fit."""
    checks: list[ErrorCheck] = []
    for i, m in enumerate(measurements):
        others = measurements[:i] + measurements[i + 1 :]
        try:
            model = fit(others, hardware)
        except InputError:
            continue
        predicted = model.epoch_s(m.workers, m.units, m.n_train)
        checks.append(ErrorCheck(m.run.run_id, m.workers, "epoch s", predicted, m.epoch_s))
        if m.run.wall_s is not None and m.run.source == "folder" and model.fixed_s is not None:
            wall = model.fixed(m.workers) + m.run.prep_s + m.run.epochs * (predicted + model.eval_s)
            checks.append(ErrorCheck(m.run.run_id, m.workers, "wall s", wall, m.run.wall_s))
    return checks


def plan_profile(
    profile: Profile,
    runs: list[RunRecord],
    *,
    epochs: int | None = None,
    deadline_h: float | None = None,
    catalog: Catalog | None = None,
) -> Plan:
    """Predict the profile's run and the candidate configurations from ``runs``."""
    from remote.runs_store import workload_keys

    catalog = catalog or load_catalog()
    cfg = profile.to_train_config(".", ".")
    n_epochs = epochs or cfg.epochs
    workload, data_key = workload_keys(profile.resolved())
    hardware, instance_type, count = _target_hardware(profile, catalog)
    matching = [r for r in runs if _matches(r, profile, workload)]
    by_hw: dict[str, list[Measurement]] = {}
    for run in matching:
        by_hw.setdefault(run.hardware, []).append(measure(run))
    if hardware not in by_hw:
        seen = ", ".join(sorted(by_hw)) or "none"
        raise InputError(
            f"{profile.source or profile.name}: no finished past run of this workload (model "
            f"and seq_len) on {hardware} to predict from (runs of it on: {seen})",
            hint="run the profile or a small sweep of it first (`sentitop sweep PROFILE "
            "--nproc 1,2 --epochs 1`), or import published runs with --import FILE.csv",
        )
    models = {hw: fit(ms, hw) for hw, ms in by_hw.items()}
    model = models[hardware]
    inputs = [line for m in models.values() for line in m.inputs]
    same_data = [r for r in matching if r.data_key == data_key and r.n_train]
    n_train = same_data[-1].n_train if same_data else None
    if n_train is None:
        inputs.append(
            "training-set size: no past run on the same data; assumed equal to the measured runs'"
        )
    else:
        inputs.append(f"training-set size: {n_train:,} samples (past runs on the same data)")
    book_rate = _training_rate(profile, catalog)
    workers = profile.world_size(catalog)
    evals = math.ceil(n_epochs / cfg.eval_every) if cfg.eval_every else 0
    threads = profile.train.threads
    units = compute_units(profile.provider, workers, threads)
    epoch_s = model.epoch_s(workers, units, n_train)
    fixed = model.fixed(workers)
    prep = _prep_s(same_data or matching, cached=bool(same_data))
    parts = {
        "fixed (start-up, loading, teardown)": fixed,
        "preprocessing": prep,
        "training": n_epochs * epoch_s,
        "evaluation": evals * model.eval_s,
    }
    wall = sum(parts.values()) if model.fixed_s is not None else None
    if wall is None:
        inputs.append(
            "fixed start-up/teardown: not measured for this hardware (imported runs); "
            "hours below are training time only"
        )
    label = f"local ×{workers} proc" if profile.provider == "local" else f"{count}×{instance_type}"
    target = _candidate(
        label,
        hardware,
        instance_type,
        count,
        workers,
        units,
        book_rate,
        model,
        n_epochs,
        n_train,
        evals,
        is_target=True,
    )
    candidates = [
        target,
        *_candidates(
            profile,
            models,
            catalog,
            n_epochs,
            n_train,
            evals,
            book_rate,
            skip=(instance_type, count, workers),
        ),
    ]
    for cand in candidates:
        cand.actual_s = [
            r.train_s / r.epochs * n_epochs
            + (r.wall_s - r.train_s if r.wall_s and r.source == "folder" else 0.0)
            for r in matching
            if r.label == cand.label
        ]
    pick = None
    if deadline_h is not None:
        meeting = [c for c in candidates if c.hours <= deadline_h]
        pick = min(meeting, key=lambda c: (c.usd, c.hours)) if meeting else None
    errors = [e for hw, ms in by_hw.items() for e in _prediction_errors(ms, hw, n_epochs)]
    unmeasured = sorted({r.gpu_model for r in catalog.rows() if r.gpus > 0} - set(models))
    not_predicted = (
        [f"no past runs of this workload on {', '.join(unmeasured)}"] if unmeasured else []
    )
    return Plan(
        profile.name,
        n_epochs,
        deadline_h,
        target,
        wall,
        parts,
        sorted(candidates, key=lambda c: (c.hardware, c.workers, c.usd)),
        pick,
        inputs,
        errors,
        not_predicted,
    )


def _training_rate(profile: Profile, catalog: Catalog) -> float:
    from remote.pricing import PriceBook

    book = PriceBook.from_catalog(catalog, profile.region)
    return sum(
        line.total_usd_per_hour
        for line in profile.cost_lines(book)
        if line.stage in ("train", "all")
    )


def _prep_s(runs: list[RunRecord], *, cached: bool) -> float:
    values = [r.prep_s for r in runs if r.data_cached == cached]
    return statistics.median(values) if values else 0.0


def _candidate(
    label: str,
    hardware: str,
    instance_type: str | None,
    count: int,
    workers: int,
    units: float,
    rate: float,
    model: ScalingModel,
    epochs: int,
    n_train: int | None,
    evals: int,
    *,
    is_target: bool = False,
) -> Candidate:
    epoch_s = model.epoch_s(workers, units, n_train)
    seconds = epochs * epoch_s + evals * model.eval_s + model.fixed(workers)
    return Candidate(
        label,
        hardware,
        instance_type,
        count,
        workers,
        rate,
        epoch_s,
        seconds,
        billed_usd(seconds, rate),
        is_target,
    )


def _candidates(
    profile: Profile,
    models: dict[str, ScalingModel],
    catalog: Catalog,
    epochs: int,
    n_train: int | None,
    evals: int,
    local_rate: float,
    skip: tuple[str | None, int, int],
) -> list[Candidate]:
    out: list[Candidate] = []
    if "local CPU" in models and profile.provider == "local":
        cores = os.cpu_count() or 1
        for n in sorted({1, 2, cores} | set(models["local CPU"].compute_by_workers)):
            if n != skip[2]:
                units = compute_units("local", n, profile.train.threads)
                out.append(
                    _candidate(
                        f"local ×{n} proc",
                        "local CPU",
                        skip[0],
                        1,
                        n,
                        units,
                        local_rate,
                        models["local CPU"],
                        epochs,
                        n_train,
                        evals,
                    )
                )
    for hw, model in models.items():
        if hw == "local CPU":
            continue
        for row in catalog.rows():
            if (
                row.gpu_model != hw
                or row.gpus < 1
                or row.on_demand_usd is None
                or row.region != profile.region
            ):
                continue
            for count in CANDIDATE_COUNTS:
                if (row.name, count) == skip[:2]:
                    continue
                out.append(
                    _candidate(
                        f"{count}×{row.name}",
                        hw,
                        row.name,
                        count,
                        count * row.gpus,
                        count * row.gpus,
                        count * row.on_demand_usd,
                        model,
                        epochs,
                        n_train,
                        evals,
                    )
                )
    return out

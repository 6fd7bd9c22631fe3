"""Predict hours and $ of a profile, and of candidate configurations, from past runs.

The model, fitted per hardware class (a GPU model, or 'local CPU') on runs of the same
workload (model shape and sequence length):

    epoch_s(n) = compute(n) + sync(n)
    compute(n) = C · (n_train / n_train_m) / units(n)
    units(n)   = n GPUs; locally the busy cores min(n · threads per rank, cores)
    sync(n)    = steps · (a₁ + k · 2(n-1)/n)         ring all-reduce + optimizer step

C is the compute of one epoch on one unit (measured epoch time minus the measured
`allreduce_opt` seconds of the `phase` events, times the run's units; runs of the same worker
count are preferred when planning that count); a₁ and k are
fitted to the per-step `allreduce_opt` seconds of the runs (a₁ from 1-worker runs, k from
multi-worker runs). Runs without phase events (imported CSV rows) give C from 1-worker runs and
k from the epoch time left over at n > 1. A predicted wall time adds the measured fixed
overhead (process start-up, data loading, teardown), preprocessing when the dataset is not
cached, and evaluation per epoch.
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
from remote.runs_store import RunRecord

CANDIDATE_COUNTS = (1, 2, 4, 8)
"""Instance counts tried for each candidate GPU instance type."""


def compute_units(
    provider: str, workers: int, threads: int | None = None, cores: int | None = None
) -> float:
    """Parallel compute units of a run: GPUs (one per worker), or CPU cores busy locally.

    Local ranks run ``threads`` torch threads each (default: cores // workers, as the engine
    does); the busy cores are capped by the machine's.
    """
    if provider != "local":
        return float(workers)
    cores = cores or os.cpu_count() or 1
    per_rank = threads or max(1, cores // workers)
    return float(min(workers * per_rank, cores))


def ring(n: int) -> float:
    """Ring all-reduce traffic factor 2(n-1)/n (0 for one worker)."""
    return 2.0 * (n - 1) / n if n > 1 else 0.0


@dataclass(slots=True)
class Measurement:
    """What one past run says about its hardware class."""

    run: RunRecord
    workers: int
    units: float
    """Compute units busy (GPUs, or CPU cores for local runs)."""
    epoch_s: float
    steps: float | None
    """Optimizer steps per epoch (None for imported rows)."""
    sync_s: float | None
    """Measured allreduce_opt seconds per epoch, mean over ranks (None for imported rows)."""
    eval_s: float
    fixed_s: float | None
    n_train: int | None

    @property
    def label(self) -> str:
        """Run id and worker count."""
        return f"{self.run.run_id} ({self.workers} worker(s))"


def measure(run: RunRecord) -> Measurement:
    """The measurement of one run."""
    phases = [p for p in run.phases if isinstance(p.get("allreduce_opt"), int | float)]
    sync = steps = None
    if phases:
        sync = statistics.fmean(float(p["allreduce_opt"]) for p in phases)
        steps = statistics.fmean(float(p.get("steps") or 0) for p in phases) or None
    eval_s = run.eval_s / max(1, run.epochs)
    fixed = None
    if run.wall_s is not None and run.source == "folder":
        fixed = max(0.0, run.wall_s - run.train_s - run.eval_s - run.prep_s)
    return Measurement(
        run,
        run.workers,
        compute_units(run.provider, run.workers, run.threads),
        epoch_s=statistics.median(run.epoch_seconds),
        steps=steps,
        sync_s=sync,
        eval_s=eval_s,
        fixed_s=fixed,
        n_train=run.n_train,
    )


@dataclass(slots=True)
class ScalingModel:
    """Fitted per-epoch model of one hardware class on one workload."""

    hardware: str
    compute_1: float
    """Seconds of compute of one epoch on one unit (GPU or core), at ``n_train`` samples."""
    n_train: int | None
    steps: float | None
    a1: float
    """Per-step (per-epoch for imported rows) seconds of sync at one worker."""
    k: float
    """Per-step (per-epoch) seconds of all-reduce per unit of ring traffic."""
    per_step: bool
    eval_s: float
    fixed_s: float | None
    fixed_by_workers: dict[int, float]
    """Mean fixed seconds by worker count, where at least two runs measured it (one run is too
    noisy on a shared machine: start-up times swing by a third; the mean of all runs is used)."""
    compute_by_workers: dict[int, float]
    """compute_1 measured by runs of that many workers (preferred when planning that count)."""
    inputs: list[str] = field(default_factory=list)

    def epoch_s(
        self,
        workers: int,
        units: float | None = None,
        n_train: int | None = None,
        steps: float | None = None,
    ) -> float:
        """Predicted training seconds of one epoch of ``workers`` on ``units`` compute units."""
        scale = (n_train / self.n_train) if n_train and self.n_train else 1.0
        base = self.compute_by_workers.get(workers, self.compute_1)
        compute = base * scale / (units or workers)
        sync = self.a1 + self.k * ring(workers)
        if self.per_step:
            count = steps if steps is not None else (self.steps or 1.0) * scale
            sync *= count
        return compute + sync

    def fixed(self, workers: int) -> float:
        """Fixed seconds of a run (start-up, data loading, teardown); 0 when never measured."""
        if workers in self.fixed_by_workers:
            return self.fixed_by_workers[workers]
        return self.fixed_s or 0.0


def fit(measurements: list[Measurement], hardware: str) -> ScalingModel:
    """Fit the scaling model to measurements of one hardware class and workload."""
    if not measurements:
        raise InputError(
            f"no past runs on {hardware} to predict from",
            hint="run the profile (or a sweep) once, or import published runs",
        )
    n_ref = next((m.n_train for m in measurements if m.n_train), None)
    per_step = all(m.sync_s is not None and m.steps for m in measurements)
    inputs: list[str] = []

    def scale(m: Measurement) -> float:
        return (n_ref / m.n_train) if n_ref and m.n_train else 1.0

    computes: list[tuple[int, float]] = []  # (workers, C = one epoch on one worker)
    steps: float | None = None
    if per_step:
        per = [(m, m.sync_s / m.steps) for m in measurements]  # type: ignore[operator]
        ones = [x for m, x in per if m.workers == 1]
        a1 = statistics.fmean(ones) if ones else 0.0
        multi = [(x - a1) / ring(m.workers) for m, x in per if m.workers > 1]
        k = max(0.0, statistics.fmean(multi)) if multi else 0.0
        for m in measurements:
            compute = (m.epoch_s - m.sync_s) * scale(m)  # type: ignore[operator]
            computes.append((m.workers, compute * m.units))
        steps = statistics.fmean(m.steps * scale(m) for m in measurements)  # type: ignore[operator]
        inputs.append(
            f"sync per step: a1 = {a1 * 1000:.2f} ms (optimizer, 1 worker"
            f"{'' if ones else ': not measured, 0'}), all-reduce k = {k * 1000:.2f} ms"
            f" x 2(n-1)/n{'' if multi else ' (no multi-worker run: 0)'}"
        )
    else:
        ones = [m.epoch_s * scale(m) for m in measurements if m.workers == 1]
        if not ones:
            raise InputError(
                f"{hardware}: imported runs need a 1-worker run to separate "
                "compute from all-reduce time"
            )
        c1 = statistics.fmean(ones)
        a1 = 0.0
        multi = [
            (m.epoch_s * scale(m) - c1 / m.workers) / ring(m.workers)
            for m in measurements
            if m.workers > 1
        ]
        k = max(0.0, statistics.fmean(multi)) if multi else 0.0
        computes = [(1, x) for x in ones]
        inputs.append(
            f"all-reduce per epoch: k = {k:,.1f} s x 2(n-1)/n, from the epoch time "
            "left over at n > 1 (no phase events in imported runs)"
        )
    by_workers: dict[int, list[float]] = {}
    for n, c in computes:
        by_workers.setdefault(n, []).append(c)
    compute_by = {n: statistics.fmean(v) for n, v in by_workers.items()}
    compute_1 = statistics.fmean(c for _, c in computes)
    fixed = [m for m in measurements if m.fixed_s is not None]
    fixed_by: dict[int, list[float]] = {}
    for m in fixed:
        fixed_by.setdefault(m.workers, []).append(m.fixed_s)  # type: ignore[arg-type]
    unit = "one CPU core" if measurements[0].run.provider == "local" else "one GPU"
    inputs.insert(
        0, f"{hardware}: {len(measurements)} run(s): " + ", ".join(m.label for m in measurements)
    )
    inputs.insert(
        1,
        f"compute of one epoch on {unit}: {compute_1:,.1f} s"
        + (f" at {n_ref:,} samples" if n_ref else ""),
    )
    return ScalingModel(
        hardware=hardware,
        compute_1=compute_1,
        n_train=n_ref,
        steps=steps,
        a1=a1,
        k=k,
        per_step=per_step,
        eval_s=statistics.fmean(m.eval_s for m in measurements),
        fixed_s=statistics.fmean(m.fixed_s for m in fixed) if fixed else None,  # type: ignore[misc]
        fixed_by_workers={n: statistics.fmean(v) for n, v in fixed_by.items() if len(v) > 1},
        compute_by_workers=compute_by,
        inputs=inputs,
    )


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

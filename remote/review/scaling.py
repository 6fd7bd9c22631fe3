"""The planner's scaling model: measurements from past runs and the fitted epoch-time model.

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
k from the epoch time left over at n > 1; a run folder without them (a truncated events.jsonl)
is left out, with a line in the inputs, when other runs of its class have them. A predicted
wall time adds the measured fixed overhead (process start-up, data loading, teardown),
preprocessing when the dataset is not cached, and evaluation per epoch.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field

from engine.errors import InputError
from remote.run_record import RunRecord


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


def _timed(m: Measurement) -> bool:
    """True when the run's `phase` events measured its sync seconds and steps."""
    return m.sync_s is not None and bool(m.steps)


def fit(measurements: list[Measurement], hardware: str) -> ScalingModel:
    """Fit the scaling model to measurements of one hardware class and workload."""
    if not measurements:
        raise InputError(
            f"no past runs on {hardware} to predict from",
            hint="run the profile (or a sweep) once, or import published runs",
        )
    inputs: list[str] = []
    untimed = [m for m in measurements if m.run.source == "folder" and not _timed(m)]
    if untimed and any(_timed(m) for m in measurements):
        measurements = [m for m in measurements if all(m is not u for u in untimed)]
        inputs.append(
            f"left out {len(untimed)} run folder(s) whose events.jsonl has no `phase` events "
            "(truncated, or written before they existed): " + ", ".join(m.label for m in untimed)
        )
    n_ref = next((m.n_train for m in measurements if m.n_train), None)
    per_step = all(_timed(m) for m in measurements)

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
                f"{hardware}: runs without `phase` events (imported rows, or run folders whose "
                "events.jsonl lacks them) need a 1-worker run to separate compute from "
                "all-reduce time"
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
            "left over at n > 1 (no `phase` events in these runs)"
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


def prediction_errors(measurements: list[Measurement], hardware: str) -> list[ErrorCheck]:
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


def log_band(errors: list[ErrorCheck]) -> float:
    """Largest |log(1 + error)| of the checks (0 when there are none): epoch time and, where
    measured, the whole run's wall time, which a prediction of a run's hours includes (start-up
    swings by a third on a shared machine: an epoch-only band hid that)."""
    logs = [abs(math.log1p(e.error)) for e in errors if e.error > -1]
    return max(logs, default=0.0)

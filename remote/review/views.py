"""Textual-free data of the dashboard's cost/speed view: $ vs hours, efficiency, the frontier."""

from __future__ import annotations

import math
from dataclasses import dataclass

from remote.review.chains import fold_chains
from remote.review.metrics import cheapest_within, pareto_front, series_metrics
from remote.run_record import RunRecord


@dataclass(frozen=True, slots=True)
class ViewPoint:
    """One configuration on the scatter."""

    label: str
    workers: int
    hours: float
    usd: float
    speedup: float
    efficiency: float
    on_front: bool
    is_pick: bool
    untrusted: bool = False
    """The efficiency is super-linear by far (remote.review.metrics.is_untrusted)."""


@dataclass(frozen=True, slots=True)
class CostSpeedData:
    """What the view draws: points, the frontier (fastest first) and the deadline pick."""

    epochs: int
    baseline: str
    mode: str
    points: tuple[ViewPoint, ...]
    front: tuple[tuple[float, float], ...]
    """(hours, usd) of the Pareto frontier, fastest first."""
    deadline_h: float | None
    message: str = ""
    """Why there is nothing to draw (empty when there is)."""


def cost_speed_data(
    runs: list[RunRecord], *, epochs: int | None = None, deadline_h: float | None = None
) -> CostSpeedData:
    """The view's data for ``runs`` as one series (empty with a message when none trained); a
    resumed training counts once, as its chain (remote.review.chains.fold_chains)."""
    usable = [r for r in fold_chains(runs)[0] if r.epoch_seconds]
    if not usable:
        return CostSpeedData(
            epochs or 0, "", "", (), (), deadline_h, "select runs that finished at least one epoch"
        )
    try:
        series = series_metrics(usable, epochs=epochs)
    except ValueError as exc:  # runs of other workloads or other data: nothing to compare
        return CostSpeedData(epochs or 0, "", "", (), (), deadline_h, str(exc))
    front = pareto_front(series.configs)
    pick = cheapest_within(series.configs, deadline_h) if deadline_h is not None else None
    points = tuple(
        ViewPoint(
            c.label,
            c.workers,
            c.hours,
            c.usd,
            c.speedup if math.isfinite(c.speedup) else 0.0,
            c.efficiency if math.isfinite(c.efficiency) else 0.0,
            c in front,
            c is pick,
            c.untrusted,
        )
        for c in series.configs
    )
    return CostSpeedData(
        series.epochs,
        series.baseline.label,
        series.mode,
        points,
        tuple((c.hours, c.usd) for c in front),
        deadline_h,
    )

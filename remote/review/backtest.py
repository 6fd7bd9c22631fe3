"""Leave-one-out back-test of the planner's GPU model on the old study's runs.

Each published run (1, 4 and 8 M60 GPUs, 10 epochs of the seed model) is predicted by the same
formula the planner uses for GPU sets (remote.review.candidates) from the other runs only:

- the 1-GPU run: the M60 rate is gone, so it comes from the development host's measured core
  rate, transferred by memory bandwidth (remote.review.transfer);
- a multi-GPU run: the M60 rate from the 1-GPU run, the all-reduce cost from the other
  multi-GPU run.

The band is the planner's, from every back-test: it includes the left-out row's own error
(in-sample). Three runs on one GPU model and one measured host give no out-of-sample band:
without the 1-GPU run no device pair is left to test the transfer, and without one multi-GPU
run the other cannot be predicted (it needs the all-reduce cost of a multi-GPU run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources

from remote.review.scaling import ring
from remote.review.transfer import Workload, bundled_anchors, transfer_rate
from remote.runs_store import RunRecord, import_csv

STUDY_SAMPLES = 19_170_000
"""Training samples per epoch of the old study (inferred: see device_rates.csv)."""

STUDY_BATCH = 512
"""Global batch of the old study (profiles/aws-seed-g3.yaml)."""


@dataclass(frozen=True, slots=True)
class LooRow:
    """One study run predicted from the others."""

    run: str
    gpus: int
    predicted_s: float
    actual_s: float
    band: float
    """The planner's band factor for this prediction (in-sample)."""
    basis: str

    @property
    def error(self) -> float:
        """(predicted - actual) / actual."""
        return self.predicted_s / self.actual_s - 1

    @property
    def within(self) -> bool:
        """Actual inside [predicted / band, predicted · band] (1e-6 relative slack: CSV rounding)."""
        lo, hi = self.predicted_s / self.band, self.predicted_s * self.band
        return lo / (1 + 1e-6) <= self.actual_s <= hi * (1 + 1e-6)


def study_runs() -> list[RunRecord]:
    """The old study's published runs (remote/review/data/seed_study.csv)."""
    path = resources.files("remote.review.data").joinpath("seed_study.csv")
    return import_csv(str(path))


def _k(one: RunRecord, multi: RunRecord) -> float:
    """All-reduce seconds per epoch and ring unit left over by a multi-GPU run."""
    return (multi.epoch_s - one.epoch_s / multi.gpus) / ring(multi.gpus)


def study_leave_one_out() -> list[LooRow]:
    """Every study run predicted from the others."""
    runs = sorted(study_runs(), key=lambda r: r.gpus)
    one, multis = runs[0], runs[1:]
    seed = Workload.of_preset("seed", 100, STUDY_BATCH)
    out: list[LooRow] = []
    host = [a for a in bundled_anchors() if a.device != "M60"]
    est = transfer_rate(seed, "M60", host)
    predicted = one.epochs * STUDY_SAMPLES / est.samples_per_s
    out.append(LooRow(one.run_id, 1, predicted, one.train_s, math.exp(est.band_log), est.basis))
    for m in multis:
        other = next(x for x in multis if x is not m)
        k = _k(one, other)
        epoch = one.epoch_s / m.gpus + k * ring(m.gpus)
        count_band = max(
            abs(math.log((one.epoch_s / x.gpus + _k(one, y) * ring(x.gpus)) / x.epoch_s))
            for x in multis
            for y in multis
            if x is not y
        )
        basis = (
            f"M60 rate from {one.run_id}; all-reduce {k:,.1f} s/epoch x 2(n-1)/n from "
            f"{other.run_id}"
        )
        out.append(
            LooRow(
                m.run_id,
                m.gpus,
                m.epochs * epoch,
                m.train_s,
                math.exp(count_band),
                basis,
            )
        )
    return out

"""Leave-one-out back-test of the planner's GPU model on the old study's runs.

Each published run (1, 4 and 8 M60 GPUs, 10 epochs of the seed model) is predicted by the same
formula the planner uses for GPU sets (remote.review.candidates) from the other runs only:

- the 1-GPU run: the M60 rate is gone, so it comes from the other measured GPU (the H100, by
  sentitop's own Trainer, step curve over four batch sizes), its per-sample time scaled by
  memory bandwidth (remote.review.transfer); note the H100 ran today's code (unpacked cuDNN
  LSTM, fused Adam) and the M60 the old study's, so the error mixes hardware and software;
- a multi-GPU run: the M60 rate from the 1-GPU run, the all-reduce cost from the other
  multi-GPU run.

``band`` is the planner's, from every back-test: it includes the left-out row's own error
(in-sample). ``band_out`` leaves the row out of the back-tests too: for the 1-GPU run the
device band then comes from the host/H100 pairs alone (no GPU pair is left); for a
multi-GPU run none is left (the other multi-GPU run needs this one's all-reduce cost).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources

from remote.review.hardware import device_rates
from remote.review.scaling import ring
from remote.review.transfer import (
    Workload,
    back_tests,
    band_logs,
    bundled_anchors,
    transfer_rate,
)
from remote.run_record import RunRecord
from remote.runs_store import import_csv

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
    band_out: float | None
    """The band from back-tests without this run (None: none is left)."""
    basis: str

    @property
    def error(self) -> float:
        """(predicted - actual) / actual."""
        return self.predicted_s / self.actual_s - 1

    @property
    def within(self) -> bool:
        """Actual inside [predicted / band, predicted · band] (1e-6 slack: CSV rounding)."""
        return self._inside(self.band)

    @property
    def within_out(self) -> bool | None:
        """Actual inside the out-of-sample band (None when there is none)."""
        return None if self.band_out is None else self._inside(self.band_out)

    def _inside(self, band: float) -> bool:
        lo, hi = self.predicted_s / band, self.predicted_s * band
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
    without = tuple(r for r in device_rates() if r.device != "M60")
    bands_out = band_logs(back_tests(without))
    band_out = math.exp(bands_out["device_gpu"] or bands_out["device"])
    out.append(
        LooRow(one.run_id, 1, predicted, one.train_s, math.exp(est.band_log), band_out, est.basis)
    )
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
                None,
                basis,
            )
        )
    return out

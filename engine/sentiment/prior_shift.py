"""Prior shift: estimate a batch's positive rate from a model's P(positive) by EM, and re-weight.

A classifier trained where 80 % of reviews are positive says P(positive) under that prior. On
reviews of another category whose positive rate differs (a rating-balanced sample, a product
line that disappoints), its 0.5 threshold sits in the wrong place even when its ranking is good.
Saerens, Latinne & Decaestecker (2002, "Adjusting the outputs of a classifier to new a priori
probabilities") estimate the new rate from the unlabelled batch alone: alternate re-weighting
each P(positive) by new/old prior odds and taking the mean of the re-weighted probabilities
until it stops moving. It needs probabilities calibrated on the training distribution (the
trainer's best-epoch model is; see BENCHMARKS.md) and a batch large enough to average over.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from engine.errors import InputError

MIN_TEXTS = 50
"""Fewest texts a rate is estimated from: the mean of fewer is too noisy to move a threshold."""

_EPS = 1e-6
_CLIP = 1e-5
"""The EM keeps the rate inside [_CLIP, 1 - _CLIP] ..."""
_BOUND = 1e-3
"""... and an estimate within _BOUND of 0 or 1 is a model without calibration, not a rate."""


@dataclass(frozen=True, slots=True)
class PriorEstimate:
    """The training and estimated batch positive rates, and how the EM ended."""

    source_rate: float
    """Positive rate the model's probabilities are calibrated to (its training split's)."""
    target_rate: float
    """Positive rate of the batch, estimated from the model's probabilities alone."""
    n: int
    iterations: int
    converged: bool

    def to_dict(self) -> dict[str, Any]:
        """For JSON output."""
        return asdict(self)


def _check_rate(rate: float, what: str) -> float:
    if not np.isfinite(rate) or not 0.0 < rate < 1.0:
        raise InputError(f"{what} must be strictly between 0 and 1, got {rate!r}")
    return float(rate)


def reweight(proba: np.ndarray, source_rate: float, target_rate: float) -> np.ndarray:
    """P(positive) under ``target_rate`` from P(positive) under ``source_rate`` (Bayes' rule
    with the class priors swapped)."""
    p = np.clip(np.asarray(proba, dtype=np.float64), _EPS, 1.0 - _EPS)
    pos = p * (target_rate / source_rate)
    neg = (1.0 - p) * ((1.0 - target_rate) / (1.0 - source_rate))
    out: np.ndarray = pos / (pos + neg)
    return out


def estimate_rate(
    proba: np.ndarray, source_rate: float, *, max_iter: int = 1000, tol: float = 1e-7
) -> PriorEstimate:
    """The batch's positive rate by EM on the model's probabilities (no labels used)."""
    source = _check_rate(source_rate, "the training positive rate")
    p = np.asarray(proba, dtype=np.float64)
    if p.ndim != 1 or len(p) < MIN_TEXTS:
        raise InputError(
            f"prior adaptation needs at least {MIN_TEXTS} texts scored together, got {p.size}",
            hint="score the whole batch of new reviews at once",
        )
    if not np.all(np.isfinite(p)) or p.min() < 0.0 or p.max() > 1.0:
        raise InputError("prior adaptation needs probabilities in [0, 1]")
    rate, converged, iterations = source, False, 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        new = float(np.clip(reweight(p, source, rate).mean(), _CLIP, 1.0 - _CLIP))
        if abs(new - rate) < tol:
            rate, converged = new, True
            break
        rate = new
    if not _BOUND < rate < 1.0 - _BOUND:
        raise InputError(
            f"the estimated positive rate of these {len(p)} texts ran to "
            f"{100 * rate:.2f} %: the model's probabilities are not calibrated enough to "
            "estimate it (a model that learned little gives ~0.5 everywhere)",
            hint="score without --adapt-prior",
        )
    return PriorEstimate(source, rate, len(p), iterations, converged)


def adapt(proba: np.ndarray, source_rate: float) -> tuple[np.ndarray, PriorEstimate]:
    """(re-weighted P(positive), the estimate): the batch scored under its own estimated rate."""
    estimate = estimate_rate(proba, source_rate)
    return reweight(proba, estimate.source_rate, estimate.target_rate), estimate


def calibrated_rate(positive_rate: float, pos_weight: float | None) -> float:
    """The prior a model's probabilities are calibrated to: the training positive rate, moved by
    the loss weight on positives when one was used (weight w acts as w times the positives)."""
    rate = _check_rate(positive_rate, "the training positive rate")
    if not pos_weight:
        return rate
    return rate * pos_weight / (rate * pos_weight + 1.0 - rate)


def source_rate_of(summary: dict[str, Any]) -> float:
    """The calibrated training prior of a run from its summary.json: ``train_positive_rate``,
    else (runs before it was recorded) the validation split's rate from its confusion matrix.
    A run that does not beat the majority rate on its validation split has no usable one."""
    if any(w.get("code") == "below_majority" for w in summary.get("warnings") or []):
        raise InputError(
            "the run does not beat the majority rate on its own validation split: its "
            "probabilities carry no prior worth adapting",
            hint="train a model that learns first (see the run's below_majority warning)",
        )
    rate = summary.get("train_positive_rate")
    if rate is None:
        confusion = summary.get("confusion")
        if not confusion:
            raise InputError(
                "the run's summary.json has neither train_positive_rate nor a validation "
                "confusion matrix: its training prior is unknown",
                hint="retrain with this version, or score without --adapt-prior",
            )
        (tn, fp), (fn, tp) = confusion
        total = tn + fp + fn + tp
        rate = (fn + tp) / total if total else float("nan")
    return calibrated_rate(float(rate), summary.get("pos_weight"))


def shift_warning(estimate: PriorEstimate, threshold: float = 0.1) -> str | None:
    """A warning when the batch's estimated positive rate is far from the training one."""
    gap = estimate.target_rate - estimate.source_rate
    if abs(gap) < threshold:
        return None
    return (
        f"warning: these {estimate.n} reviews look {100 * estimate.target_rate:.0f} % positive "
        f"by the model's own estimate, against {100 * estimate.source_rate:.0f} % in its "
        "training data: at the 0.5 threshold that prior shift costs accuracy; "
        "--adapt-prior re-weights the probabilities to the estimated rate"
    )

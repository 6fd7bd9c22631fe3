"""Prior shift: estimate a batch's positive rate from a model's P(positive) by EM, and re-weight.

A classifier trained where 80 % of reviews are positive says P(positive) under that prior. On
reviews of another category whose positive rate differs (a rating-balanced sample, a product
line that disappoints), its 0.5 threshold sits in the wrong place even when its ranking is good.
Saerens, Latinne & Decaestecker (2002, "Adjusting the outputs of a classifier to new a priori
probabilities") estimate the new rate from the unlabelled batch alone: alternate re-weighting
each P(positive) by new/old prior odds and taking the mean of the re-weighted probabilities
until it stops moving. It needs probabilities calibrated on the training distribution (the
trainer's best-epoch model is; see BENCHMARKS.md) and a batch large enough to average over. A
model whose probabilities barely separate the classes (an under-trained one) makes EM amplify a
small miscalibration into a large, wrong shift; such an estimate is marked (``doubt``): no
warning is given about it and ``adapt`` keeps the plain probabilities.
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

AGREE = 0.05
"""An estimate within this of the batch's mean P(positive) or of its share predicted positive
agrees with what the model says of the batch directly: it is trusted."""
MAX_GAIN = 1.5
"""Beyond AGREE, EM may move the estimate away from the mean P(positive) at most this many times
as far as that mean lies from the training rate. For a calibrated model the factor is
1/separation - 1 (separation: mean P(positive) of positives minus that of negatives). Measured:
about 1 for a model trained on samples of seven Amazon categories scoring the eighth
(Instruments: adapting gained 4 points), 1.8-2.6 for one trained on Instruments alone scoring
other categories (adapting cost up to 40 points), 3-8 for an under-trained one (EM ran
0.87 -> 0.57 on reviews 88 % positive and adapting cost 13 points: the case that set this
rule). A larger factor turns a small miscalibration of the mean into a large, wrong shift."""


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
    mean_proba: float | None = None
    """The batch's mean P(positive), the simplest estimate of its rate."""
    predicted_rate: float | None = None
    """Share of the batch the model calls positive (P > 0.5)."""
    doubt: str | None = None
    """Why the estimate cannot be trusted (EM did not settle, or it strays from what the model
    says of the batch directly); None when it can."""
    data_rate: float | None = None
    """The training split's own positive rate where a loss weight on positives (pos_weight)
    moved the model's prior (``source_rate``) away from it; None where the two agree."""

    @property
    def trusted(self) -> bool:
        """Whether a shift may be warned about and the probabilities re-weighted to it."""
        return self.doubt is None

    def to_dict(self) -> dict[str, Any]:
        """For JSON output."""
        return asdict(self)

    def source_words(self) -> str:
        """``source_rate`` said as what it is: the training data's rate, or the prior a
        pos_weight made of it (a 0.5 that is not the data's rate reads as a wrong number)."""
        if self.data_rate is None:
            return f"{100 * self.source_rate:.0f} % in its training data"
        return (
            f"the {100 * self.source_rate:.0f} % its probabilities are calibrated to "
            f"(pos_weight re-weighted its training data's {100 * self.data_rate:.0f} %)"
        )


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
    """The batch's positive rate by EM on the model's probabilities (no labels used); an
    estimate that cannot be trusted (EM ran to 0 or 1, did not settle, or strays from what the
    model says of the batch directly) is returned with its ``doubt``, not raised. InputError
    for too few texts, probabilities outside [0, 1] or a training rate outside (0, 1)."""
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
    mean, predicted = float(p.mean()), float(np.mean(p > 0.5))
    if not _BOUND < rate < 1.0 - _BOUND:  # converged or not: the bound says more
        doubt: str | None = (
            f"EM ran to {100 * rate:.2f} % while the model's mean P(positive) is "
            f"{100 * mean:.1f} %: its probabilities are not calibrated enough to estimate the "
            "rate (a model that learned little gives ~0.5 everywhere)"
        )
    elif not converged:
        doubt = f"EM did not settle in {iterations} iterations"
    else:
        doubt = _doubt(source, rate, mean, predicted)
    return PriorEstimate(source, rate, len(p), iterations, converged, mean, predicted, doubt)


def _doubt(source: float, rate: float, mean: float, predicted: float) -> str | None:
    """Why a converged estimate cannot be trusted (see AGREE and MAX_GAIN), or None."""
    if min(abs(rate - mean), abs(rate - predicted)) <= AGREE:
        return None
    if abs(rate - mean) <= MAX_GAIN * abs(mean - source):
        return None
    return (
        f"EM ran to {100 * rate:.1f} % while the model's mean P(positive) is "
        f"{100 * mean:.1f} % and it calls {100 * predicted:.1f} % positive (its prior "
        f"{100 * source:.1f} %): its probabilities separate the classes too little, or are "
        "not calibrated, for the estimate to mean a shift (an under-trained model?)"
    )


def adapt(proba: np.ndarray, source_rate: float) -> tuple[np.ndarray, PriorEstimate]:
    """(P(positive) to decide on, the estimate): re-weighted to the batch's estimated rate, or
    the plain probabilities when that estimate cannot be trusted (``estimate.doubt``)."""
    estimate = estimate_rate(proba, source_rate)
    if not estimate.trusted:
        return np.asarray(proba, dtype=np.float64), estimate
    return reweight(proba, estimate.source_rate, estimate.target_rate), estimate


def refusal_warning(estimate: PriorEstimate) -> str:
    """What --adapt-prior says when it keeps the plain probabilities."""
    return (
        "warning: --adapt-prior kept the plain probabilities (nothing re-weighted): the "
        f"estimated positive rate cannot be trusted: {estimate.doubt}"
    )


def calibrated_rate(positive_rate: float, pos_weight: float | None) -> float:
    """The prior a model's probabilities are calibrated to: the training positive rate, moved by
    the loss weight on positives when one was used (weight w acts as w times the positives)."""
    rate = _check_rate(positive_rate, "the training positive rate")
    if not pos_weight:
        return rate
    return rate * pos_weight / (rate * pos_weight + 1.0 - rate)


def source_rate_of(summary: dict[str, Any], blended: bool | None = None) -> float:
    """The prior a run's probabilities are calibrated to, from its summary.json. A blend
    (engine/sentiment/blend.py; ``blended``: whether the scoring model uses it, by default
    whether the run applied one) refits the logit's bias on the validation split, so its
    probabilities average to that split's positive rate (from the confusion matrix); without
    one, ``train_positive_rate`` (moved by pos_weight), else (runs before it was recorded) the
    validation split's rate. A run that does not beat the majority rate on its validation split
    has no usable one."""
    if any(w.get("code") == "below_majority" for w in summary.get("warnings") or []):
        raise InputError(
            "the run does not beat the majority rate on its own validation split: its "
            "probabilities carry no prior worth adapting",
            hint="train a model that learns first (see the run's below_majority warning)",
        )
    if blended is None:
        blended = bool((summary.get("blend") or {}).get("applied"))
    rate = summary.get("train_positive_rate")
    confusion = summary.get("confusion")
    if blended and confusion:  # a blend is fitted without pos_weight (blend.py refuses one)
        return _check_rate(_positive_share(confusion), "the validation positive rate")
    if rate is None:
        if not confusion:
            raise InputError(
                "the run's summary.json has neither train_positive_rate nor a validation "
                "confusion matrix: its training prior is unknown",
                hint="retrain with this version, or score without --adapt-prior",
            )
        rate = _positive_share(confusion)
    return calibrated_rate(float(rate), summary.get("pos_weight"))


def _positive_share(confusion: list[list[int]]) -> float:
    """Share of true positives in a [[tn, fp], [fn, tp]] confusion matrix (nan when empty)."""
    (tn, fp), (fn, tp) = confusion
    total = tn + fp + fn + tp
    return (fn + tp) / total if total else float("nan")


def shift_warning(estimate: PriorEstimate, threshold: float = 0.1) -> str | None:
    """A warning when the batch's estimated positive rate is far from the training one (none
    when the estimate cannot be trusted: a warning would advise a harmful re-weighting)."""
    gap = estimate.target_rate - estimate.source_rate
    if abs(gap) < threshold or not estimate.trusted:
        return None
    return (
        f"warning: these {estimate.n} reviews look {100 * estimate.target_rate:.0f} % positive "
        f"by the model's own estimate, against {estimate.source_words()}: at the 0.5 "
        "threshold that prior shift costs accuracy; "
        "--adapt-prior re-weights the probabilities to the estimated rate"
    )

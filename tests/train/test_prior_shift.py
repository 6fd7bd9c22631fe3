"""Prior shift: EM recovers a batch's positive rate from calibrated probabilities alone, the
re-weighted decisions gain accuracy where the rate moved, and bad input is a clear error."""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import InputError
from engine.sentiment.prior_shift import (
    MIN_TEXTS,
    PriorEstimate,
    adapt,
    calibrated_rate,
    estimate_rate,
    reweight,
    shift_warning,
    source_rate_of,
)


def calibrated_batch(
    n: int, target_rate: float, source_rate: float, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(P(positive) under ``source_rate``, labels drawn at ``target_rate``): a score x ~ N(+1, 1)
    for positives and N(-1, 1) for negatives, turned into the exact Bayes posterior a perfectly
    calibrated model trained at ``source_rate`` would give (log-likelihood ratio = 2x)."""
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < target_rate).astype(int)
    x = rng.normal(np.where(labels == 1, 1.0, -1.0), 1.0)
    logit = 2.0 * x + np.log(source_rate / (1.0 - source_rate))
    return 1.0 / (1.0 + np.exp(-logit)), labels


@pytest.mark.parametrize("target", [0.2, 0.43, 0.8, 0.95])
def test_em_recovers_the_batch_rate_without_labels(target: float) -> None:
    proba, labels = calibrated_batch(20_000, target, source_rate=0.8, seed=int(target * 100))
    estimate = estimate_rate(proba, 0.8)
    assert estimate.converged and estimate.n == 20_000
    assert estimate.target_rate == pytest.approx(labels.mean(), abs=0.02)


def test_adapting_gains_accuracy_where_the_rate_moved_and_changes_nothing_where_not() -> None:
    proba, labels = calibrated_batch(20_000, 0.3, source_rate=0.8, seed=1)
    adapted, estimate = adapt(proba, 0.8)
    raw_acc = ((proba > 0.5) == labels).mean()
    adapted_acc = ((adapted > 0.5) == labels).mean()
    assert adapted_acc > raw_acc + 0.05  # the 0.5 cut moved to where the batch's prior puts it
    assert ((proba > 0.5) != (adapted > 0.5)).any() and estimate.target_rate < 0.4

    same, _ = calibrated_batch(20_000, 0.8, source_rate=0.8, seed=2)
    kept, est = adapt(same, 0.8)
    assert est.target_rate == pytest.approx(0.8, abs=0.02)
    assert np.abs(kept - same).max() < 0.02


def test_reweight_is_bayes_rule_with_the_priors_swapped() -> None:
    p = np.array([0.1, 0.5, 0.9])
    assert np.allclose(reweight(p, 0.7, 0.7), p)
    # P = 0.5 under a 0.8 prior means a likelihood ratio of 1/4; under 0.5 that is P = 0.2
    assert reweight(np.array([0.5]), 0.8, 0.5)[0] == pytest.approx(0.2)
    back = reweight(reweight(p, 0.8, 0.3), 0.3, 0.8)
    assert np.allclose(back, p)


def test_bad_input_is_a_clear_error() -> None:
    proba, _ = calibrated_batch(200, 0.5, 0.5)
    with pytest.raises(InputError, match=f"at least {MIN_TEXTS} texts"):
        estimate_rate(proba[: MIN_TEXTS - 1], 0.8)
    for rate in (0.0, 1.0, float("nan"), 1.5):
        with pytest.raises(InputError, match="training positive rate"):
            estimate_rate(proba, rate)
    broken = proba.copy()
    broken[3] = np.nan
    with pytest.raises(InputError, match=r"probabilities in \[0, 1\]"):
        estimate_rate(broken, 0.8)


def test_the_training_prior_of_a_run() -> None:
    assert source_rate_of({"train_positive_rate": 0.8, "pos_weight": None}) == 0.8
    # pos_weight = negatives / positives ("auto") balances the loss: calibrated to 0.5
    assert calibrated_rate(0.8, 0.25) == pytest.approx(0.5)
    assert source_rate_of({"train_positive_rate": 0.8, "pos_weight": 0.25}) == pytest.approx(0.5)
    # runs from before the field: the validation split's rate from its confusion matrix
    old = {"confusion": [[20, 5], [10, 65]], "pos_weight": None}
    assert source_rate_of(old) == pytest.approx(0.75)
    with pytest.raises(InputError, match="training prior is unknown"):
        source_rate_of({"pos_weight": None})
    learned_nothing = {"train_positive_rate": 0.8, "warnings": [{"code": "below_majority"}]}
    with pytest.raises(InputError, match="does not beat the majority rate"):
        source_rate_of(learned_nothing)


def test_an_uncalibrated_model_is_refused_not_adapted() -> None:
    """A model that learned little says ~0.49 for everything: EM would run the batch's rate to 0
    and call every review negative; that is an error, not an estimate."""
    flat = np.random.default_rng(0).uniform(0.486, 0.5004, 900)
    with pytest.raises(InputError, match="not calibrated enough"):
        adapt(flat, 0.86)


def test_the_shift_warning_names_both_rates() -> None:
    far = PriorEstimate(0.8, 0.4, 1000, 12, True)
    warning = shift_warning(far)
    assert warning is not None and "40 %" in warning and "80 %" in warning
    assert "--adapt-prior" in warning
    assert shift_warning(PriorEstimate(0.8, 0.75, 1000, 5, True)) is None

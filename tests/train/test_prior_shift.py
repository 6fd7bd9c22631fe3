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
    refusal_warning,
    reweight,
    shift_warning,
    source_rate_of,
)


def calibrated_batch(
    n: int,
    target_rate: float,
    source_rate: float,
    seed: int = 0,
    strength: float = 2.0,
    bias: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(P(positive) under ``source_rate``, labels drawn at ``target_rate``): a score
    x ~ N(+strength/2, 1) for positives and N(-strength/2, 1) for negatives, turned into the
    exact Bayes posterior a perfectly calibrated model trained at ``source_rate`` would give
    (log-likelihood ratio = strength * x; ROC AUC 0.92 at strength 2, 0.76 at 1), its logit
    moved by ``bias`` (0: calibrated)."""
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < target_rate).astype(int)
    x = rng.normal(np.where(labels == 1, strength / 2, -strength / 2), 1.0)
    logit = strength * x + np.log(source_rate / (1.0 - source_rate)) + bias
    return 1.0 / (1.0 + np.exp(-logit)), labels


@pytest.mark.parametrize("target", [0.2, 0.43, 0.8, 0.95])
def test_em_recovers_the_batch_rate_without_labels(target: float) -> None:
    proba, labels = calibrated_batch(20_000, target, source_rate=0.8, seed=int(target * 100))
    estimate = estimate_rate(proba, 0.8)
    assert estimate.converged and estimate.n == 20_000 and estimate.trusted
    assert estimate.target_rate == pytest.approx(labels.mean(), abs=0.02)


def test_adapting_gains_accuracy_where_the_rate_moved_and_changes_nothing_where_not() -> None:
    proba, labels = calibrated_batch(20_000, 0.3, source_rate=0.8, seed=1)
    adapted, estimate = adapt(proba, 0.8)
    raw_acc = ((proba > 0.5) == labels).mean()
    adapted_acc = ((adapted > 0.5) == labels).mean()
    assert adapted_acc > raw_acc + 0.05  # the 0.5 cut moved to where the batch's prior puts it
    assert ((proba > 0.5) != (adapted > 0.5)).any() and estimate.target_rate < 0.4
    assert estimate.trusted and shift_warning(estimate) is not None

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
    # a blend refits the logit's bias on the validation split: its probabilities average to
    # that split's rate, not the training split's (0.90 against 0.88 set EM off on its own data)
    blended = {**old, "train_positive_rate": 0.9, "blend": {"applied": True}}
    assert source_rate_of(blended) == pytest.approx(0.75)
    assert source_rate_of(blended, blended=False) == pytest.approx(0.9)  # the network alone
    assert source_rate_of({**blended, "blend": {"applied": False}}) == pytest.approx(0.9)
    with pytest.raises(InputError, match="training prior is unknown"):
        source_rate_of({"pos_weight": None})
    learned_nothing = {"train_positive_rate": 0.8, "warnings": [{"code": "below_majority"}]}
    with pytest.raises(InputError, match="does not beat the majority rate"):
        source_rate_of(learned_nothing)


@pytest.mark.parametrize(("low", "high", "source"), [(0.486, 0.5004, 0.86), (0.4996, 0.514, 0.14)])
def test_an_estimate_run_to_0_or_1_is_untrusted_not_adapted(
    low: float, high: float, source: float
) -> None:
    """A model that learned little says ~0.49 for everything: EM runs the batch's rate to 0 (or,
    mirrored, to 1) and would call every review negative. That was an error (eval exited 2 and
    printed no metrics) while any other untrusted estimate kept the plain probabilities: now it
    is one of them, with the reason."""
    flat = np.random.default_rng(0).uniform(low, high, 900)
    estimate = estimate_rate(flat, source)
    assert not estimate.trusted and estimate.doubt is not None
    assert min(estimate.target_rate, 1 - estimate.target_rate) < 1e-3
    assert "not calibrated enough" in estimate.doubt and "EM ran to" in estimate.doubt
    assert shift_warning(estimate) is None
    kept, again = adapt(flat, source)
    assert np.array_equal(kept, flat) and again == estimate
    assert estimate.doubt in refusal_warning(estimate)


def test_the_shift_warning_names_both_rates() -> None:
    far = PriorEstimate(0.8, 0.4, 1000, 12, True)
    warning = shift_warning(far)
    assert warning is not None and "40 %" in warning and "80 %" in warning
    assert "--adapt-prior" in warning
    assert shift_warning(PriorEstimate(0.8, 0.75, 1000, 5, True)) is None


def test_an_estimate_a_weak_model_amplifies_is_neither_warned_about_nor_adapted_to() -> None:
    """An under-trained model (ROC AUC ~0.76) whose mean P(positive) sits a few points under its
    training rate on reviews exactly as positive as its training data: EM slid 0.87 -> 0.60,
    the warning said the reviews "look 60 % positive" and advised --adapt-prior, and adapting
    cost 19 points of accuracy (`sentitop eval` of a one-epoch run: 0.88 -> 0.70)."""
    proba, labels = calibrated_batch(3000, 0.9, 0.9, seed=1, strength=1.0, bias=-0.3)
    estimate = estimate_rate(proba, 0.9)
    assert estimate.converged and estimate.target_rate < 0.65  # EM still runs away ...
    harmful = reweight(proba, 0.9, estimate.target_rate)
    assert ((harmful > 0.5) == labels).mean() < ((proba > 0.5) == labels).mean() - 0.1
    # ... but it is marked: far from the mean P(positive) (0.87) and the share called positive
    assert not estimate.trusted and estimate.doubt is not None
    assert estimate.mean_proba == pytest.approx(proba.mean())
    assert estimate.predicted_rate == pytest.approx((proba > 0.5).mean())
    assert "59.6 %" in estimate.doubt and "87.1 %" in estimate.doubt
    assert shift_warning(estimate) is None
    kept, again = adapt(proba, 0.9)
    assert np.array_equal(kept, proba) and again == estimate
    note = refusal_warning(estimate)
    assert "kept the plain probabilities" in note and estimate.doubt in note


@pytest.mark.parametrize(("strength", "target"), [(2.0, 0.3), (2.0, 0.95), (3.0, 0.2), (2.5, 0.5)])
def test_a_real_shift_scored_by_a_sharp_model_stays_trusted(strength: float, target: float) -> None:
    """The guard must not cost what works: a model that separates the classes well (ROC AUC
    0.92 and up) on a batch whose rate really moved keeps its warning and its adaptation."""
    proba, labels = calibrated_batch(5000, target, 0.8, seed=7, strength=strength)
    adapted, estimate = adapt(proba, 0.8)
    assert estimate.trusted, estimate.doubt
    assert estimate.target_rate == pytest.approx(labels.mean(), abs=0.03)
    assert ((adapted > 0.5) == labels).mean() >= ((proba > 0.5) == labels).mean() - 0.005


def test_an_unsettled_em_is_not_trusted() -> None:
    proba, _ = calibrated_batch(2000, 0.3, 0.8, seed=3)
    estimate = estimate_rate(proba, 0.8, max_iter=2)
    assert not estimate.converged and not estimate.trusted
    assert estimate.doubt is not None and "did not settle in 2 iterations" in estimate.doubt
    assert shift_warning(estimate) is None

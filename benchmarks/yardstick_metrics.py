"""Scores of probabilities against 0/1 labels: accuracy, F1 (positive class), ROC AUC, majority."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.metrics import f1_score, roc_auc_score


def scores(proba: np.ndarray, labels: np.ndarray, threshold: float = 0.5) -> dict[str, Any]:
    """accuracy, F1 of the positive class, ROC AUC (None with one class) at ``threshold``."""
    pred = (proba > threshold).astype(int)
    two_classes = 0 < labels.sum() < len(labels)
    return {
        "accuracy": round(float((pred == labels).mean()), 4),
        "f1": round(float(f1_score(labels, pred, zero_division=0.0)), 4),
        "auc": round(float(roc_auc_score(labels, proba)), 4) if two_classes else None,
    }


def best_threshold(proba: np.ndarray, labels: np.ndarray) -> float:
    """The cut (midpoint between neighbouring scores) with the highest accuracy on these labels;
    ties go to the cut closest to 0.5."""
    order = np.argsort(proba, kind="stable")
    p, y = proba[order], labels[order]
    # predicting positive above cut k (k items below): correct = negatives below + positives above
    neg_below = np.concatenate([[0], np.cumsum(1 - y)])
    pos_above = y.sum() - np.concatenate([[0], np.cumsum(y)])
    correct = neg_below + pos_above
    cuts = np.concatenate([[0.0], (p[:-1] + p[1:]) / 2, [1.0]]) if len(p) else np.array([0.5])
    best = np.flatnonzero(correct == correct.max())
    k = best[np.argmin(np.abs(cuts[best] - 0.5))]
    return float(cuts[k])


def adapted_scores(proba: np.ndarray, labels: np.ndarray, source_rate: float) -> dict[str, Any]:
    """Scores after re-weighting to the test texts' positive rate as the model estimates it
    from its own probabilities (EM, no labels: engine.sentiment.prior_shift), and that rate —
    the same rule `sentitop eval --adapt-prior` applies: an untrusted estimate keeps the plain
    probabilities and its ``doubt`` is recorded; ``error`` where the texts cannot be scored
    (too few, a bad training rate)."""
    from engine.errors import InputError
    from engine.sentiment.prior_shift import adapt

    try:
        adapted, estimate = adapt(proba, source_rate)
    except InputError as exc:
        return {"error": str(exc)}
    rate = round(estimate.target_rate, 4)
    return {**scores(adapted, labels), "estimated_rate": rate, "doubt": estimate.doubt}

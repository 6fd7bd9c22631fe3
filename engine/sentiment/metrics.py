"""Binary-classification metrics from confusion counts, and the smoothed-loss threshold clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(slots=True)
class Confusion:
    """Counts of a binary classifier at threshold 0.5 (positive = label 1), plus the loss sum."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0
    loss_sum: float = 0.0

    @property
    def n(self) -> int:
        """Samples counted."""
        return self.tp + self.fp + self.tn + self.fn

    def add(self, predicted: np.ndarray, labels: np.ndarray, loss_sum: float = 0.0) -> None:
        """Count boolean predictions against 0/1 labels."""
        pred = predicted.astype(bool)
        true = labels.astype(bool)
        self.tp += int(np.sum(pred & true))
        self.fp += int(np.sum(pred & ~true))
        self.tn += int(np.sum(~pred & ~true))
        self.fn += int(np.sum(~pred & true))
        self.loss_sum += float(loss_sum)

    def as_vector(self) -> list[float]:
        """[tp, fp, tn, fn, loss_sum] for an all-reduce."""
        return [self.tp, self.fp, self.tn, self.fn, self.loss_sum]

    @classmethod
    def from_vector(cls, values: list[float]) -> Confusion:
        """Inverse of :meth:`as_vector` (after summing over ranks)."""
        tp, fp, tn, fn, loss = values
        return cls(round(tp), round(fp), round(tn), round(fn), float(loss))

    def metrics(self) -> dict[str, Any]:
        """accuracy, precision, recall, f1, loss (mean), n and the confusion matrix."""
        n = self.n
        precision = self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0
        recall = self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {
            "accuracy": (self.tp + self.tn) / n if n else 0.0,
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "loss": self.loss_sum / n if n else 0.0,
            "n": n,
            # rows = true label (negative, positive), columns = predicted label
            "confusion": [[self.tn, self.fp], [self.fn, self.tp]],
        }


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """Area under the ROC curve: the chance a random positive scores above a random negative
    (ties count half; Mann-Whitney U from average ranks). None when a class is absent."""
    labels = labels.astype(bool)
    n_pos = int(labels.sum())
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    ranks = np.empty(len(scores), dtype=np.float64)
    # average rank (1-based) over each run of equal scores
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    ends = np.r_[starts[1:], len(scores)]
    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
        ranks[order[lo:hi]] = (lo + 1 + hi) / 2
    u = ranks[labels].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


def majority(labels: np.ndarray) -> tuple[int, float]:
    """(the more frequent 0/1 label, its share): the accuracy of always predicting it."""
    positive = float(labels.astype(bool).mean()) if len(labels) else 0.0
    return (1, positive) if positive >= 0.5 else (0, 1.0 - positive)


def score_labels(proba: np.ndarray, labels: np.ndarray, threshold: float = 0.5) -> dict[str, Any]:
    """Confusion metrics at ``threshold`` plus ROC AUC, the majority label and rate, and
    whether the accuracy beats always predicting the majority label."""
    conf = Confusion()
    conf.add(proba > threshold, labels)
    metrics = conf.metrics()
    metrics.pop("loss")
    label, rate = majority(labels)
    metrics.update(
        auc=roc_auc(proba, labels),
        majority_label=label,
        majority_rate=rate,
        beats_majority=metrics["accuracy"] > rate,
        threshold=threshold,
    )
    return metrics


@dataclass(slots=True)
class ThresholdClock:
    """Exponentially smoothed train loss and the first moment it drops below ``threshold``."""

    threshold: float
    alpha: float = 0.05
    """Weight of the newest step loss in the moving average."""
    smoothed: float | None = None
    reached_at_s: float | None = None
    reached_epoch: int | None = None
    reached_step: int | None = None

    def update(self, loss: float, *, seconds: float, epoch: int, global_step: int) -> bool:
        """Fold in one step loss; True exactly when the threshold is first crossed."""
        self.smoothed = (
            loss
            if self.smoothed is None
            else (self.alpha * loss + (1 - self.alpha) * self.smoothed)
        )
        if self.reached_at_s is None and self.smoothed < self.threshold:
            self.reached_at_s, self.reached_epoch, self.reached_step = seconds, epoch, global_step
            return True
        return False

    def state_dict(self) -> dict[str, Any]:
        """For checkpoints."""
        return {
            "smoothed": self.smoothed,
            "reached_at_s": self.reached_at_s,
            "reached_epoch": self.reached_epoch,
            "reached_step": self.reached_step,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from a checkpoint."""
        self.smoothed = state["smoothed"]
        self.reached_at_s = state["reached_at_s"]
        self.reached_epoch = state["reached_epoch"]
        self.reached_step = state["reached_step"]

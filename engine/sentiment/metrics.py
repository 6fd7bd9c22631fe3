"""Binary-classification metrics from confusion counts, and the smoothed-loss threshold clock."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

Z_95 = 1.959963984540054
"""The standard normal's 97.5th percentile: two-sided 95 % intervals."""


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


def wilson_interval(correct: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a proportion (95 % by default): sound near 0 and 1 and on
    small n, where the normal approximation is not; (0, 1) without samples."""
    if n <= 0:
        return 0.0, 1.0
    share = correct / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low = 0.0 if correct == 0 else max(0.0, centre - half)
    return low, 1.0 if correct == n else min(1.0, centre + half)


def majority_p(predicted: np.ndarray, labels: np.ndarray) -> float:
    """One-sided exact McNemar p-value that the predictions beat always answering the majority
    label on these texts: of the texts exactly one of the two gets right, how unlikely a share
    this large for the predictions is under a fair coin (1.0 when none differ)."""
    from scipy.stats import binomtest  # scipy.stats costs every trainer rank ~0.3 s to import

    label, _ = majority(labels)
    truth = labels.astype(bool)
    right = predicted.astype(bool) == truth
    ours_only = int(np.sum(right & (truth != bool(label))))
    theirs_only = int(np.sum(~right & (truth == bool(label))))
    if ours_only + theirs_only == 0:
        return 1.0
    return float(binomtest(ours_only, ours_only + theirs_only, 0.5, alternative="greater").pvalue)


def score_labels(proba: np.ndarray, labels: np.ndarray, threshold: float = 0.5) -> dict[str, Any]:
    """Confusion metrics at ``threshold`` plus ROC AUC, the accuracy's 95 % interval, the
    majority label and rate, whether the accuracy beats always predicting the majority label,
    and how likely a gain this size is by chance (``majority_p``)."""
    conf = Confusion()
    conf.add(proba > threshold, labels)
    metrics = conf.metrics()
    metrics.pop("loss")
    label, rate = majority(labels)
    metrics.update(
        auc=roc_auc(proba, labels),
        accuracy_interval=wilson_interval(conf.tp + conf.tn, conf.n),
        majority_label=label,
        majority_rate=rate,
        beats_majority=metrics["accuracy"] > rate,
        majority_p=majority_p(proba > threshold, labels),
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

"""Paired uncertainty of the yardstick's differences: per-text predictions, bootstrap CIs, McNemar.

A fold's accuracy gap between two models scored on the same texts is a paired difference: its
uncertainty comes from which texts the test happened to hold (Appliances has 137). Each scored
result keeps its per-text labels and predictions (``per_text``: packed bits, the texts in the
fold's order), so the sweep's table can give, per fold and for the mean over the loco folds, a
95 % percentile-bootstrap interval of Δ accuracy and Δ F1 (texts resampled with replacement, the
same draw for both models; the mean resamples every fold independently), and McNemar's exact
test of the accuracy gap (two-sided binomial test on the texts only one model gets right).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import binomtest

ROUNDS = 2000
"""Bootstrap resamples."""
CHUNK = 100
"""Resamples drawn at a time (memory: CHUNK × texts of a fold)."""
LEVEL = 0.95
"""Interval coverage."""


def pack(bits: np.ndarray) -> str:
    """A bool array as base64 of its packed bits."""
    return base64.b64encode(np.packbits(np.asarray(bits, dtype=bool)).tobytes()).decode()


def unpack(text: str, n: int) -> np.ndarray:
    """Inverse of :func:`pack` for ``n`` bits."""
    raw = np.frombuffer(base64.b64decode(text), dtype=np.uint8)
    return np.unpackbits(raw)[:n].astype(bool)


def per_text(predicted: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """The ``per_text`` field of a scored result: n, labels and predictions as packed bits."""
    labels = np.asarray(labels).astype(bool)
    return {"n": len(labels), "labels": pack(labels), "predicted": pack(predicted)}


def _arrays(result: dict[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """(labels, predictions) of a result, None when it did not keep them."""
    kept = result.get("per_text")
    if not kept:
        return None
    n = int(kept["n"])
    return unpack(kept["labels"], n), unpack(kept["predicted"], n)


def _acc_f1(pred: np.ndarray, true: np.ndarray, counts: np.ndarray) -> tuple[Any, Any]:
    """Accuracy and positive-class F1 of each resample; ``counts`` (R, n): how often each text
    was drawn."""
    n = counts.sum(axis=1)
    tp = counts @ (pred & true).astype(float)
    fp = counts @ (pred & ~true).astype(float)
    fn = counts @ (~pred & true).astype(float)
    correct = counts @ (pred == true).astype(float)
    f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)
    return correct / n, f1


def paired_gaps(
    folds: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], seed: int = 0
) -> dict[str, tuple[float, float, float]]:
    """Δ accuracy and Δ F1 (ours − baseline), averaged over ``folds`` ((labels, ours, baseline)
    each), with their bootstrap interval: {"accuracy": (Δ, low, high), "f1": (…)}."""
    rng = np.random.default_rng(seed)
    draws: dict[str, list[np.ndarray]] = {"accuracy": [], "f1": []}
    point = {"accuracy": 0.0, "f1": 0.0}
    for true, ours, base in folds:
        ones = np.ones((1, len(true)))
        for key, ours_v, base_v in zip(
            ("accuracy", "f1"), _acc_f1(ours, true, ones), _acc_f1(base, true, ones), strict=True
        ):
            point[key] += float(ours_v[0] - base_v[0]) / len(folds)
    for start in range(0, ROUNDS, CHUNK):
        rounds = min(CHUNK, ROUNDS - start)
        gap = {"accuracy": np.zeros(rounds), "f1": np.zeros(rounds)}
        for true, ours, base in folds:
            n = len(true)
            picks = rng.integers(0, n, size=(rounds, n)) + n * np.arange(rounds)[:, None]
            counts = np.bincount(picks.ravel(), minlength=rounds * n).reshape(rounds, n)
            counts = counts.astype(float)
            (acc_o, f1_o), (acc_b, f1_b) = _acc_f1(ours, true, counts), _acc_f1(base, true, counts)
            gap["accuracy"] += (acc_o - acc_b) / len(folds)
            gap["f1"] += (f1_o - f1_b) / len(folds)
        for key in draws:
            draws[key].append(gap[key])
    tail = (1 - LEVEL) / 2 * 100
    out = {}
    for key, parts in draws.items():
        low, high = np.percentile(np.concatenate(parts), [tail, 100 - tail])
        out[key] = (point[key], float(low), float(high))
    return out


def mcnemar_p(true: np.ndarray, ours: np.ndarray, base: np.ndarray) -> float:
    """Exact McNemar p-value (two-sided) of the accuracy gap on the same texts."""
    ours_only = int(np.sum((ours == true) & (base != true)))
    base_only = int(np.sum((ours != true) & (base == true)))
    if ours_only + base_only == 0:
        return 1.0
    return float(binomtest(ours_only, ours_only + base_only, 0.5).pvalue)


def _interval(gap: tuple[float, float, float]) -> str:
    value, low, high = (100 * v for v in gap)
    return f"{value:+.2f} [{low:+.2f}, {high:+.2f}]"


def paired_table(
    results: dict[str, dict[str, Any]], base: dict[str, dict[str, Any]], loco: Sequence[str]
) -> str | None:
    """Markdown: per fold (and the loco mean) Δ accuracy and Δ F1 vs the baseline with 95 %
    bootstrap intervals, and McNemar's p; None unless both sides kept per-text predictions."""
    rows, loco_sets = [], []
    for fold, result in results.items():
        mine, theirs = _arrays(result), _arrays(base.get(fold) or {})
        if mine is None or theirs is None or not np.array_equal(mine[0], theirs[0]):
            continue  # not kept, or not the same texts in the same order
        triple = (mine[0], mine[1], theirs[1])
        if fold in loco:
            loco_sets.append(triple)
        gaps = paired_gaps([triple])
        p = mcnemar_p(*triple)
        rows.append(
            f"| {fold} | {len(triple[0])} | {_interval(gaps['accuracy'])} | "
            f"{_interval(gaps['f1'])} | {p:.3g} |"
        )
    if not rows:
        return None
    lines = [
        "| fold | texts | Δ accuracy [95 % CI] | Δ F1 [95 % CI] | McNemar p |",
        "|---|---|---|---|---|",
        *rows,
    ]
    if len(loco_sets) == len(loco) and loco:
        gaps = paired_gaps(loco_sets)
        lines.append(
            f"| **loco mean ({len(loco)})** | {sum(len(t[0]) for t in loco_sets)} | "
            f"**{_interval(gaps['accuracy'])}** | {_interval(gaps['f1'])} | |"
        )
    return "\n".join(lines)

"""benchmarks/yardstick_significance.py: per-text bits, paired bootstrap intervals, McNemar."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from yardstick_significance import (
    mcnemar_p,
    pack,
    paired_gaps,
    paired_table,
    per_text,
    unpack,
)


def _fold(
    n: int, ours_right: float, base_right: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    true = rng.random(n) < 0.7
    ours = np.where(rng.random(n) < ours_right, true, ~true)
    base = np.where(rng.random(n) < base_right, true, ~true)
    return true, ours, base


def test_bits_round_trip_at_any_length() -> None:
    for n in (0, 1, 7, 8, 9, 137):
        bits = np.random.default_rng(n).random(n) < 0.5
        assert np.array_equal(unpack(pack(bits), n), bits)


def test_the_point_gap_is_the_metrics_gap_and_lies_in_its_interval() -> None:
    true, ours, base = _fold(800, 0.9, 0.85, 1)
    gaps = paired_gaps([(true, ours, base)])
    acc = accuracy_score(true, ours) - accuracy_score(true, base)
    f1 = f1_score(true, ours) - f1_score(true, base)
    assert gaps["accuracy"][0] == pytest.approx(acc) and gaps["f1"][0] == pytest.approx(f1)
    for value, low, high in gaps.values():
        assert low < value < high


def test_identical_models_have_a_zero_interval_and_p_one() -> None:
    true, ours, _ = _fold(300, 0.8, 0.8, 2)
    assert paired_gaps([(true, ours, ours)])["accuracy"] == (0.0, 0.0, 0.0)
    assert mcnemar_p(true, ours, ours) == 1.0


def test_a_small_fold_is_uncertain_and_a_large_clear_gap_is_not() -> None:
    small = paired_gaps([_fold(137, 0.88, 0.86, 3)])["accuracy"]
    assert small[1] < 0 < small[2]  # 137 texts cannot tell two points apart
    large = paired_gaps([_fold(20_000, 0.92, 0.88, 4)])["accuracy"]
    assert 0 < large[1] < large[0] < large[2]
    # the mean over folds: its interval is narrower than the small fold's alone
    mean = paired_gaps([_fold(137, 0.88, 0.86, 3), _fold(20_000, 0.92, 0.88, 4)])["accuracy"]
    assert mean[2] - mean[1] < small[2] - small[1]


def test_mcnemar_counts_only_the_texts_one_model_gets_right() -> None:
    true = np.ones(30, dtype=bool)
    ours = true.copy()
    base = true.copy()
    base[:10] = False  # ten texts only ours gets right, none the other way
    assert mcnemar_p(true, ours, base) == pytest.approx(2 * 0.5**10)


def test_the_table_pairs_only_the_same_texts() -> None:
    a, b = _fold(200, 0.9, 0.8, 5), _fold(300, 0.85, 0.85, 6)
    mine = {"a": {"per_text": per_text(a[1], a[0])}, "b": {"per_text": per_text(b[1], b[0])}}
    base = {"a": {"per_text": per_text(a[2], a[0])}, "b": {"per_text": per_text(b[2], b[0])}}
    text = paired_table(mine, base, ["a", "b"])
    assert text is not None and "| a | 200 |" in text and "| **loco mean (2)** | 500 |" in text
    shuffled = {"a": base["a"], "b": {"per_text": per_text(b[2], b[0][::-1])}}
    text = paired_table(mine, shuffled, ["a", "b"])
    assert text is not None and "| b |" not in text and "loco mean" not in text
    assert paired_table(mine, {}, ["a", "b"]) is None

"""`sentitop eval`: ROC AUC and the majority rate next to accuracy, and a warning when a model
does not beat always predicting the majority label."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from engine.sentiment.metrics import majority, majority_p, roc_auc, score_labels, wilson_interval
from tui.cli.commands.evaluate import (
    chance_warning,
    majority_warning,
    repeats_warning,
    report_lines,
)

ROOT = Path(__file__).resolve().parents[2]


def test_roc_auc_matches_sklearn_with_ties() -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 500)
    scores = np.round(rng.random(500) + 0.3 * labels, 1)  # many ties
    assert roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores))
    assert roc_auc(np.array([0.1, 0.9]), np.array([0, 1])) == 1.0
    assert roc_auc(np.array([0.5, 0.5]), np.array([0, 1])) == 0.5
    assert roc_auc(np.array([0.2, 0.9]), np.array([1, 1])) is None


def test_majority_and_the_warning() -> None:
    labels = np.array([1] * 7 + [0] * 3)
    assert majority(labels) == (1, 0.7)
    assert majority(1 - labels) == (0, 0.7)
    always_positive = score_labels(np.full(10, 0.9), labels)
    assert always_positive["accuracy"] == pytest.approx(0.7)
    assert always_positive["beats_majority"] is False and always_positive["auc"] == 0.5
    warning = majority_warning(always_positive)
    assert warning is not None and "does not beat always predicting positive (0.7000)" in warning
    lines = "\n".join(report_lines(always_positive))
    assert "roc_auc 0.5000" in lines and "majority rate 0.7000 (always positive)" in lines
    assert "+0.00 points" in lines
    good = score_labels(np.where(labels == 1, 0.8, 0.2), labels)
    assert good["beats_majority"] and good["auc"] == 1.0 and majority_warning(good) is None
    one_class = score_labels(np.full(3, 0.9), np.ones(3, dtype=int))
    assert "n/a (one class)" in "\n".join(report_lines(one_class))
    assert majority_warning(one_class) is not None  # 1.0 cannot beat an all-positive file


def test_the_accuracy_interval_is_wilsons() -> None:
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)  # 3.84 / 13.84
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.7225, abs=1e-4) and high == 1.0
    low, high = wilson_interval(120, 137)
    assert low < 120 / 137 < high and 0.09 < high - low < 0.12  # a small file: a wide interval
    low, high = wilson_interval(12_000, 13_700)
    assert high - low < 0.012
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_a_gain_over_the_majority_within_chance_is_warned_of() -> None:
    labels = np.array([1] * 7 + [0] * 3)
    perfect = np.where(labels == 1, 0.8, 0.2)
    # 3 texts only the model gets right, none only the majority does: p = 0.5 ** 3
    assert majority_p(perfect > 0.5, labels) == pytest.approx(0.125)
    small = score_labels(perfect, labels)
    assert small["beats_majority"] and small["majority_p"] == pytest.approx(0.125)
    warning = chance_warning(small)
    assert warning is not None and "within chance on these 10 reviews" in warning
    assert "one-sided McNemar p 0.12" in "\n".join(report_lines(small))
    many = np.array([1] * 70 + [0] * 30)
    large = score_labels(np.where(many == 1, 0.8, 0.2), many)
    assert large["majority_p"] < 1e-8 and chance_warning(large) is None
    huge = np.array([1] * 7000 + [0] * 3000)  # 0.5 ** 3000 underflows: shown as a bound, not "0"
    shown = "\n".join(report_lines(score_labels(np.where(huge == 1, 0.8, 0.2), huge)))
    assert "one-sided McNemar p < 1e-16)" in shown and "McNemar p 0)" not in shown
    # wrong on majority texts as often as right on minority ones: no evidence either way
    mixed = np.where(many == 1, 0.8, 0.2)
    mixed[:15], mixed[70:85] = 0.2, 0.8  # 15 positives wrong; 15 of the negatives wrong too
    assert majority_p(mixed > 0.5, many) > 0.5
    assert chance_warning(score_labels(np.full(10, 0.9), labels)) is None  # at it: the other one
    assert repeats_warning({"n": 100, "distinct_texts": 90}) is None
    warning = repeats_warning({"n": 100, "distinct_texts": 89})
    assert warning is not None and "only 89 of these 100 reviews" in warning


def _reviews(path: Path, n: int) -> float:
    """Write n reviews (about 75 % positive); return the positive share."""
    rng = np.random.default_rng(0)
    positives = 0
    with open(path, "w") as fh:
        for i in range(n):
            pos = rng.random() < 0.8
            positives += pos
            words = ["great", "love"] if pos else ["awful", "broke"]
            text = f"{words[i % 2]} cable number {i % 37} works {'fine' if pos else 'badly'}"
            fh.write(json.dumps({"text": text, "rating": 5 if pos else 1}) + "\n")
    return positives / n


@pytest.mark.slow
def test_eval_command_prints_auc_and_warns_below_majority(tmp_path: Path) -> None:
    from engine.config import ModelConfig, PreprocessConfig, TrainConfig
    from engine.preprocess import run_preprocess
    from engine.sentiment.trainer import DistEnv, Trainer

    raw = tmp_path / "r.jsonl"
    share = _reviews(raw, 300)
    run_preprocess(PreprocessConfig(inputs=[str(raw)], output=str(tmp_path / "d"), workers=1))
    cfg = TrainConfig(  # one tiny step at a tiny rate: the model still says "positive" always
        data_dir=str(tmp_path / "d"),
        run_dir=str(tmp_path / "run"),
        epochs=1,
        batch_size=512,
        lr=1e-6,
        warmup_steps=0,
        model=ModelConfig(hidden=4, embedding_dim=4),
        checkpoint_every_min=0,
        events_file=False,
        seed=3,
    )
    Trainer(cfg, env=DistEnv()).fit()
    proc = subprocess.run(
        [sys.executable, "-m", "tui.cli", "eval", str(tmp_path / "run"), "--input", str(raw)],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "roc_auc " in proc.stdout and f"majority rate {share:.4f}" in proc.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "tui.cli", "eval", str(tmp_path / "run"), "--input", str(raw),
         "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    metrics = json.loads(as_json.stdout)
    assert metrics["majority_rate"] == pytest.approx(share)
    assert metrics["beats_majority"] == (metrics["accuracy"] > share)
    for out in (proc.stderr, as_json.stderr):
        if metrics["beats_majority"]:
            assert "warning" not in out
        else:
            assert "does not beat always predicting positive" in out
    assert not metrics["beats_majority"]  # lr 1e-6, one step: nothing learned
    # the file repeats its texts (word, number and label cycle): said, with the counts
    distinct = metrics["distinct_texts"]
    assert distinct < 0.9 * 300
    assert f"only {distinct} of these 300 reviews have distinct texts" in proc.stderr
    assert "accuracy 95 % interval" in proc.stdout and len(metrics["accuracy_interval"]) == 2

"""The deep/wide blend fitted on validation: the fit, when it is refused, the model's logit with
it, and a real training run that records and saves it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from engine.sentiment.blend import MIN_SAMPLES, fit_blend, fit_weights, unused_path_warning
from engine.sentiment.model import ModelShape, build_model


def _paths(n: int, weights: tuple[float, float, float], seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    deep, wide = rng.normal(0, 2, n), rng.normal(0, 2, n)
    z = weights[0] * deep + weights[1] * wide + weights[2]
    labels = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(np.float64)
    return deep, wide, labels


def test_the_fit_recovers_the_mix_that_made_the_labels() -> None:
    deep, wide, labels = _paths(40_000, (0.7, 1.4, 0.3))
    got = fit_weights([deep, wide], labels)
    assert got == pytest.approx((0.7, 1.4, 0.3), abs=0.06)
    fit = fit_blend([deep, wide], labels)
    assert fit.applied and fit.log_loss_after < fit.log_loss_before  # type: ignore[operator]
    blended = got[0] * deep + got[1] * wide + got[2]
    assert fit.metrics is not None and fit.metrics["n"] == 40_000
    assert fit.metrics["accuracy"] == pytest.approx(((blended > 0) == (labels > 0.5)).mean())


def test_no_blend_where_it_cannot_be_trusted() -> None:
    deep, wide, labels = _paths(MIN_SAMPLES - 1, (1.0, 1.0, 0.0))
    small = fit_blend([deep, wide], labels)
    assert not small.applied and "too small" in small.reason
    deep, wide, labels = _paths(5_000, (1.0, 1.0, 0.0))
    one_class = fit_blend([deep, wide], np.ones_like(labels))
    assert not one_class.applied and "too small" in one_class.reason
    # both paths point the wrong way: no weight is positive, keep the plain sum
    deep, wide, labels = _paths(5_000, (-1.0, -1.0, 0.0), seed=2)
    wrong = fit_blend([deep, wide], labels)
    assert not wrong.applied and "weight <= 0" in wrong.reason and wrong.metrics is None
    assert unused_path_warning(wrong) is None


def test_a_path_that_adds_nothing_is_set_to_zero_and_the_rest_fitted_again() -> None:
    # a wide path that points the wrong way: weight 0, the deep path alone fitted again
    deep, wide, labels = _paths(5_000, (1.0, -1.0, 0.0), seed=2)
    fit = fit_blend([deep, wide], labels)
    assert fit.applied and fit.unused == ("wide",) and fit.weights is not None
    assert fit.weights[1] == 0.0 and fit.weights[0] > 0
    assert fit.weights[::2] == pytest.approx(fit_weights([deep], labels))
    assert "unused" in fit.reason and fit.summary()["unused"] == ["wide"]
    warning = unused_path_warning(fit)
    assert warning is not None and warning["code"] == "path_unused"
    assert "the wide path" in warning["message"]
    # an under-trained LSTM (one logit for every text) beside two useful paths, as after one
    # epoch: the deep path goes, the wide path and the companion stay
    rng = np.random.default_rng(3)
    wide, companion = rng.normal(0, 2, 5_000), rng.normal(0, 2, 5_000)
    z = 0.8 * wide + 1.2 * companion - 0.5
    labels = (rng.random(5_000) < 1 / (1 + np.exp(-z))).astype(np.float64)
    stuck = np.full(5_000, 1.5) + rng.normal(0, 1e-3, 5_000)
    fit = fit_blend([stuck, wide, companion], labels)
    assert fit.applied and fit.unused == ("deep",) and fit.weights is not None
    assert fit.weights[0] == 0.0 and fit.weights[1:3] == pytest.approx((0.8, 1.2), abs=0.15)
    message = unused_path_warning(fit)["message"]  # type: ignore[index]
    assert message.startswith("the LSTM (deep path) got weight 0")
    # every path useful: nothing unused, no warning
    both = fit_blend([wide, companion], labels)
    assert both.applied and both.unused == () and unused_path_warning(both) is None


def test_the_model_logit_uses_the_blend_and_old_shapes_load() -> None:
    spec = ModelShape(
        vocab_size=50, embedding_dim=4, hidden=3, layers=1, bidirectional=True, dropout=0.0,
        fc_hidden=4, pool="max", ngram_buckets=64, ngram_scale=10.0, ngram_hash=2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = build_model(spec).eval()
    with torch.no_grad():
        model.wide.weight.weight.normal_()  # type: ignore[union-attr]
    tokens = torch.randint(1, 50, (6, 9))
    lengths = torch.tensor([9, 5, 1, 7, 3, 9])
    with torch.no_grad():
        deep, wide = model.parts(tokens, lengths)
        assert wide is not None
        assert torch.allclose(model(tokens, lengths), deep + wide)
        model.spec = replace(spec, blend=(0.5, 2.0, -0.25))
        assert torch.allclose(model(tokens, lengths), 0.5 * deep + 2.0 * wide - 0.25)
    saved = json.loads(json.dumps(model.spec.to_dict()))  # as model.json holds it
    assert ModelShape.from_dict(saved) == model.spec
    old = {k: v for k, v in spec.to_dict().items() if k != "blend"}  # before the field
    assert ModelShape.from_dict(old).blend is None


@pytest.mark.slow
@pytest.mark.parametrize("blend_paths", [True, False])
def test_a_training_run_fits_and_saves_the_blend(tmp_path: Path, blend_paths: bool) -> None:
    from engine.config import ModelConfig, PreprocessConfig, TrainConfig
    from engine.preprocess import run_preprocess
    from engine.sentiment.evaluate import load_run
    from engine.sentiment.trainer import DistEnv, Trainer

    rng = np.random.default_rng(0)
    raw = tmp_path / "r.jsonl"
    good, bad = ["great", "love", "perfect", "fine"], ["awful", "broke", "junk", "poor"]
    with open(raw, "w") as fh:
        for i in range(3000):
            pos = rng.random() < 0.75
            noisy = rng.random() < 0.1  # some labels disagree with the words
            words = rng.choice(good if pos != noisy else bad, 2)
            fh.write(json.dumps({"text": f"{words[0]} item {i} was {words[1]}",
                                 "rating": 5 if pos else 1}) + "\n")  # fmt: skip
    run_preprocess(PreprocessConfig(inputs=[str(raw)], output=str(tmp_path / "d"), workers=1))
    cfg = TrainConfig(
        data_dir=str(tmp_path / "d"),
        run_dir=str(tmp_path / "run"),
        epochs=2,
        batch_size=64,
        model=ModelConfig(hidden=4, embedding_dim=8, ngram_buckets=256),
        checkpoint_every_min=0,
        events_file=False,
        blend_paths=blend_paths,
    )
    summary = Trainer(cfg, env=DistEnv()).fit()
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    spec = json.loads((tmp_path / "run" / "model.json").read_text())
    if not blend_paths:
        assert saved["blend"] is None and spec["blend"] is None
        return
    blend = saved["blend"]
    assert blend is not None and blend["n"] == saved["n_test"] > 200
    if blend["applied"]:
        assert spec["blend"] == pytest.approx(blend["weights"])
        assert saved["accuracy"] == pytest.approx(blend["accuracy_after"])
        assert blend["log_loss_after"] < blend["log_loss_before"]
        assert load_run(tmp_path / "run").model.spec.blend == pytest.approx(blend["weights"])
    else:
        assert spec["blend"] is None and blend["reason"]
    assert summary["blend"] == blend


def test_a_third_path_with_large_logits_does_not_throw_the_fit_off() -> None:
    """The companion's logits are larger than the network's; Newton's full step from the
    plain sum diverged on such paths (weights in the thousands): steps are halved until the
    loss falls."""
    rng = np.random.default_rng(3)
    n = 3000
    signal = rng.normal(0, 1.5, n)
    deep, wide = signal + rng.normal(0, 1.5, n), signal + rng.normal(0, 1.5, n)
    companion = 3.0 * signal + rng.normal(0, 3.0, n) + 2.0
    z = 0.5 * deep + 0.5 * wide + 0.6 * (companion - 2.0)
    labels = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(np.float64)
    fit = fit_blend([deep, wide, companion], labels)
    assert fit.applied and fit.weights is not None
    assert all(0.2 < w < 1.0 for w in fit.weights[:3]) and -3 < fit.weights[3] < 0
    two = fit_blend([deep, wide], labels)
    assert fit.log_loss_after < two.log_loss_after  # type: ignore[operator]

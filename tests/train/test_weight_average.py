"""The weight average (train.ema_decay): its arithmetic, that the averaged weights are the ones
measured and saved, and that a run killed mid-epoch resumes to the same average."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from engine.config import ModelConfig, TrainConfig
from engine.errors import ConfigError
from engine.sentiment.dist_env import DistEnv
from engine.sentiment.evaluate import confusion_stats
from engine.sentiment.hooks import TrainHooks
from engine.sentiment.metrics import Confusion
from engine.sentiment.trainer import Trainer
from engine.sentiment.weight_average import WeightAverage
from tests.train.small_runs import KillAt, Killed, small_config


def test_the_average_follows_the_warmed_up_decay_and_swaps_back_exactly() -> None:
    model = nn.Linear(3, 2)
    start = [p.detach().clone() for p in model.parameters()]
    average = WeightAverage(model, 0.9)
    expected = [s.clone() for s in start]
    for n in range(1, 40):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.1 * n)
        average.update()
        decay = min(0.9, (1 + n) / (10 + n))  # 0.18 first, 0.9 from n = 80 on
        params = list(model.parameters())
        expected = [
            decay * e + (1 - decay) * p.detach() for e, p in zip(expected, params, strict=True)
        ]
    for got, want in zip(average.average, expected, strict=True):
        assert torch.allclose(got, want, atol=1e-5)
    own = [p.detach().clone() for p in model.parameters()]
    with average.swapped_in():
        for p, want in zip(model.parameters(), expected, strict=True):
            assert torch.allclose(p, want, atol=1e-5)  # the average inside the block
    for p, mine in zip(model.parameters(), own, strict=True):
        assert torch.equal(p, mine)  # its own weights after it, bit for bit
    copy = WeightAverage(nn.Linear(3, 2), 0.5)
    copy.load_state_dict(average.state_dict())
    assert copy.updates == 39
    assert all(torch.equal(a, b) for a, b in zip(copy.average, average.average, strict=True))
    with pytest.raises(ValueError, match="another model shape"):
        WeightAverage(nn.Linear(4, 2), 0.9).load_state_dict(average.state_dict())
    with pytest.raises(ValueError, match="within"):
        WeightAverage(model, 1.0)


def test_the_setting_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"train\.ema_decay"):
        TrainConfig(data_dir="d", run_dir="r", ema_decay=1.0)
    with pytest.raises(ConfigError, match=r"train\.ema_decay"):
        TrainConfig(data_dir="d", run_dir="r", ema_decay=-0.1)


def _cfg(data: Path, run: Path, **kw: Any) -> TrainConfig:
    """A small run with a weight average, scored by the network alone (no blend)."""
    model = ModelConfig(preset="default", companion=False)
    return small_config(data, run, **{"model": model, "blend_paths": False, "ema_decay": 0.8, **kw})


def _fit(cfg: TrainConfig, hooks: TrainHooks | None = None) -> dict[str, Any]:
    return Trainer(cfg, hooks=hooks, env=DistEnv()).fit()


def _saved_metrics(trainer: Trainer, run: Path) -> dict[str, Any]:
    """Metrics of the run's model.pt on its test split, scored from the file."""
    trainer.model.load_state_dict(torch.load(run / "model.pt"))
    batches = trainer.data.eval_batches(0, 1, 64)
    stats = confusion_stats(trainer.model, batches, trainer.eval_criterion)
    return Confusion.from_vector(stats.tolist()).metrics()


def test_the_averaged_weights_are_the_ones_measured_and_saved(
    tiny_data: Path, tmp_path: Path
) -> None:
    plain = _fit(_cfg(tiny_data, tmp_path / "plain", ema_decay=0.0))
    trainer = Trainer(_cfg(tiny_data, tmp_path / "ema"), env=DistEnv())
    summary = trainer.fit()
    saved = torch.load(tmp_path / "ema" / "model.pt")
    own = torch.load(tmp_path / "plain" / "model.pt")
    assert any(not torch.equal(saved[k], own[k]) for k in saved)  # same seed, other weights
    scored = _saved_metrics(trainer, tmp_path / "ema")
    assert summary["test_loss"] == pytest.approx(scored["loss"], rel=1e-6)
    assert summary["accuracy"] == pytest.approx(scored["accuracy"])
    assert summary["accuracy"] > 0.9 and plain["accuracy"] > 0.9  # both learn the rule
    assert (summary["ema_decay"], plain["ema_decay"]) == (0.8, None)


@pytest.mark.slow
def test_a_run_killed_mid_epoch_resumes_to_the_same_average(
    tiny_data: Path, tmp_path: Path
) -> None:
    straight = _fit(_cfg(tiny_data, tmp_path / "a", checkpoint_every_steps=3))
    with pytest.raises(Killed):
        _fit(_cfg(tiny_data, tmp_path / "b", checkpoint_every_steps=3), KillAt(1, 5))
    state = torch.load(tmp_path / "b" / "checkpoints" / "latest.pt", weights_only=False)
    assert state["average"]["updates"] == 12  # 8 steps of epoch 0 and 4 of epoch 1
    resumed = _fit(_cfg(tiny_data, tmp_path / "b", checkpoint_every_steps=3, resume=True))
    a, b = torch.load(tmp_path / "a" / "model.pt"), torch.load(tmp_path / "b" / "model.pt")
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-6), key
    assert resumed["accuracy"] == pytest.approx(straight["accuracy"])

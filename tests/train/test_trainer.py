"""The training loop in one process: learning, events, summary, resume equivalence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from engine.config import TrainConfig
from engine.events import read_events
from engine.sentiment.hooks import TrainHooks
from engine.sentiment.trainer import DistEnv, Trainer
from tests.train.small_runs import KillAt, Killed, small_config


def _cfg(data: Path, run: Path, **kw: Any) -> TrainConfig:
    return small_config(data, run, **kw)


def _fit(cfg: TrainConfig, hooks: TrainHooks | None = None) -> dict[str, Any]:
    return Trainer(cfg, hooks=hooks, env=DistEnv()).fit()


@pytest.mark.slow
def test_learns_and_writes_the_run_folder(tiny_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    summary = _fit(_cfg(tiny_data, run, epochs=3, events_file=True, loss_threshold=0.6))
    assert summary["accuracy"] > 0.9  # the label is in the words: an LSTM must find it
    assert summary["per_epoch"][-1]["train_loss"] < summary["per_epoch"][0]["train_loss"]
    for name in (
        "summary.json",
        "model.pt",
        "model.json",
        "vocab.json",
        "train_config.json",
        "checkpoints/latest.pt",
        "events.jsonl",
    ):
        assert (run / name).is_file(), name
    saved = json.loads((run / "summary.json").read_text())
    assert saved["epochs"] == 3 and saved["n_train"] == 512 and saved["world_size"] == 1
    assert saved["time_to_threshold_s"] is not None and saved["threshold_epoch"] is not None
    events = list(read_events(run / "events.jsonl"))
    types = [e["type"] for e in events]
    # the trainer tells its plan up front; stage_start/stage_end belong to the launcher
    assert types[0] == "train_start" and types[-1] == "summary"
    assert "stage_start" not in types and "stage_end" not in types
    start = events[0]
    assert (start["epochs"], start["steps_per_epoch"], start["total_steps"]) == (3, 8, 24)
    steps = [e["global_step"] for e in events if e["type"] == "step"]
    assert steps[0] == 1  # progress from the first step, then every log_every
    assert types.count("epoch") == 3 and types.count("phase") == 3
    assert {"step", "checkpoint", "threshold", "summary"} <= set(types)
    phase = next(e for e in read_events(run / "events.jsonl") if e["type"] == "phase")
    assert phase["samples"] == 512 and phase["steps"] == 8 and phase["forward"] > 0


def test_eval_every_skips_test_metrics_between(tiny_data: Path, tmp_path: Path) -> None:
    summary = _fit(_cfg(tiny_data, tmp_path / "r", epochs=3, eval_every=2))
    accs = [e["accuracy"] for e in summary["per_epoch"]]
    assert accs[0] is None and accs[1] is not None and accs[2] is not None  # last always


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kill_at", "every_steps"),
    [((1, 0), 0), ((1, 5), 3)],  # at the epoch boundary; mid-epoch after a step checkpoint
    ids=["epoch-boundary", "mid-epoch"],
)
def test_resume_gives_the_same_weights(
    tiny_data: Path, tmp_path: Path, kill_at: tuple[int, int], every_steps: int
) -> None:
    straight = _fit(_cfg(tiny_data, tmp_path / "a", checkpoint_every_steps=every_steps))
    cfg = _cfg(tiny_data, tmp_path / "b", checkpoint_every_steps=every_steps)
    with pytest.raises(Killed):
        _fit(cfg, KillAt(*kill_at))
    saved = torch.load(tmp_path / "b" / "checkpoints" / "latest.pt", weights_only=False)
    assert saved["epoch"] == 1 and saved["step"] == (4 if every_steps else 0)
    resumed = _fit(_cfg(tiny_data, tmp_path / "b", checkpoint_every_steps=every_steps, resume=True))
    a = torch.load(tmp_path / "a" / "model.pt")
    b = torch.load(tmp_path / "b" / "model.pt")
    assert a.keys() == b.keys()
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-6), key
    assert resumed["epochs"] == straight["epochs"] == 2
    assert resumed["accuracy"] == pytest.approx(straight["accuracy"])


def test_cli_flags_become_a_train_config() -> None:
    import argparse

    from engine.config import TrainConfig, config_from_dict, config_to_dict
    from engine.errors import ConfigError
    from engine.sentiment.train import add_train_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    args = parser.parse_args(
        [
            "--data",
            "d",
            "--run-dir",
            "r",
            "--epochs",
            "5",
            "--model",
            "seed",
            "--pos-weight",
            "none",
            "--resume",
            "--straggle",
            "1:1.5",
        ]
    )
    cfg = config_from_args(args)
    assert (cfg.epochs, cfg.model.preset, cfg.pos_weight, cfg.resume) == (5, "seed", "none", True)
    assert cfg.balance.straggle == {1: 1.5}
    assert config_from_dict(TrainConfig, config_to_dict(cfg)) == cfg  # the launcher's round trip
    with pytest.raises(ConfigError, match="--run-dir"):
        config_from_args(parser.parse_args(["--data", "d"]))

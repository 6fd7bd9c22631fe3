"""Learning-rate schedule: Goyal warm-up, then constant or cosine/linear decay to 0."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from engine.config import ModelConfig, TrainConfig
from engine.events import read_events
from engine.sentiment.trainer import DistEnv, Trainer


def _lrs(data: Path, run: Path, schedule: str) -> list[float]:
    cfg = TrainConfig(
        data_dir=str(data),
        run_dir=str(run),
        epochs=2,
        batch_size=64,  # 512 samples: 8 steps an epoch, 16 in all
        lr=4e-3,
        warmup_steps=4,
        lr_schedule=schedule,  # type: ignore[arg-type]
        log_every=1,
        checkpoint_every_min=0,
        model=ModelConfig(preset="seed", hidden=8, embedding_dim=8),
        events_file=True,
    )
    Trainer(cfg, env=DistEnv()).fit()
    return [e["lr"] for e in read_events(run / "events.jsonl") if e["type"] == "step"]


@pytest.mark.parametrize("schedule", ["constant", "cosine", "linear"])
def test_warm_up_then_the_schedule(schedule: str, tiny_data: Path, tmp_path: Path) -> None:
    lrs = _lrs(tiny_data, tmp_path / schedule, schedule)
    peak = 4e-3 * 64 / 256  # linear scaling with the global batch (reference batch 256)
    assert len(lrs) == 16
    assert lrs[:4] == pytest.approx([peak * k / 4 for k in range(1, 5)])  # warm-up
    after = lrs[4:]
    if schedule == "constant":
        assert after == pytest.approx([peak] * len(after))
    else:
        assert all(a >= b for a, b in itertools.pairwise(after))  # never rises
        assert after[-1] < 0.1 * peak  # decays to ~0 at the last step
        mid = after[len(after) // 2]
        done = (len(after) // 2) / 12
        expected = peak * (
            1 - done if schedule == "linear" else 0.5 * (1 + math.cos(math.pi * done))
        )
        assert mid == pytest.approx(expected, rel=0.2)

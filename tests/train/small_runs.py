"""Short in-process training runs for tests: a small config, and a hook that kills a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.config import ModelConfig, TrainConfig
from engine.sentiment.hooks import StepTiming, TrainHooks


def small_config(data: Path, run: Path, **kw: Any) -> TrainConfig:
    """Two epochs of batch 64 at a constant learning rate (these runs are a few dozen steps
    long), checkpoints at epoch ends only, no events file; ``kw`` overrides any field."""
    base: dict[str, Any] = dict(
        data_dir=str(data),
        run_dir=str(run),
        epochs=2,
        batch_size=64,
        lr=5e-3,
        warmup_steps=4,
        lr_schedule="constant",
        log_every=2,
        checkpoint_every_min=0,
        model=ModelConfig(preset="default"),
        events_file=False,
    )
    base.update(kw)
    return TrainConfig(**base)


class Killed(Exception):
    """Stands in for a process killed mid-epoch."""


class KillAt(TrainHooks):
    """Raises :class:`Killed` after the forward/backward of ``(epoch, step)``."""

    def __init__(self, epoch: int, step: int) -> None:
        self.at = (epoch, step)

    def after_compute(self, timing: StepTiming) -> None:
        if (timing.epoch, timing.step) == self.at:
            raise Killed

"""Stop a run whose loss or weights are no longer finite, before a checkpoint keeps them."""

from __future__ import annotations

import math

import torch
from torch import nn

from engine.errors import DivergedError


def _hint(lr: float) -> str:
    return (
        f"train again in a new --run-dir with a lower --lr (this run's: {lr:g}), "
        "--clip-grad-norm 1.0 or more --warmup-steps; --resume keeps the run's own --lr, so it "
        "would diverge the same way"
    )


def check_loss(loss: float, *, epoch: int, step: int, rank: int, lr: float) -> None:
    """DivergedError when a step's loss is NaN or infinite."""
    if not math.isfinite(loss):
        raise DivergedError(
            f"the loss became {loss} in step {step + 1} of epoch {epoch + 1} (rank {rank}); the "
            "weights are no longer usable and no checkpoint was written from them",
            hint=_hint(lr),
        )


def check_weights(model: nn.Module, *, epoch: int, step: int, lr: float) -> None:
    """DivergedError when any weight is NaN or infinite at ``epoch``/``step`` (a checkpoint's
    position: step 0 is the end of the epoch before), checked before an evaluation or a
    checkpoint: the last step's update can break weights its finite loss did not show."""
    bad = [name for name, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    if bad:
        where = (
            f"after step {step} of epoch {epoch + 1}" if step else f"by the end of epoch {epoch}"
        )
        more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
        raise DivergedError(
            f"weights became NaN or infinite {where}: "
            f"{', '.join(bad[:3])}{more}; no checkpoint was written from them",
            hint=_hint(lr),
        )

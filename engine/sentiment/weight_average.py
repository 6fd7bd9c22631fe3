"""An exponential moving average of a model's weights (Polyak averaging), swapped in to evaluate."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn


class WeightAverage:
    """``average ← d·average + (1 − d)·weights`` after every optimizer step, with the decay
    warmed up as ``d = min(decay, (1 + n) / (10 + n))`` over the first n updates (so early
    averages are not dominated by the random start). Every rank of a DDP run holds the same
    weights after a step, so every rank keeps the same average without communication."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        if not 0 < decay < 1:
            raise ValueError(f"decay must be within (0, 1), got {decay}")
        self.decay = decay
        self.params: list[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
        self.average = [p.detach().clone() for p in self.params]
        self.updates = 0

    def update(self) -> None:
        """Fold the current weights into the average (after ``optimizer.step()``)."""
        self.updates += 1
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        with torch.no_grad():
            torch._foreach_lerp_(self.average, self.params, 1 - decay)  # reads them only

    @contextlib.contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The model holds the averaged weights inside the block, its own again after it."""
        self._swap()
        try:
            yield
        finally:
            self._swap()

    def copy_to_model(self) -> None:
        """Leave the averaged weights in the model for good (the run's final weights)."""
        with torch.no_grad():
            for p, a in zip(self.params, self.average, strict=True):
                p.copy_(a)

    def _swap(self) -> None:
        with torch.no_grad():
            for p, a in zip(self.params, self.average, strict=True):
                own = p.detach().clone()
                p.copy_(a)
                a.copy_(own)

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps (tensors on the CPU)."""
        return {"updates": self.updates, "average": [a.detach().cpu() for a in self.average]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the average a checkpoint kept."""
        saved = state["average"]
        if len(saved) != len(self.average) or any(
            s.shape != a.shape for s, a in zip(saved, self.average, strict=True)
        ):
            raise ValueError("the checkpoint's weight average is for another model shape")
        with torch.no_grad():
            for a, s in zip(self.average, saved, strict=True):
                a.copy_(s)
        self.updates = int(state["updates"])

"""Model selection on the held-out split: keep the best epoch's weights, stop when it stalls."""

from __future__ import annotations

import copy
from typing import Any

from torch import nn


class BestEpoch:
    """Tracks the evaluated epoch with the highest held-out accuracy (ties: the lower loss)
    and a copy of its weights. Accuracy, not loss, because a weighted loss (pos_weight auto)
    and the accuracy the run reports can disagree about the best epoch."""

    def __init__(self, patience: int) -> None:
        self.patience = patience
        """Evaluations without a new best before training stops (0 = never stop early)."""
        self.best_key = (-1.0, 0.0)
        """(accuracy, -loss) of the best evaluation so far."""
        self.best_epoch: int | None = None
        self.best_metrics: dict[str, Any] | None = None
        self.best_state: dict[str, Any] | None = None
        self.stale = 0

    def update(self, epoch: int, metrics: dict[str, Any], model: nn.Module) -> bool:
        """Record one evaluation; True when training should stop (patience exhausted)."""
        key = (float(metrics["accuracy"]), -float(metrics["loss"]))
        if key > self.best_key:
            self.best_key, self.best_epoch, self.best_metrics = key, epoch, metrics
            self.best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
            self.stale = 0
            return False
        self.stale += 1
        return 0 < self.patience <= self.stale

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of the selection (the best weights too): a resumed run chose
        only among the epochs after its resume, and its patience started again."""
        return {
            "best_key": list(self.best_key),
            "best_epoch": self.best_epoch,
            "best_metrics": self.best_metrics,
            "best_state": self.best_state,
            "stale": self.stale,
        }

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Take back :meth:`state_dict` (None: a checkpoint from before it was kept)."""
        if not state:
            return
        self.best_key = (float(state["best_key"][0]), float(state["best_key"][1]))
        self.best_epoch, self.best_metrics = state["best_epoch"], state["best_metrics"]
        self.best_state, self.stale = state["best_state"], int(state["stale"])

    def restore(self, model: nn.Module) -> dict[str, Any] | None:
        """Load the best weights into ``model``; return that epoch's metrics (None if none)."""
        if self.best_state is None:
            return None
        model.load_state_dict(self.best_state)
        return copy.deepcopy(self.best_metrics)

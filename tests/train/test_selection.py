"""Model selection: the best held-out epoch's weights are kept; patience stops a stalled run."""

from __future__ import annotations

import torch
from torch import nn

from engine.sentiment.selection import BestEpoch


def _metrics(accuracy: float, loss: float) -> dict[str, float]:
    return {"accuracy": accuracy, "loss": loss}


def test_keeps_the_most_accurate_epoch_and_its_weights() -> None:
    model = nn.Linear(2, 1)
    best = BestEpoch(patience=0)
    weights = []
    for epoch, (acc, loss) in enumerate([(0.80, 0.40), (0.86, 0.35), (0.84, 0.30), (0.86, 0.38)]):
        with torch.no_grad():
            model.weight.fill_(float(epoch))
        weights.append(model.weight.clone())
        assert best.update(epoch, _metrics(acc, loss), model) is False  # patience 0: never stop
    assert best.best_epoch == 1  # 0.86 first reached with the lower loss (epoch 3 ties, worse loss)
    restored = best.restore(model)
    assert restored == _metrics(0.86, 0.35)
    assert torch.equal(model.weight, weights[1])


def test_patience_stops_after_stalled_evaluations() -> None:
    model = nn.Linear(2, 1)
    best = BestEpoch(patience=2)
    assert best.update(0, _metrics(0.8, 0.5), model) is False
    assert best.update(1, _metrics(0.7, 0.6), model) is False
    assert best.update(2, _metrics(0.85, 0.4), model) is False  # new best resets the count
    assert best.update(3, _metrics(0.8, 0.5), model) is False
    assert best.update(4, _metrics(0.8, 0.5), model) is True
    assert BestEpoch(patience=0).restore(model) is None

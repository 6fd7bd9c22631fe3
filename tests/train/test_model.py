"""Model shapes, padding handling and the ability to fit one small batch."""

from __future__ import annotations

import pytest
import torch

from engine.config import ModelConfig
from engine.errors import ConfigError
from engine.sentiment.model import build_model, count_parameters, resolve_spec


@pytest.mark.parametrize("preset", ["seed", "default"])
def test_logits_have_one_value_per_sequence(preset: str) -> None:
    model = build_model(resolve_spec(ModelConfig(preset=preset), vocab_size=30))  # type: ignore[arg-type]
    tokens = torch.randint(1, 30, (5, 9), dtype=torch.int32)
    lengths = torch.tensor([9, 1, 4, 0, 7])
    assert model(tokens, lengths).shape == (5,)


def test_seed_preset_is_the_old_model() -> None:
    spec = resolve_spec(ModelConfig(preset="seed"), vocab_size=10_002)
    assert (spec.embedding_dim, spec.hidden, spec.layers, spec.bidirectional) == (100, 32, 2, False)
    model = build_model(spec)
    linear = [m for m in model.head if isinstance(m, torch.nn.Linear)]
    assert len(linear) == 2 and linear[-1].out_features == 1
    assert count_parameters(model) > 10_002 * 100


def test_overrides_apply_and_are_validated() -> None:
    spec = resolve_spec(ModelConfig(preset="seed", hidden=8, layers=1), vocab_size=10)
    assert (spec.hidden, spec.layers) == (8, 1)
    with pytest.raises(ConfigError, match="hidden"):
        resolve_spec(ModelConfig(hidden=0), vocab_size=10)


def test_padding_after_the_length_does_not_change_the_output() -> None:
    torch.manual_seed(0)
    model = build_model(resolve_spec(ModelConfig(preset="default"), vocab_size=30)).eval()
    tokens = torch.randint(2, 30, (3, 6), dtype=torch.int32)
    lengths = torch.tensor([6, 3, 2])
    changed = tokens.clone()
    changed[1, 3:] = 7  # garbage beyond the length
    changed[2, 2:] = 0
    with torch.no_grad():
        assert torch.allclose(model(tokens, lengths), model(changed, lengths), atol=1e-6)
        # and a row padded to a wider batch scores the same as alone
        alone = model(tokens[1:2, :3], lengths[1:2])
        assert torch.allclose(alone, model(tokens, lengths)[1:2], atol=1e-6)


def test_overfits_one_small_batch() -> None:
    torch.manual_seed(0)
    model = build_model(resolve_spec(ModelConfig(preset="seed"), vocab_size=40))
    tokens = torch.randint(2, 40, (16, 10), dtype=torch.int32)
    lengths = torch.randint(3, 11, (16,))
    labels = torch.tensor([0.0, 1.0] * 8)
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    first = loss_fn(model(tokens, lengths), labels).item()
    for _ in range(100):
        opt.zero_grad()
        loss = loss_fn(model(tokens, lengths), labels)
        loss.backward()
        opt.step()
    assert loss.item() < 0.05 < first

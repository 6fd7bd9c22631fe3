"""The unpacked LSTM path (the GPU's) gives the packed path's logits and gradients."""

from __future__ import annotations

import warnings

import pytest
import torch

from engine.config import ModelConfig
from engine.sentiment.model import build_model, resolve_spec
from engine.sentiment.padded_lstm import padded_lstm, reverse_within

SHAPES = [
    ("seed", None, None),  # 2 layers, unidirectional, last state
    ("default", None, None),  # 1 bidirectional layer, max-pooled
    ("default", True, 2),  # 2 bidirectional layers, max-pooled
    ("seed", True, 3),  # 3 bidirectional layers, last states
]


def _batch(seed: int, rows: int = 9, steps: int = 14) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, steps + 1, (rows,), generator=gen)
    lengths[0] = steps  # one full row
    lengths[1] = 1  # one single-token row
    tokens = torch.randint(2, 60, (rows, steps), generator=gen)
    tokens[torch.arange(steps)[None, :] >= lengths[:, None]] = 0
    return tokens, lengths


def _model(preset: str, bidirectional: bool | None, layers: int | None) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ModelConfig(preset=preset, bidirectional=bidirectional, layers=layers, dropout=0.0)
    return build_model(resolve_spec(cfg, 60))


@pytest.mark.parametrize(("preset", "bidirectional", "layers"), SHAPES)
def test_padded_path_equals_packed_in_logits_and_gradients(
    preset: str, bidirectional: bool | None, layers: int | None
) -> None:
    model = _model(preset, bidirectional, layers)
    tokens, lengths = _batch(1)
    grads = {}
    for packing in ("packed", "padded"):
        model.packing = packing
        model.zero_grad()
        logits = model(tokens, lengths)
        (logits * torch.linspace(-1, 1, len(logits))).sum().backward()
        grads[packing] = (logits.detach(), [p.grad.clone() for p in model.parameters()])
    (a, ga), (b, gb) = grads["packed"], grads["padded"]
    torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    for x, y in zip(gb, ga, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)


def test_padded_path_ignores_extra_padding() -> None:
    model = _model("default", None, None).eval()
    model.packing = "padded"
    tokens, lengths = _batch(2)
    wider = torch.cat([tokens, torch.zeros(tokens.shape[0], 7, dtype=tokens.dtype)], dim=1)
    torch.testing.assert_close(model(wider, lengths), model(tokens, lengths))


def test_reverse_within_reverses_each_row_inside_its_length_only() -> None:
    x = torch.arange(2 * 5, dtype=torch.float32).reshape(2, 5, 1)
    out = reverse_within(x, torch.tensor([3, 5]))
    assert out[..., 0].tolist() == [[2, 1, 0, 3, 4], [9, 8, 7, 6, 5]]
    assert torch.equal(reverse_within(out, torch.tensor([3, 5])), x)


def test_padded_lstm_needs_batch_first() -> None:
    lstm = torch.nn.LSTM(4, 3)
    with pytest.raises(ValueError, match="batch_first"):
        padded_lstm(lstm, torch.zeros(2, 5, 4), torch.tensor([5, 2]))


def test_auto_packing_uses_the_packed_path_on_a_cpu() -> None:
    model = _model("seed", None, None).eval()
    tokens, lengths = _batch(3)
    calls = []
    original = model._features_padded
    model._features_padded = lambda *a: calls.append(1) or original(*a)  # type: ignore[method-assign]
    model(tokens, lengths)
    assert model.packing == "auto" and calls == []
    model.packing = "padded"
    model(tokens, lengths)
    assert calls == [1]


def test_cudnn_weight_copy_warning_is_not_shown_other_warnings_are() -> None:
    lstm = torch.nn.LSTM(4, 3, batch_first=True, bidirectional=True)
    cudnn = (
        "RNN module weights are not part of single contiguous chunk of memory. This means they "
        "need to be compacted at every call, possibly greatly increasing memory usage."
    )
    with warnings.catch_warnings(record=True) as seen:
        padded_lstm(lstm, torch.zeros(2, 5, 4), torch.tensor([5, 2]))
        padded_lstm(lstm, torch.zeros(2, 5, 4), torch.tensor([5, 2]))  # installed once
        assert sum(1 for f in warnings.filters if f[1] and "RNN module" in f[1].pattern) == 1
        warnings.warn(cudnn, UserWarning, stacklevel=1)
        warnings.warn("something else about RNN module weights", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["something else about RNN module weights"]

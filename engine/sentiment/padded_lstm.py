"""An nn.LSTM run on right-padded batches without packing, equal to the packed run (GPU path).

``pack_padded_sequence`` makes cuDNN step through a different batch size at every time step and
sort/unsort the batch: on a GPU that costs more than the arithmetic it saves (measured on an
H100 in BENCHMARKS.md, "GPU path"). Here every layer and direction runs over the whole padded
(B, T) block instead, so each call has one fixed shape, and the result is made EXACTLY the
packed one at every real position:

- the forward direction reads tokens 0..t, so padding after a sequence's end never reaches its
  real positions (layers above read only the real positions of the layer below);
- the backward direction reads each sequence reversed within its own length (a gather), so it
  starts at the last real token, as the packed run does; its outputs are put back in place.

Outputs at padding positions are not meaningful (callers mask them); ``last`` holds each
direction's final state (forward at position len-1, backward at position 0), like ``h_n`` of a
packed run's top layer. On a CPU the packed run is faster (it skips padding), so the model uses
this module only for CUDA tensors.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.nn import functional

WEIGHT_COPY_WARNING = "RNN module weights are not part of single contiguous chunk"
"""The start of the warning cuDNN gives when a call's weights are not one buffer of their own."""


def hide_weight_copy_warning() -> None:
    """Leave cuDNN's weight-copy warning unshown (that message only; installed once).

    One direction's weights are views into the LSTM's flat buffer (every layer and direction), so
    cuDNN copies them into a buffer of their own at each call (≈ 170 KB for the default model)
    and says so once per process with a warning that reads like a fault ("possibly greatly
    increasing memory usage"). The copy is inside every measured GPU rate (BENCHMARKS.md, "GPU
    path")."""
    if not any(f[1] is not None and f[1].pattern == WEIGHT_COPY_WARNING for f in warnings.filters):
        warnings.filterwarnings("ignore", message=WEIGHT_COPY_WARNING, category=UserWarning)


def reverse_within(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``x`` (B, T, F) with each row's first ``lengths[b]`` steps reversed; padding unmoved."""
    steps = torch.arange(x.shape[1], device=x.device).unsqueeze(0)  # (1, T)
    source = lengths.unsqueeze(1) - 1 - steps  # (B, T)
    source = torch.where(source >= 0, source, steps)
    return x.gather(1, source.unsqueeze(2).expand(-1, -1, x.shape[2]))


def _direction(lstm: nn.LSTM, x: torch.Tensor, layer: int, reverse: bool) -> torch.Tensor:
    """Outputs (B, T, H) of one layer and direction of ``lstm`` over ``x`` (zero initial state)."""
    suffix = f"_l{layer}" + ("_reverse" if reverse else "")
    params = [getattr(lstm, f"weight_ih{suffix}"), getattr(lstm, f"weight_hh{suffix}")]
    if lstm.bias:
        params += [getattr(lstm, f"bias_ih{suffix}"), getattr(lstm, f"bias_hh{suffix}")]
    zeros = x.new_zeros(1, x.shape[0], lstm.hidden_size)
    out, _, _ = torch.lstm(x, (zeros, zeros), params, lstm.bias, 1, 0.0, lstm.training, False, True)
    return out


def padded_lstm(
    lstm: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(outputs (B, T, H·dirs), last (B, H·dirs)) of a batch-first ``lstm`` over right-padded
    ``x`` (B, T, E) with true ``lengths`` (B,) >= 1 on x's device; equal to the packed run."""
    if not lstm.batch_first:
        raise ValueError("padded_lstm needs a batch_first LSTM")
    hide_weight_copy_warning()
    rows = torch.arange(x.shape[0], device=x.device)
    layer_in = x
    for layer in range(lstm.num_layers):
        outs = [_direction(lstm, layer_in, layer, reverse=False)]
        if lstm.bidirectional:
            back = _direction(lstm, reverse_within(layer_in, lengths), layer, reverse=True)
            outs.append(reverse_within(back, lengths))
        layer_in = torch.cat(outs, dim=2) if len(outs) > 1 else outs[0]
        if layer < lstm.num_layers - 1 and lstm.dropout > 0:
            layer_in = functional.dropout(layer_in, lstm.dropout, lstm.training)
    hidden = lstm.hidden_size
    last = layer_in[rows, lengths - 1, :hidden]  # forward direction ends at len-1
    if lstm.bidirectional:
        last = torch.cat([last, layer_in[:, 0, hidden:]], dim=1)  # backward ends at 0
    return layer_in, last

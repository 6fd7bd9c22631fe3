"""SGNS with a word-table encoder or a character-LSTM encoder for the centre words.

Both encoders map word ids to vectors; the context (output) side is always a word table. The
loss of one positive pair (w, c) with negatives n_1..n_k is
``-log σ(e_w·o_c) - Σ_j log σ(-e_w·o_{n_j})``, averaged over the batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"
"""Characters the char encoder knows (cleaned text has nothing else); 0 is padding."""


def char_ids(words: list[str], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(V, max_len) int64 character ids (1-based, 0-padded) and (V,) lengths >= 1."""
    lookup = {c: i + 1 for i, c in enumerate(CHARS)}
    table = torch.zeros(len(words), max_len, dtype=torch.int64)
    lengths = torch.ones(len(words), dtype=torch.int64)
    for row, word in enumerate(words):
        codes = [lookup.get(c, len(CHARS) + 1) for c in word[:max_len]] or [len(CHARS) + 1]
        table[row, : len(codes)] = torch.tensor(codes)
        lengths[row] = len(codes)
    return table, lengths


class WordEncoder(nn.Module):
    """One trainable vector per word."""

    def __init__(self, vocab: int, dim: int) -> None:
        super().__init__()
        self.table = nn.Embedding(vocab, dim)
        nn.init.uniform_(self.table.weight, -0.5 / dim, 0.5 / dim)  # word2vec's init

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """(B,) ids → (B, d)."""
        return self.table(ids)  # type: ignore[no-any-return]


class CharEncoder(nn.Module):
    """A word's characters through an LSTM; its last hidden state is the word vector."""

    def __init__(self, words: list[str], dim: int, char_dim: int, max_len: int) -> None:
        super().__init__()
        chars, lengths = char_ids(words, max_len)
        self.chars: torch.Tensor
        self.lengths: torch.Tensor
        self.register_buffer("chars", chars, persistent=False)  # (V, L)
        self.register_buffer("lengths", lengths, persistent=False)  # (V,)
        self.embed = nn.Embedding(len(CHARS) + 2, char_dim, padding_idx=0)
        self.lstm = nn.LSTM(char_dim, dim, batch_first=True)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """(B,) ids → (B, d); each distinct word is encoded once."""
        unique, inverse = torch.unique(ids, return_inverse=True)
        chars = self.embed(self.chars[unique])  # (U, L, c)
        packed = pack_padded_sequence(
            chars, self.lengths[unique].cpu(), batch_first=True, enforce_sorted=False
        )
        _, (h_n, _) = self.lstm(packed)  # h_n: (1, U, d), the state after each last character
        return h_n[0][inverse]  # type: ignore[no-any-return]


class SGNS(nn.Module):
    """Skip-gram with negative sampling over an encoder (centres) and a context table."""

    def __init__(self, encoder: nn.Module, vocab: int, dim: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.context = nn.Embedding(vocab, dim)
        nn.init.zeros_(self.context.weight)  # word2vec's init

    def forward(
        self, centres: torch.Tensor, contexts: torch.Tensor, negatives: torch.Tensor
    ) -> torch.Tensor:
        """Mean SGNS loss of (B,) centres, (B,) contexts and (B, k) negatives (a scalar)."""
        e = self.encoder(centres)  # (B, d)
        pos = (e * self.context(contexts)).sum(-1)  # (B,)
        neg = torch.bmm(self.context(negatives), e.unsqueeze(-1)).squeeze(-1)  # (B, k)
        return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(-1)).mean()

    @torch.no_grad()
    def vectors(self, ids: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
        """(N, d) word vectors of ``ids`` (the encoder's output, no gradient)."""
        parts = [self.encoder(ids[i : i + chunk]) for i in range(0, len(ids), chunk)]
        return torch.cat(parts) if parts else torch.zeros(0, self.context.embedding_dim)


def build_model(encoder: str, words: list[str], dim: int, char_dim: int, max_len: int) -> SGNS:
    """The SGNS model for ``encoder`` ("word" or "char") over the vocabulary ``words``."""
    enc: nn.Module = (
        CharEncoder(words, dim, char_dim, max_len)
        if encoder == "char"
        else WordEncoder(len(words), dim)
    )
    return SGNS(enc, len(words), dim)

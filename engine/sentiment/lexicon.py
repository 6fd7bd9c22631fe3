"""Lexicon prior of the wide path: each text's summed word valence, flipped inside a negation.

A sentiment lexicon knows what a small labelled corpus has rarely seen: "not bad at all" occurs
9 times in the six Amazon files of ../shared/data, so neither the n-grams nor the LSTM learn it,
while a lexicon scores "bad" -2.5 and the negation scope turns it positive. The wide path reads
three numbers per text, as VADER (Hutto & Gilbert 2014, whose single-word entries
sentiment_lexicon.txt holds) computes them: the normalised sum of the words' valences, each
multiplied by -0.74 inside a negation scope (engine/sentiment/negation.py), and the positive and
negative shares; a learned weight per number decides how much the prior counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from importlib import resources

import torch

NEGATED_FACTOR = -0.74
"""Multiplier of a word's valence inside a negation scope (VADER's N_SCALAR)."""
COMPOUND_ALPHA = 15.0
"""VADER's normalisation of the summed valence s: s / sqrt(s² + alpha), in (-1, 1)."""
FEATURES = 3
"""Numbers per text: normalised sum, positive share, negative share."""
TOKEN_FEATURES = 3
"""Numbers per token (model.lexicon_tokens): valence, negated, valence as the scope leaves it."""
MAX_VALENCE = 4.0
"""The lexicon's scale: valences lie in [-4, 4]."""


@lru_cache(maxsize=1)
def lexicon() -> dict[str, float]:
    """word → valence (-4 .. +4) of the shipped lexicon (cleaned spelling)."""
    text = resources.files(__package__).joinpath("sentiment_lexicon.txt").read_text("utf-8")
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            word, value = line.split("\t")
            out[word] = float(value)
    return out


def valences(words: Sequence[str]) -> list[float]:
    """The valence of each word of a vocabulary's id → word list (0 for words not listed)."""
    table = lexicon()
    return [table.get(word, 0.0) for word in words]


def lexicon_features(
    tokens: torch.Tensor, inside: torch.Tensor, negated: torch.Tensor | None, table: torch.Tensor
) -> torch.Tensor:
    """(B, FEATURES) of token ids (B, T): ``inside`` marks the positions within each length,
    ``negated`` those in a negation scope (None: no scope), ``table`` the valence per id."""
    value = table[tokens] * inside
    if negated is not None:
        value = torch.where(negated, value * NEGATED_FACTOR, value)
    total = value.sum(dim=1)
    positive = value.clamp(min=0).sum(dim=1)
    negative = (-value).clamp(min=0).sum(dim=1)
    mass = positive + negative + 1.0
    compound = total / torch.sqrt(total * total + COMPOUND_ALPHA)
    return torch.stack([compound, positive / mass, negative / mass], dim=1)


def token_lexicon_features(
    tokens: torch.Tensor, negated: torch.Tensor, table: torch.Tensor
) -> torch.Tensor:
    """(B, T, TOKEN_FEATURES) of token ids (B, T) with their negation-scope mask (B, T) and the
    valence per id: the valence / MAX_VALENCE, 1.0 where negated, and the valence after the
    scope's flip / MAX_VALENCE (what the lexicon says this occurrence means)."""
    value = table[tokens] / MAX_VALENCE
    flag = negated.to(value.dtype)
    signed = torch.where(negated, value * NEGATED_FACTOR, value)
    return torch.stack([value, flag, signed], dim=2)

"""Negation scope of the wide path: which token positions follow a negation, as id tensors.

Classic sentiment features (Das & Chen 2001; Pang, Lee & Vaithyanathan 2002) mark the words
after a negation so a bag of words tells "bad" from "not bad": a word within ``scope`` words
after not/no/never/n't forms counts as a different feature ("not_bad"); a clause word (but,
however, …) ends the scope early, and neither kind of word is itself marked. The cleaned text
has no punctuation, so the scope is a word count. Here the marking works on token ids inside
the model's wide path (engine/sentiment/model.py), so every preprocessing runner, the encoder
and old datasets stay as they are; the LSTM sees the plain ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

SCOPE_NEGATIONS = frozenset(
    [
        "not",
        "no",
        "never",
        "nor",
        "cannot",
        "cant",
        "dont",
        "doesnt",
        "didnt",
        "isnt",
        "wasnt",
        "wont",
        "wouldnt",
        "couldnt",
        "shouldnt",
        "arent",
        "werent",
        "havent",
        "hasnt",
        "hadnt",
        "aint",
        "nothing",
        "without",
    ]
)
"""Words that open a negation scope (cleaned spelling: "don't" is "dont")."""

SCOPE_CLAUSE = frozenset(["but", "however", "although", "though", "yet"])
"""Words that end a negation scope early."""


def scope_ids(words: Sequence[str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(ids of the negation words, ids of the clause words) in a vocabulary's id → word list."""
    negations = tuple(i for i, w in enumerate(words) if w in SCOPE_NEGATIONS)
    clauses = tuple(i for i, w in enumerate(words) if w in SCOPE_CLAUSE)
    return negations, clauses


def negated_mask(
    tokens: torch.Tensor, scope: int, negation_ids: torch.Tensor, clause_ids: torch.Tensor
) -> torch.Tensor:
    """Bool (B, T): the positions of right-padded ``tokens`` within ``scope`` words after a
    negation with no clause word between, themselves neither a negation nor a clause word."""
    negation = torch.isin(tokens, negation_ids)
    clause = torch.isin(tokens, clause_ids)
    opens = torch.zeros_like(negation)
    barrier = torch.zeros_like(negation)  # a clause word at t-k+1 .. t-1 (for the k being read)
    for k in range(1, min(scope, tokens.shape[1] - 1) + 1):
        if k > 1:
            barrier[:, k - 1 :] |= clause[:, : tokens.shape[1] - k + 1]
        opens[:, k:] |= negation[:, :-k] & ~barrier[:, k:]
    return opens & ~negation & ~clause

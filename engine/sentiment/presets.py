"""Model presets: the shapes `model.preset` names (torch-free, so the planner can read them)."""

from __future__ import annotations

from typing import Any

from engine.config import NO_INIT, OWN_TEXT_SVD, ModelConfig

PRESETS: dict[str, dict[str, Any]] = {
    # The old system's model: embedding 100, 2-layer LSTM hidden 32, two FC layers.
    "seed": dict(
        embedding_dim=100,
        hidden=32,
        layers=2,
        bidirectional=False,
        dropout=0.0,
        fc_hidden=32,
        pool="last",
        embed_dropout=0.0,
    ),
    # One bidirectional layer, max-pooled over time, light dropout, plus a linear bag of
    # unigrams and hashed bigrams added to the logit (the "wide" path) whose words within 3
    # after a negation count apart ("not_good") and which reads each text's lexicon valence:
    # measured against `seed` and TF-IDF + LR on the real Amazon files in BENCHMARKS.md
    # "Accuracy yardstick" and "Lexicon prior".
    "default": dict(
        embedding_dim=100,
        hidden=64,
        layers=1,
        bidirectional=True,
        dropout=0.2,
        fc_hidden=64,
        pool="max",
        ngram_buckets=1_000_000,
        ngram_scale=10.0,
        negation_scope=3,
        lexicon_prior=True,
    ),
}

PRESET_INIT: dict[str, str | None] = {"seed": None, "default": OWN_TEXT_SVD}
"""Each preset's embedding table start when `model.init_embeddings` is unset: the seed's
random table, or vectors from the training split's own text (BENCHMARKS.md "Own-text SVD
table")."""


PRESET_COMPANION: dict[str, bool] = {"seed": False, "default": True}
"""Whether each preset fits the linear companion after training when `model.companion` is
unset (BENCHMARKS.md "Linear companion")."""


def companion_of(cfg: ModelConfig) -> bool:
    """Whether a run fits the linear companion: the setting, else its preset's."""
    return PRESET_COMPANION.get(cfg.preset, False) if cfg.companion is None else cfg.companion


def init_embeddings_of(cfg: ModelConfig) -> str | None:
    """Where the embedding table starts: an embeddings run folder, OWN_TEXT_SVD, or None
    (random): the setting, else its preset's; `none` turns the preset's off."""
    value = cfg.init_embeddings
    if value is None:
        return PRESET_INIT.get(cfg.preset)
    return None if value == NO_INIT else value


def embeddings_folder_of(cfg: ModelConfig) -> str | None:
    """The embeddings run folder the table starts from, if it starts from one."""
    start = init_embeddings_of(cfg)
    return None if start == OWN_TEXT_SVD else start

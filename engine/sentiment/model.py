"""LSTM sentiment classifier: embedding → LSTM (packed on CPU, padded on GPU) → FC head → logit,
plus an optional linear bag of unigrams and hashed bigrams added to the logit (wide & deep)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from engine.config import OWN_TEXT_SVD, ModelConfig
from engine.errors import ConfigError
from engine.sentiment.companion import Companion, Marking
from engine.sentiment.lexicon import (
    FEATURES,
    TOKEN_FEATURES,
    lexicon_features,
    token_lexicon_features,
    valences,
)
from engine.sentiment.negation import negated_mask, scope_ids
from engine.sentiment.own_text import own_text_table
from engine.sentiment.padded_lstm import padded_lstm
from engine.sentiment.presets import PRESETS, init_embeddings_of
from engine.sentiment.pretrained import Aligned, dataset_itos, initial_table

__all__ = [
    "PRESETS",
    "ModelShape",
    "SentimentLSTM",
    "build_model",
    "count_parameters",
    "model_for",
    "resolve_spec",
]


@dataclass(kw_only=True, frozen=True, slots=True)
class ModelShape:
    """A fully resolved model shape (preset + overrides + the dataset's vocabulary)."""

    vocab_size: int
    """Rows of the embedding table (ids 0..vocab_size-1; 0 = padding)."""
    embedding_dim: int
    hidden: int
    layers: int
    bidirectional: bool
    dropout: float
    fc_hidden: int
    """Width of the first fully connected layer of the head."""
    pool: str = "last"
    """What the head reads: `last` = final hidden state(s); `max` = max over time of the top
    layer's outputs (padding excluded)."""
    embed_dropout: float = 0.0
    """Dropout on the embedded tokens (before the LSTM)."""
    ngram_buckets: int = 0
    """Hash buckets of the wide path's bigrams (0 = no wide path): a linear model over the
    text's unigram ids and hashed bigrams of consecutive ids, added to the LSTM's logit."""
    ngram_scale: float = 1.0
    """Fixed multiplier of the wide path's score: under Adam (steps ~lr whatever the gradient's
    size) it is the wide path's learning rate relative to the LSTM's."""
    ngram_hash: int = 1
    """How bigrams map to buckets (see :func:`bigram_buckets`): 2 for every model built now;
    1, the first rule, only to load runs saved before version 2 (their model.json lacks it)."""
    negation_scope: int = 0
    """Words after a negation whose unigrams and bigrams count as separate, negated features
    in the wide path (engine/sentiment/negation.py; 0 = off, the layout of older runs)."""
    negation_ids: tuple[int, ...] = ()
    """Token ids of the vocabulary's negation words (with negation_scope)."""
    clause_ids: tuple[int, ...] = ()
    """Token ids of the vocabulary's clause words, which end a negation scope."""
    lexicon_prior: bool = False
    """The wide path also reads each text's lexicon valence, flipped in a negation scope
    (engine/sentiment/lexicon.py; the per-id valences are a buffer saved with the weights)."""
    lexicon_tokens: bool = False
    """The LSTM also reads, per token, its lexicon valence, whether it sits in a negation scope
    and the valence that scope leaves (TOKEN_FEATURES numbers beside the embedding; needs the
    lexicon prior, whose valences it reads)."""
    companion_features: int = 0
    """Features of the linear companion fitted after training (engine/sentiment/companion.py;
    0 = none): its buffers are saved with the weights."""
    blend: tuple[float, ...] | None = None
    """(deep weight, wide weight, bias), or (deep, wide, companion weight, bias) with a
    companion, of the logit, fitted on the validation split after training
    (engine/sentiment/blend.py); None = the plain sum the paths were trained as."""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (stored in checkpoints and RUN_DIR/model.json)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelShape:
        """Inverse of :meth:`to_dict`."""
        blend = data.get("blend")
        ids: dict[str, tuple[int, ...]] = {
            k: tuple(data[k]) for k in ("negation_ids", "clause_ids") if k in data
        }
        return cls(**{**data, **ids, "blend": None if blend is None else tuple(blend)})


def resolve_spec(
    cfg: ModelConfig,
    vocab_size: int,
    init_dim: int | None = None,
    words: Sequence[str] | None = None,
) -> ModelShape:
    """The preset of ``cfg`` with its overrides applied, sized for ``vocab_size`` ids
    (``init_dim``: the size of initial vectors, used unless embedding_dim is set; ``words``:
    the vocabulary's id → word list, where the negation scope finds its words)."""
    if cfg.preset not in PRESETS:
        raise ConfigError(
            f"model.preset = {cfg.preset!r} is not allowed; expected one of {', '.join(PRESETS)}"
        )
    values = dict(PRESETS[cfg.preset])
    if init_dim is not None:
        values["embedding_dim"] = init_dim
    overridable = ("embedding_dim", "hidden", "layers", "bidirectional", "dropout", "embed_dropout")
    wide_settings = ("ngram_buckets", "ngram_scale", "negation_scope", "lexicon_prior")
    for name in (*overridable, *wide_settings, "lexicon_tokens"):
        override = getattr(cfg, name)
        if override is not None:
            values[name] = override
    if cfg.negation_scope is None and not values.get("ngram_buckets"):
        values["negation_scope"] = 0  # the preset's scope goes with its wide path
    if cfg.lexicon_prior is None and not values.get("ngram_buckets"):
        values["lexicon_prior"] = False  # so does its lexicon prior
    if cfg.lexicon_tokens is None and not values.get("lexicon_prior"):
        values["lexicon_tokens"] = False  # and the LSTM's reading of that lexicon
    if values.get("negation_scope") and values.get("ngram_buckets"):
        values["negation_ids"], values["clause_ids"] = scope_ids(words or [])
    spec = ModelShape(vocab_size=vocab_size, ngram_hash=NGRAM_HASH, **values)
    for name in ("vocab_size", "embedding_dim", "hidden", "layers", "fc_hidden"):
        if getattr(spec, name) < 1:
            raise ConfigError(f"model.{name} = {getattr(spec, name)} must be >= 1")
    if spec.ngram_buckets < 0:
        raise ConfigError(f"model.ngram_buckets = {spec.ngram_buckets} must be >= 0 (0 = off)")
    if spec.negation_scope < 0:
        raise ConfigError(f"model.negation_scope = {spec.negation_scope} must be >= 0 (0 = off)")
    if spec.negation_scope and not spec.ngram_buckets:
        raise ConfigError(
            f"model.negation_scope = {spec.negation_scope} marks the wide path's words; "
            "it needs model.ngram_buckets > 0"
        )
    if spec.lexicon_prior and not spec.ngram_buckets:
        raise ConfigError(
            "model.lexicon_prior adds to the wide path's score; it needs model.ngram_buckets > 0"
        )
    if spec.lexicon_tokens and not spec.lexicon_prior:
        raise ConfigError(
            "model.lexicon_tokens reads the lexicon prior's valences; it needs "
            "model.lexicon_prior (and the wide path)"
        )
    if not spec.ngram_scale > 0:
        raise ConfigError(f"model.ngram_scale = {spec.ngram_scale} must be > 0")
    if spec.pool not in ("last", "max"):
        raise ConfigError(f"model.pool = {spec.pool!r} is not allowed; expected last or max")
    for name in ("dropout", "embed_dropout"):
        if not 0.0 <= getattr(spec, name) < 1.0:
            raise ConfigError(f"model.{name} = {getattr(spec, name)} must be in [0, 1)")
    return spec


NGRAM_HASH = 2
"""The bigram hash of new models (ModelShape.ngram_hash)."""


def bigram_buckets(
    first: torch.Tensor, second: torch.Tensor, buckets: int, version: int
) -> torch.Tensor:
    """Bucket in [0, buckets) of each bigram (first, second) of int64 token ids (< 2**31).

    Version 2 mixes both ids through two 32-bit multiplicative hashes (every product stays
    below 2**63, so no int64 overflow): 350 k distinct bigrams of a real 20 k-review corpus fill
    302 k of 1 M buckets, as many as a random function would. Version 1, ``(a * 1_000_003 + b)
    % buckets``, reduces to ``3a + b`` for 1 M buckets — the same corpus fell into 48 k buckets —
    and is kept only so runs saved with it score as they did.
    """
    if version == 1:
        return (first * 1_000_003 + second) % buckets
    mixed = (first * 0x9E3779B1) % 2**32
    mixed = (torch.bitwise_xor(mixed, second) * 0x7FEB352D) % 2**32
    return mixed % buckets


def companion_marking(spec: ModelShape) -> Marking:
    """How the companion turns a model's token ids into features: the wide path's negation
    marking, when it has one."""
    scope = spec.negation_scope if spec.ngram_buckets else 0
    return Marking(spec.vocab_size, scope, spec.negation_ids, spec.clause_ids)


class WideNgrams(nn.Module):
    """Linear model over a text's unigram ids and hashed bigrams of consecutive ids: one weight
    per id or bucket, summed over the text's n-grams and divided by the square root of their
    count (as an L2-normalised bag of words weighs them); padding past the length counts nothing."""

    negation_ids: torch.Tensor
    clause_ids: torch.Tensor
    valence: torch.Tensor

    def __init__(
        self,
        vocab_size: int,
        buckets: int,
        scale: float = 1.0,
        hash_version: int = NGRAM_HASH,
        negation: tuple[int, tuple[int, ...], tuple[int, ...]] = (0, (), ()),
        lexicon_prior: bool = False,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.buckets = buckets
        self.scale = scale
        if hash_version not in (1, 2):
            raise ConfigError(f"model ngram_hash = {hash_version} is unknown; expected 1 or 2")
        self.hash_version = hash_version
        self.scope, negation_ids, clause_ids = negation
        self.unigrams = vocab_size * (2 if self.scope else 1)  # ids, then negated ids
        self.register_buffer("negation_ids", torch.tensor(negation_ids, dtype=torch.long), False)
        self.register_buffer("clause_ids", torch.tensor(clause_ids, dtype=torch.long), False)
        self.weight = nn.Embedding(self.unigrams + buckets, 1)
        nn.init.zeros_(self.weight.weight)  # starts as the LSTM alone
        self.lexicon: nn.Linear | None = None
        if lexicon_prior:  # valence per id: filled by build_model, or loaded with the weights
            self.register_buffer("valence", torch.zeros(vocab_size))
            self.lexicon = nn.Linear(FEATURES, 1, bias=False)
            nn.init.zeros_(self.lexicon.weight)

    def ids(self, tokens: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows (B, 2T-1) of the unigrams then the bigrams, mask of those inside the length)."""
        rows, mask, _ = self._rows(tokens, lengths)
        return rows, mask

    def _rows(
        self, tokens: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """ids(), and the negated positions (B, T) (None without a negation scope)."""
        tok = tokens.long()
        steps = torch.arange(tok.shape[1], device=tok.device)
        inside = steps.unsqueeze(0) < lengths.to(tok.device).unsqueeze(1)  # (B, T)
        negated = None
        if self.scope and len(self.negation_ids):
            negated = negated_mask(tok, self.scope, self.negation_ids, self.clause_ids)
            tok = tok + negated * self.vocab_size  # "not_bad" is another word than "bad"
        bigram = bigram_buckets(tok[:, :-1], tok[:, 1:], self.buckets, self.hash_version)
        bigram = bigram + self.unigrams
        rows = torch.cat([tok, bigram], dim=1)
        mask = torch.cat([inside, inside[:, 1:]], dim=1)  # a bigram needs its second token inside
        return rows.masked_fill(~mask, 0), mask, negated

    def token_features(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, T, TOKEN_FEATURES) per-token lexicon numbers of token ids (B, T), for the LSTM
        (padding has valence 0 and is never negated)."""
        tok = tokens.long()
        negated = torch.zeros_like(tok, dtype=torch.bool)
        if self.scope and len(self.negation_ids):
            negated = negated_mask(tok, self.scope, self.negation_ids, self.clause_ids)
        return token_lexicon_features(tok, negated, self.valence)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The wide logit (B,) of right-padded token ids (B, T) with true lengths (B,)."""
        rows, mask, negated = self._rows(tokens, lengths)
        weights = self.weight(rows).squeeze(2) * mask  # (B, 2T-1)
        count = mask.sum(dim=1).clamp(min=1)
        logit: torch.Tensor = weights.sum(dim=1) * self.scale / count.to(weights.dtype).sqrt()
        if self.lexicon is not None:
            inside = mask[:, : tokens.shape[1]]
            features = lexicon_features(tokens.long(), inside, negated, self.valence)
            logit = logit + self.lexicon(features.to(weights.dtype)).squeeze(1) * self.scale
        return logit


class SentimentLSTM(nn.Module):
    """Binary sentiment classifier; padding is skipped by packing sequences with their lengths."""

    def __init__(self, spec: ModelShape) -> None:
        super().__init__()
        self.spec = spec
        directions = 2 if spec.bidirectional else 1
        self.embedding = nn.Embedding(spec.vocab_size, spec.embedding_dim, padding_idx=0)
        self.embed_dropout = nn.Dropout(spec.embed_dropout)
        self.lstm = nn.LSTM(
            spec.embedding_dim + (TOKEN_FEATURES if spec.lexicon_tokens else 0),
            spec.hidden,
            num_layers=spec.layers,
            batch_first=True,
            bidirectional=spec.bidirectional,
            dropout=spec.dropout if spec.layers > 1 else 0.0,
        )
        self.head = nn.Sequential(
            nn.Dropout(spec.dropout),
            nn.Linear(spec.hidden * directions, spec.fc_hidden),
            nn.ReLU(),
            nn.Linear(spec.fc_hidden, 1),
        )
        self.wide = (
            WideNgrams(
                spec.vocab_size,
                spec.ngram_buckets,
                spec.ngram_scale,
                spec.ngram_hash,
                (spec.negation_scope, spec.negation_ids, spec.clause_ids),
                spec.lexicon_prior,
            )
            if spec.ngram_buckets
            else None
        )
        self.companion = (
            Companion(spec.companion_features, companion_marking(spec))
            if spec.companion_features
            else None
        )
        self.packing = "auto"
        """How the LSTM meets padding: `packed` (pack_padded_sequence: skips padding, fastest
        on a CPU), `padded` (engine/sentiment/padded_lstm.py: fixed shapes, fastest on a GPU;
        the same outputs) or `auto` (padded for CUDA tensors, else packed)."""

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Logits (B,) for right-padded token ids (B, T) with true lengths (B,) (on the CPU)."""
        deep, wide = self.parts(tokens, lengths)
        if wide is None:
            return deep
        blend = self.spec.blend
        if blend is None:
            return deep + wide  # float32 (a bf16 head under autocast is promoted)
        logit = blend[0] * deep + blend[1] * wide + blend[-1]
        if len(blend) == 4 and self.companion is not None:
            logit = logit + blend[2] * self.companion(tokens, lengths)
        return logit

    def parts(
        self, tokens: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the LSTM head's logit, the wide path's logit or None without one), each (B,)."""
        wide = self.wide(tokens, lengths.clamp(max=tokens.shape[1])) if self.wide else None
        lengths = lengths.clamp(min=1, max=tokens.shape[1])  # empty texts read one pad token
        emb = self.embed_dropout(self.embedding(tokens))  # (B, T, E)
        if self.spec.lexicon_tokens and self.wide is not None:
            lex = self.wide.token_features(tokens).to(emb.dtype)
            emb = torch.cat([emb, lex], dim=2)  # (B, T, E + TOKEN_FEATURES)
        if self.packing == "padded" or (self.packing == "auto" and tokens.is_cuda):
            features = self._features_padded(emb, lengths.to(tokens.device))
        else:
            features = self._features_packed(emb, lengths)
        logits: torch.Tensor = self.head(features).squeeze(1)  # (B,)
        return logits, wide

    def _features_packed(self, emb: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """What the head reads, through the LSTM over packed sequences (the CPU path)."""
        packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, (h_n, _) = self.lstm(packed)  # h_n: (layers * directions, B, H), in input order
        if self.spec.pool == "max":  # padding is -inf, so never the max
            padded, _ = pad_packed_sequence(out, batch_first=True, padding_value=float("-inf"))
            return padded.max(dim=1).values  # (B, H * directions)
        # (B, H), or (B, 2H) = [forward at the end, backward at the start]
        return torch.cat([h_n[-2], h_n[-1]], dim=1) if self.spec.bidirectional else h_n[-1]

    def _features_padded(self, emb: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The same features through the unpacked LSTM (the GPU path; see padded_lstm)."""
        out, last = padded_lstm(self.lstm, emb, lengths)
        if self.spec.pool != "max":
            return last
        steps = torch.arange(out.shape[1], device=out.device).unsqueeze(0)
        pad = (steps >= lengths.unsqueeze(1)).unsqueeze(2)  # (B, T, 1)
        return out.masked_fill(pad, float("-inf")).max(dim=1).values


def build_model(
    spec: ModelShape,
    embeddings: np.ndarray | None = None,
    words: Sequence[str] | None = None,
) -> SentimentLSTM:
    """A freshly initialised model for ``spec`` (seed torch first for reproducibility), its
    embedding table copied from ``embeddings`` (vocab_size × embedding_dim) when given, and
    with a lexicon prior its valences looked up for ``words`` (the vocabulary's id → word
    list; without it they stay 0 until saved weights are loaded)."""
    model = SentimentLSTM(spec)
    if model.wide is not None and model.wide.lexicon is not None and words is not None:
        listed = valences(words[: spec.vocab_size])
        with torch.no_grad():
            model.wide.valence[: len(listed)] = torch.tensor(listed)
    if embeddings is not None:
        want = (spec.vocab_size, spec.embedding_dim)
        if embeddings.shape != want:
            raise ConfigError(
                f"initial embedding table has shape {embeddings.shape}; the model needs {want}"
            )
        with torch.no_grad():
            model.embedding.weight.copy_(torch.from_numpy(embeddings))
    return model


def model_for(
    cfg: ModelConfig,
    vocab_size: int,
    data_dir: str,
    seed: int,
    main: bool = True,
    resumed: dict[str, Any] | None = None,
) -> tuple[ModelShape, SentimentLSTM, Aligned | None]:
    """(shape, fresh model, alignment) for a dataset: the table initialised from
    ``cfg.init_embeddings`` when set (seed torch first for a reproducible init). With
    `svd` only the ``main`` rank computes the table (DDP hands rank 0's weights to the rest).
    ``resumed``: the spec of the checkpoint the run continues, whose weights replace the
    table: none is built (the embeddings run folder may be gone), its size is the spec's."""
    preset = PRESETS.get(cfg.preset, {})
    scope = preset.get("negation_scope", 0) if cfg.negation_scope is None else cfg.negation_scope
    lexicon = preset.get("lexicon_prior", False) if cfg.lexicon_prior is None else cfg.lexicon_prior
    words = dataset_itos(data_dir) if scope or lexicon else None
    start = init_embeddings_of(cfg)
    if resumed is not None and start is not None:
        dim = int(resumed["embedding_dim"]) if start != OWN_TEXT_SVD else None
        spec = resolve_spec(cfg, vocab_size, dim, words)
        return spec, build_model(spec, None, words), None
    if start == OWN_TEXT_SVD:
        spec = resolve_spec(cfg, vocab_size, None, words)
        init = own_text_table(data_dir, vocab_size, spec.embedding_dim, seed) if main else None
    else:
        init = initial_table(start, cfg.embedding_dim, data_dir, seed)
        spec = resolve_spec(cfg, vocab_size, init.dim if init else None, words)
    return spec, build_model(spec, init.table if init else None, words), init


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)

"""Lexicon phrases: short texts built from the sentiment lexicon, an auxiliary loss of training.

A labelled corpus of product reviews rarely shows a negated negative word ("not bad at all"
occurs 9 times in the six Amazon files), so both paths learn that a negation means a bad review
and score litotes ("not disappointed", "no complaints") negative. Each training step also reads
a few phrases made of a lexicon word of the vocabulary, alone or after a negation word (with an
optional function word between: "not a problem", "never too loud"), whose soft target is what
the lexicon says the occurrence means: sigmoid(valence), the valence multiplied by VADER's -0.74
after the negation (engine/sentiment/lexicon.py). The phrases go through the same forward pass as
the batch (DDP sees one forward per step); their mean loss, times ``train.lexicon_phrases``, is
added to the batch's. Only the trainer reads them: nothing is written to the dataset.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from engine.config import TrainConfig
from engine.sentiment.data import Batch
from engine.sentiment.lexicon import NEGATED_FACTOR, valences
from engine.sentiment.negation import scope_ids
from engine.sentiment.pretrained import dataset_itos

MIN_VALENCE = 1.0
"""Lexicon words weaker than this (|valence| < 1: "ok", "fine") make no phrase."""
PHRASES_PER_STEP = 32
"""Phrases each rank adds to each step's batch."""
FILLERS = ("a", "the", "too", "very", "so", "really", "at", "all", "it", "that")
"""Function words that may sit between the negation and the lexicon word."""
WIDTH = 3
"""Tokens of the longest phrase: negation, filler, word."""
PHRASE_STREAM = 0x50485253
"""Third part of the phrase generator's seed, so its draws differ from the trainer's stream."""


class LexiconPhrases:
    """Draws each step's phrases from a vocabulary (ids) and scores their loss."""

    def __init__(self, words: Sequence[str], weight: float, seed: int, rank: int) -> None:
        listed = valences(words)
        chosen = [(i, v) for i, v in enumerate(listed) if abs(v) >= MIN_VALENCE and i > 1]
        negations, _ = scope_ids(words)
        index = {w: i for i, w in enumerate(words)}
        self.weight = weight
        self.word_ids = torch.tensor([i for i, _ in chosen], dtype=torch.long)
        self.word_valence = torch.tensor([v for _, v in chosen], dtype=torch.float32)
        self.negation_ids = torch.tensor(negations, dtype=torch.long)
        self.filler_ids = torch.tensor([index[w] for w in FILLERS if w in index], dtype=torch.long)
        # ints only: a str in the tuple would make the hash (and the phrases) differ per process
        stream = hash((seed, rank, PHRASE_STREAM)) & 0x7FFFFFFF
        self.generator = torch.Generator().manual_seed(stream)
        self.criterion = nn.BCEWithLogitsLoss()

    @property
    def usable(self) -> bool:
        """Whether the vocabulary holds lexicon words and negation words to build phrases from."""
        return len(self.word_ids) > 0 and len(self.negation_ids) > 0

    def draw(
        self, count: int = PHRASES_PER_STEP
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(tokens (count, WIDTH) right-padded, lengths (count,), soft targets (count,)): half
        the phrases negated, a filler between negation and word in half of those."""
        g = self.generator
        pick = torch.randint(len(self.word_ids), (count,), generator=g)
        word, valence = self.word_ids[pick], self.word_valence[pick]
        negated = torch.rand(count, generator=g) < 0.5
        filler = negated & (torch.rand(count, generator=g) < 0.5) & (len(self.filler_ids) > 0)
        tokens = torch.zeros((count, WIDTH), dtype=torch.long)
        neg = self.negation_ids[torch.randint(len(self.negation_ids), (count,), generator=g)]
        fill_ids = self.filler_ids if len(self.filler_ids) else torch.zeros(1, dtype=torch.long)
        fill = fill_ids[torch.randint(len(fill_ids), (count,), generator=g)]
        tokens[:, 0] = torch.where(negated, neg, word)
        tokens[:, 1] = torch.where(filler, fill, torch.where(negated, word, 0))
        tokens[:, 2] = torch.where(filler, word, 0)
        lengths = 1 + negated.long() + filler.long()
        meant = torch.where(negated, valence * NEGATED_FACTOR, valence)
        return tokens, lengths, torch.sigmoid(meant)

    def extend(
        self, tokens: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The batch with this step's phrases appended as rows (tokens keep their dtype and
        device, widened to WIDTH if narrower); returns (tokens, lengths, phrase targets)."""
        phrase, phrase_len, target = self.draw()
        width = max(tokens.shape[1], WIDTH)
        if tokens.shape[1] < width:
            tokens = nn.functional.pad(tokens, (0, width - tokens.shape[1]))
        rows = torch.zeros((len(phrase), width), dtype=tokens.dtype)
        rows[:, :WIDTH] = phrase.to(tokens.dtype)
        joined = torch.cat([tokens, rows.to(tokens.device)])
        return joined, torch.cat([lengths, phrase_len.to(lengths.dtype)]), target

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The weighted mean loss of the phrases' logits against their soft targets."""
        loss: torch.Tensor = self.criterion(logits.float(), target.to(logits.device))
        return self.weight * loss


def phrases_for(cfg: TrainConfig, rank: int) -> LexiconPhrases | None:
    """The phrases of a run with ``train.lexicon_phrases`` > 0 whose vocabulary can build them
    (None: off, or no lexicon or negation word in the vocabulary)."""
    if cfg.lexicon_phrases <= 0:
        return None
    phrases = LexiconPhrases(dataset_itos(cfg.data_dir), cfg.lexicon_phrases, cfg.seed, rank)
    return phrases if phrases.usable else None


def forward_with_phrases(
    model: nn.Module, phrases: LexiconPhrases | None, batch: Batch
) -> tuple[torch.Tensor, torch.Tensor]:
    """(the batch's logits, the phrases' weighted loss or 0) of one forward pass of ``model``
    over the batch with this step's phrases appended (just the batch without phrases)."""
    if phrases is None:
        logits: torch.Tensor = model(batch.tokens, batch.lengths)
        return logits, torch.zeros((), device=logits.device)
    tokens, lengths, target = phrases.extend(batch.tokens, batch.lengths)
    logits = model(tokens, lengths)
    rows = len(batch.labels)
    return logits[:rows], phrases.loss(logits[rows:], target)

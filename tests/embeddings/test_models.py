"""SGNS with both encoders: the loss decreases on real text; the char encoder's vectors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.embeddings.corpus import Corpus, NegativeSampler, epoch_pairs
from engine.embeddings.models import CharEncoder, build_model, char_ids


def _train(corpus: Corpus, encoder: str, steps: int, batch: int) -> list[float]:
    torch.manual_seed(0)
    model = build_model(encoder, corpus.itos, dim=32, char_dim=16, max_len=12)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    negatives = NegativeSampler(corpus.counts, seed=0)
    centres, contexts, _ = epoch_pairs(
        corpus, (0, corpus.num_docs), window=5, subsample=1e-4, seed=0
    )
    assert len(centres) >= steps * batch
    losses = []
    for step in range(steps):
        lo, hi = step * batch, (step + 1) * batch
        x, y = torch.from_numpy(centres[lo:hi]), torch.from_numpy(contexts[lo:hi])
        loss = model(x, y, negatives.sample(batch, 10))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


@pytest.mark.parametrize(
    ("encoder", "steps"), [pytest.param("word", 300, marks=pytest.mark.slow), ("char", 60)]
)
def test_sgns_loss_decreases_on_imdb_text(imdb_corpus: Corpus, encoder: str, steps: int) -> None:
    losses = _train(imdb_corpus, encoder, steps, batch=256)
    # The context table starts at 0, so every score is 0: loss = 11·log 2 (1 positive + 10
    # negatives) before the first step.
    assert losses[0] == pytest.approx(11 * np.log(2), rel=1e-5)
    first, last = np.mean(losses[:10]), np.mean(losses[-10:])
    assert last < first and last < 0.7 * losses[0]


def test_char_encoder_vector_is_the_last_hidden_state_of_the_word() -> None:
    torch.manual_seed(0)
    words = ["film", "a", "filmmaking", "supercalifragilistic"]
    enc = CharEncoder(words, dim=8, char_dim=4, max_len=12)
    chars, lengths = char_ids(words, 12)
    assert lengths.tolist() == [4, 1, 10, 12]  # truncated at max_len
    for i in range(len(words)):
        n = int(lengths[i])
        _, (h, _) = enc.lstm(enc.embed(chars[i : i + 1, :n]))  # the word alone, unpadded
        alone = h[0, 0]
        in_batch = enc(torch.tensor([3, i, 0, i]))  # with padding and repeats around it
        assert torch.allclose(in_batch[1], alone, atol=1e-6)
        assert torch.allclose(in_batch[3], alone, atol=1e-6)

"""The embedding table from the training split's own text (``init_embeddings: svd``).

The truncated SVD of the split's PPMI matrix, computed at training start: no extra step and
no other text. The dataset's training rows (already the classifier's word ids) are the corpus
of :func:`engine.embeddings.svd.svd_vectors`, read in blocks up to ``MAX_TOKENS`` content
tokens (rows are in a hash order, so the first rows are a random sample of the split). Row i
of the table is the vector of word id i; padding stays zero, the unknown id gets the mean
vector, and a vocabulary word absent from the sample starts random at the vectors' scale, as
:func:`engine.sentiment.pretrained.align` does for a run's vectors. Only training text is
read, never the test split.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import torch
from threadpoolctl import threadpool_limits

from engine.config import OWN_TEXT_SVD
from engine.embeddings.config import DEFAULT_WINDOW
from engine.embeddings.corpus import Corpus
from engine.embeddings.svd import svd_vectors
from engine.sentiment.data import dataset_path
from engine.sentiment.pretrained import Aligned

MAX_TOKENS = 20_000_000
"""Content tokens read at most: bounds the counting at any corpus size (measured: 1.8 M tokens
and 30 k words, 9 CPU-s, mostly the factorisation, which grows with the vocabulary)."""
BLOCK_ROWS = 65_536
"""Rows read per block."""


def read_corpus(data_dir: str | Path, vocab_size: int, max_tokens: int = MAX_TOKENS) -> Corpus:
    """The training rows' word ids (padding and the unknown id dropped) as a Corpus over the
    ``vocab_size - 2`` vocabulary words (corpus id = word id − 2), up to ``max_tokens``."""
    words = max(0, vocab_size - 2)
    parts: list[np.ndarray] = []
    starts: list[np.ndarray] = [np.zeros(1, np.int64)]
    total = 0
    with h5py.File(dataset_path(data_dir), "r") as fh:
        tokens, lengths = fh["train/tokens"], fh["train/lengths"]
        n = int(lengths.shape[0])
        for start in range(0, n, BLOCK_ROWS):
            block = np.asarray(tokens[start : start + BLOCK_ROWS], dtype=np.int64)
            width = block.shape[1]
            cap = np.minimum(np.asarray(lengths[start : start + BLOCK_ROWS]), width)
            inside = np.arange(width)[None, :] < cap[:, None]
            keep = inside & (block >= 2) & (block < words + 2)
            per_row = keep.sum(axis=1)
            room = np.cumsum(per_row) <= max_tokens - total
            rows = int(room.sum())  # a prefix: the counts only grow
            ids = block[:rows][keep[:rows]] - 2
            parts.append(ids)
            starts.append(total + np.cumsum(per_row[:rows]))
            total += len(ids)
            if rows < len(per_row):
                break
    ids = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    counts = np.bincount(ids, minlength=words).astype(np.int64)
    return Corpus(
        ids=ids.astype(np.int32),
        doc_starts=np.concatenate(starts),
        itos=[str(i + 2) for i in range(words)],  # the ids stand for themselves here
        counts=counts,
        raw_tokens=total,
    )


def own_text_table(data_dir: str | Path, vocab_size: int, dim: int, seed: int) -> Aligned:
    """The (vocab_size, dim) table of the dataset's own training text (see the module)."""
    corpus = read_corpus(data_dir, vocab_size)
    seen = corpus.counts > 0
    vectors = np.zeros((corpus.vocab_size, dim), np.float32)
    if seen.any():  # (no word in the sample: every row starts random)
        # BLAS gets the rank's thread count: its own pool beside the other ranks' threads made
        # the factorisation 6x slower on 2 busy cores (4.8 s against 0.8 s for 5 k words)
        with threadpool_limits(limits=torch.get_num_threads(), user_api="blas"):
            vectors, _ = svd_vectors(corpus, DEFAULT_WINDOW, dim, seed)
    rng = np.random.default_rng(seed)
    sigma = float(vectors[seen].std()) if seen.any() else 1.0
    table = rng.normal(0.0, sigma or 1.0, size=(vocab_size, dim)).astype(np.float32)
    table[0] = 0.0
    if vocab_size > 2:
        table[2:][seen] = vectors[seen]
        if seen.any():
            table[1] = vectors[seen].mean(axis=0)
    found = int(seen.sum())
    return Aligned(table, found, max(0, vocab_size - 2) - found, OWN_TEXT_SVD)

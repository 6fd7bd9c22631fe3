"""Judging embeddings: the SPPMI matrix, its SVD reference, the PIP loss, nearest neighbours.

The reference for the ``n`` most frequent words (ids 0..n-1) is ``U_d·S_d^½`` of the SVD of
their SPPMI rows (contexts: the whole vocabulary; the same corpus and window as training; shift
log k with k = the negatives; the context distribution smoothed by ^0.75, matching the negative
sampler), i.e. what SGNS implicitly factorises (Levy & Goldberg 2014). The PIP loss
‖E₁E₁ᵀ − E₂E₂ᵀ‖_F (Yin & Shen 2018) is computed without forming the n×n matrices.
"""

from __future__ import annotations

import numpy as np

from engine.embeddings.corpus import Corpus

CDS_ALPHA = 0.75
"""Context distribution smoothing exponent of the SPPMI matrix."""


def cooccurrence(corpus: Corpus, rows: int, window: int) -> np.ndarray:
    """(rows, V) counts of (word, context) pairs at distance 1..window inside a document, for
    the words with id < ``rows`` (no sub-sampling)."""
    ids = corpus.ids.astype(np.int64)
    doc = corpus.doc_of()
    vocab = corpus.vocab_size
    counts = np.zeros(rows * vocab, dtype=np.int64)
    for off in range(1, corpus.reach(window) + 1):
        same = doc[:-off] == doc[off:]
        left, right = ids[:-off][same], ids[off:][same]
        for w, c in ((left, right), (right, left)):
            keep = w < rows
            counts += np.bincount(w[keep] * vocab + c[keep], minlength=rows * vocab)
    return counts.reshape(rows, vocab)


def sppmi(pairs: np.ndarray, word_counts: np.ndarray, shift_k: int) -> np.ndarray:
    """(rows, V) max(PMI_α(w, c) − log k, 0) from pair counts and unigram counts."""
    rows = pairs.shape[0]
    total = max(1, int(pairs.sum()))
    p_w = word_counts[:rows] / word_counts.sum()
    ctx = word_counts.astype(np.float64) ** CDS_ALPHA
    p_c = ctx / ctx.sum()
    with np.errstate(divide="ignore"):
        pmi = np.log(pairs / total) - np.log(p_w)[:, None] - np.log(p_c)[None, :]
    return np.asarray(np.maximum(pmi - np.log(shift_k), 0.0))


def reference_embedding(matrix: np.ndarray, dim: int) -> np.ndarray:
    """(rows, d) ``U_d·S_d^½`` of the SVD of ``matrix``.

    SPPMI is mostly zeros, so this eigendecomposes the small Gram matrix ``M·Mᵀ = U·S²·Uᵀ``
    built with a sparse product instead of running a dense SVD of the wide matrix.
    """
    import torch

    m = torch.from_numpy(np.ascontiguousarray(matrix, dtype=np.float64))
    sparse = m.to_sparse()
    gram = torch.sparse.mm(sparse, m.T).numpy()  # (rows, rows)
    eigvals, eigvecs = np.linalg.eigh((gram + gram.T) / 2)
    order = np.argsort(eigvals)[::-1][: min(dim, len(eigvals))]
    singular = np.sqrt(np.maximum(eigvals[order], 0.0))
    return np.asarray(eigvecs[:, order] * np.sqrt(singular))


def sppmi_reference(corpus: Corpus, rows: int, window: int, shift_k: int, dim: int) -> np.ndarray:
    """The reference embedding of the ``rows`` most frequent words."""
    rows = min(rows, corpus.vocab_size)
    pairs = cooccurrence(corpus, rows, window)
    return reference_embedding(sppmi(pairs, corpus.counts, shift_k), dim)


def pip_loss(
    e1: np.ndarray, e2: np.ndarray, *, normalize: bool = True, center: bool = True
) -> float:
    """‖E₁E₁ᵀ − E₂E₂ᵀ‖_F of two (n, d₁), (n, d₂) embeddings of the same n words.

    With ``center`` each embedding's mean vector is removed first (SGNS vectors of frequent
    words share a large common direction that says nothing about similarity); with
    ``normalize`` each PIP matrix is then scaled to unit Frobenius norm (the loss lies in
    [0, 2] and ignores the overall scale, which SGNS does not pin down). Either way the loss is
    0 for a copy and unchanged by E → EQ for any orthogonal Q.
    """
    a, b = np.asarray(e1, np.float64), np.asarray(e2, np.float64)
    if center:
        a, b = a - a.mean(axis=0), b - b.mean(axis=0)
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"embeddings of {a.shape[0]} and {b.shape[0]} words cannot be compared")
    aa = float(np.linalg.norm(a.T @ a))  # = ‖AAᵀ‖_F
    bb = float(np.linalg.norm(b.T @ b))
    ab = float(np.linalg.norm(a.T @ b))  # ‖AᵀB‖_F² = <AAᵀ, BBᵀ>_F
    if normalize:
        if aa == 0 or bb == 0:
            return 0.0 if aa == bb else 1.0  # a zero matrix against a unit-norm one
        sq = 2.0 - 2.0 * ab**2 / (aa * bb)
    else:
        sq = aa**2 + bb**2 - 2.0 * ab**2
    return float(np.sqrt(max(sq, 0.0)))


def nearest_neighbours(
    vectors: np.ndarray, itos: list[str], words: list[str], k: int = 5
) -> dict[str, list[str]]:
    """The ``k`` nearest words by cosine similarity of each of ``words`` found in ``itos``."""
    index = {w: i for i, w in enumerate(itos[: len(vectors)])}
    k = min(k, len(vectors) - 1)  # a word is never its own neighbour, even in a tiny vocabulary
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.maximum(norms, 1e-12)
    out: dict[str, list[str]] = {}
    for word in words:
        i = index.get(word)
        if i is None:
            continue
        sims = unit @ unit[i]
        sims[i] = -np.inf
        if k < 1:
            out[word] = []
            continue
        top = np.argpartition(-sims, k - 1)[:k]
        out[word] = [itos[j] for j in top[np.argsort(-sims[top])]]
    return out

"""Word vectors without training: the truncated SVD of the corpus's PPMI matrix (mode `svd`).

SGNS implicitly factorises a shifted PMI matrix (Levy & Goldberg 2014); factorising it directly
gives comparable vectors in seconds on a CPU, where SGNS over 14 M tokens takes about an hour on
two cores. Settings follow Levy, Goldberg & Dagan (2015)'s advice for SVD: context counts
smoothed by ^0.75, no shift, U·S^½, the window's pairs weighted as word2vec's dynamic window
samples them ((window − d + 1) / window at distance d). The vectors are rescaled to unit
standard deviation — the scale of a fresh nn.Embedding, so `train.model.init_embeddings` starts
the classifier at its usual input scale.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from engine.embeddings.config import EmbedConfig
from engine.embeddings.corpus import Corpus
from engine.embeddings.evaluate import CDS_ALPHA, nearest_neighbours, pip_loss
from engine.events import Emitter

CHUNK_TOKENS = 20_000_000
"""Tokens counted at once (bounds the memory of the pair arrays at any corpus size)."""
OVERSAMPLE = 20
"""Extra random directions of the randomized SVD (Halko, Martinsson & Tropp 2011)."""
POWER_ITERATIONS = 4
"""Power iterations of the randomized SVD (the PPMI spectrum decays slowly)."""


def cooccurrence(corpus: Corpus, window: int, chunk: int = CHUNK_TOKENS) -> sp.csr_matrix:
    """Symmetric (V, V) weighted counts of the word pairs within ``window`` of each other in
    one document; a pair at distance d counts (window − d + 1) / window."""
    ids = corpus.ids.astype(np.int64)
    doc = corpus.doc_of()
    size = corpus.vocab_size
    total = sp.csr_matrix((size, size), dtype=np.float64)
    for start in range(0, len(ids), chunk):
        stop = min(len(ids), start + chunk)
        for d in range(1, corpus.reach(window) + 1):  # the weights keep the window asked for
            end = min(len(ids), stop + d)
            if end - d <= start:  # a last chunk shorter than d: its pairs were counted before
                continue
            same = doc[start : end - d] == doc[start + d : end]
            if not same.any():
                continue
            left, right = ids[start : end - d][same], ids[start + d : end][same]
            weight = np.full(len(left), (window - d + 1) / window)
            total = total + sp.coo_matrix((weight, (left, right)), (size, size)).tocsr()
    return (total + total.T).tocsr()


def ppmi(counts: sp.csr_matrix, alpha: float = CDS_ALPHA) -> sp.csr_matrix:
    """max(PMI_α(w, c), 0) of the nonzero counts (context counts smoothed by ^alpha)."""
    if counts.nnz == 0:
        return sp.csr_matrix(counts.shape, dtype=np.float64)
    coo = counts.tocoo()
    word = np.asarray(counts.sum(axis=1)).ravel()
    ctx = word**alpha
    pmi = np.log(coo.data) + np.log(ctx.sum()) - np.log(word[coo.row]) - np.log(ctx[coo.col])
    keep = pmi > 0
    kept = (pmi[keep], (coo.row[keep], coo.col[keep]))
    return sp.coo_matrix(kept, counts.shape).tocsr()


def randomized_svd(matrix: sp.csr_matrix, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(U (n, k), singular values (k,)) of the top k = min(dim, n) singular directions of a
    sparse (n, n) matrix (Halko, Martinsson & Tropp 2011)."""
    n = matrix.shape[0]
    k = min(dim, n)
    probe = np.random.default_rng(seed).standard_normal((n, min(k + OVERSAMPLE, n)))
    transposed = matrix.T.tocsr()
    basis, _ = np.linalg.qr(matrix @ probe)
    for _ in range(POWER_ITERATIONS):
        basis, _ = np.linalg.qr(transposed @ basis)
        basis, _ = np.linalg.qr(matrix @ basis)
    u_small, singular, _ = np.linalg.svd((transposed @ basis).T, full_matrices=False)
    return (basis @ u_small)[:, :k], singular[:k]


def svd_vectors(corpus: Corpus, window: int, dim: int, seed: int) -> tuple[np.ndarray, int]:
    """((V, dim) float32 vectors at unit standard deviation, nonzeros of the PPMI matrix);
    columns past the matrix's rank (tiny corpora) are zero."""
    matrix = ppmi(cooccurrence(corpus, window))
    vectors = np.zeros((corpus.vocab_size, dim))
    nonzeros = int(matrix.nnz)
    if nonzeros:
        u, singular = randomized_svd(matrix, dim, seed)
        vectors[:, : u.shape[1]] = u * np.sqrt(singular)
    std = float(vectors.std())
    if std > 0:
        vectors /= std
    return vectors.astype(np.float32), nonzeros


def run_svd(cfg: EmbedConfig, emitter: Emitter) -> dict[str, Any]:
    """Vectors of the prepared corpus in RUN_DIR (embeddings.npy, summary.json, as a trained
    run leaves them); returns the summary."""
    from engine.embeddings.prepare import (
        CORPUS_FILE,
        REFERENCE_FILE,
        drop_previous,
        input_warnings,
    )
    from engine.embeddings.runtime import SUMMARY_FILE, VECTORS_FILE

    run_dir = Path(cfg.run_dir)
    started = time.time()
    corpus = Corpus.load(run_dir / CORPUS_FILE)
    with np.load(run_dir / REFERENCE_FILE) as z:
        reference = z["reference"]
    emitter.emit("stage_start", stage="svd", vocab=corpus.vocab_size, tokens=len(corpus.ids))
    vectors, nonzeros = svd_vectors(corpus, cfg.window, cfg.dim, cfg.seed)
    seconds = time.time() - started
    summary: dict[str, Any] = {
        "status": "ok",
        "workload": "embeddings",
        "mode": "svd",
        "encoder": "word",
        "device": "cpu",
        "dim": cfg.dim,
        "world_size": 1,
        "epochs": 0,
        "pip_loss_initial": None,
        "pip_loss": pip_loss(vectors[: len(reference)], reference),
        "wall_s": seconds,
        "train_s": seconds,
        "words_per_s": len(corpus.ids) / seconds if seconds > 0 else 0.0,
        "vocab": corpus.vocab_size,
        "tokens": len(corpus.ids),
        "ppmi_nonzeros": nonzeros,
        "eval_words": len(reference),
        "neighbours": nearest_neighbours(vectors, corpus.itos, cfg.probe_words),
        "reference_neighbours": nearest_neighbours(reference, corpus.itos, cfg.probe_words),
        "warnings": input_warnings(run_dir),
    }
    np.save(run_dir / VECTORS_FILE, vectors)
    tmp = run_dir / (SUMMARY_FILE + ".tmp")
    tmp.write_text(json.dumps(summary, indent=2), encoding="utf-8")
    tmp.replace(run_dir / SUMMARY_FILE)
    drop_previous(run_dir)  # the finished run a re-run kept until now
    emitter.emit("summary", stage="svd", **summary)
    emitter.emit("stage_end", stage="svd", status="ok", seconds=seconds)
    return summary

"""Word vectors by the SVD of a shifted PPMI matrix, written as an embeddings run (issue 13).

    .venv/bin/python benchmarks/sppmi_embeddings.py OUT_DIR TEXTS.jsonl [MORE.jsonl ...]

Levy & Goldberg (2014) showed SGNS factorises a shifted PMI matrix; its truncated SVD gives
comparable vectors in seconds on a CPU, where SGNS over the same 15 M tokens takes about an hour
on this box. Inputs are JSON lines with a `text` field already cleaned by the engine's
`clean_text` (the yardstick's fold files); tokens are split on spaces. Written: OUT_DIR/
embeddings.npy (V × dim float32, rescaled to unit standard deviation, the scale of a fresh
nn.Embedding) and OUT_DIR/corpus.npz (`itos`), the two files `train.model.init_embeddings`
reads. Settings (window 5 with SGNS's linearly decaying weights, context smoothing 0.75, no
shift, U·S^½) follow Levy, Goldberg & Dagan (2015)'s recommendations for SVD.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import scipy.sparse as sp


def read_docs(paths: list[str]) -> list[list[str]]:
    """The token lists of every line's `text`."""
    docs = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                docs.append(json.loads(line)["text"].split())
    return docs


def cooccurrence(docs: list[list[str]], itos: list[str], window: int) -> sp.csr_matrix:
    """Symmetric (V, V) counts of word pairs within ``window``, weighted (window - d + 1) /
    window at distance d; pairs never cross documents."""
    index = {w: i for i, w in enumerate(itos)}
    gap = [-1] * window
    ids: list[int] = []
    for doc in docs:
        ids.extend(index.get(w, -1) for w in doc)
        ids.extend(gap)
    arr = np.asarray(ids, dtype=np.int64)
    size = len(itos)
    total = sp.csr_matrix((size, size), dtype=np.float64)
    for d in range(1, window + 1):
        left, right = arr[:-d], arr[d:]
        keep = (left >= 0) & (right >= 0)
        weight = np.full(int(keep.sum()), (window - d + 1) / window)
        total = total + sp.coo_matrix((weight, (left[keep], right[keep])), (size, size)).tocsr()
    return (total + total.T).tocsr()


def ppmi(counts: sp.csr_matrix, alpha: float = 0.75, shift: float = 1.0) -> sp.csr_matrix:
    """max(PMI_alpha(w, c) - log shift, 0) of the nonzero counts."""
    coo = counts.tocoo()
    word = np.asarray(counts.sum(axis=1)).ravel()
    ctx = word**alpha
    pmi = (
        np.log(coo.data)
        + np.log(ctx.sum())
        - np.log(word[coo.row])
        - np.log(ctx[coo.col])
        - np.log(shift)
    )
    keep = pmi > 0
    shape = counts.shape
    return sp.coo_matrix((pmi[keep], (coo.row[keep], coo.col[keep])), shape).tocsr()


def randomized_svd(
    matrix: sp.csr_matrix, dim: int, seed: int, power: int = 4
) -> tuple[np.ndarray, np.ndarray]:
    """(U (n, dim), singular values (dim,)) of a sparse matrix (Halko et al. 2011)."""
    rng = np.random.default_rng(seed)
    probe = rng.standard_normal((matrix.shape[1], dim + 20))
    basis, _ = np.linalg.qr(matrix @ probe)
    for _ in range(power):
        basis, _ = np.linalg.qr(matrix.T @ basis)
        basis, _ = np.linalg.qr(matrix @ basis)
    small = (matrix.T @ basis).T  # (dim + 20, n) = basisᵀ · matrix
    u_small, singular, _ = np.linalg.svd(small, full_matrices=False)
    return (basis @ u_small)[:, :dim], singular[:dim]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--max-vocab", type=int, default=30_000)
    parser.add_argument("--min-count", type=int, default=5)
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    docs = read_docs(args.inputs)
    counts = Counter(w for doc in docs for w in doc)
    itos = [w for w, n in counts.most_common(args.max_vocab) if n >= args.min_count]
    read_s = time.perf_counter() - start
    matrix = ppmi(cooccurrence(docs, itos, args.window))
    count_s = time.perf_counter() - start - read_s
    u, singular = randomized_svd(matrix, args.dim, args.seed)
    vectors = u * np.sqrt(singular)
    vectors = (vectors / vectors.std()).astype(np.float32)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "embeddings.npy", vectors)
    np.savez(out / "corpus.npz", itos=np.array(json.dumps(itos)))
    summary = {
        "docs": len(docs),
        "tokens": sum(counts.values()),
        "vocab": len(itos),
        "nonzeros": int(matrix.nnz),
        "read_s": round(read_s, 1),
        "count_s": round(count_s, 1),
        "svd_s": round(time.perf_counter() - start - read_s - count_s, 1),
        "inputs": args.inputs,
    }
    (out / "sppmi.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

"""The linear companion: an NB-weighted logistic regression over word and word-pair ids.

A practitioner's strong simple models for review sentiment are linear models over word 1-2-grams;
Wang & Manning's NBSVM (ACL 2012) weighs each binary feature by its Naive Bayes log-count ratio
before the linear fit and beats TF-IDF on sentiment. Such a model errs on other texts than the
network does, so the two together beat either alone (BENCHMARKS.md "Linear companion"). After
training, rank 0 fits one on the training split's token ids — the rows the network learned from,
up to ``MAX_ROWS`` (rows are in hash order, so the first ones are a random sample) — with the
wide path's negation marking ("not_good" apart from "good"): each word id, and each pair of
consecutive ids, present in at least ``MIN_DF`` training rows is a feature; a row's value for it
is r = log((p / |p|) / (q / |q|)), p and q the feature's positive and negative row counts plus
``ALPHA``, and each row is L2-normalised. The L2 logistic regression's C is picked from
``C_GRID`` by validation accuracy (L-BFGS, warm-started along the grid), and the blend
(engine/sentiment/blend.py) weighs it against the network's two paths on the same validation
split. As the companion this weighting beat TF-IDF (sublinear tf, smooth idf: the yardstick
baseline's features) on the blend's validation log-loss on all 9 yardstick folds of a seed. The
fitted model is three buffers saved with the weights:
the sorted feature keys, their ratios and their weights.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import scipy.optimize
import scipy.sparse as sp
import torch
from threadpoolctl import threadpool_limits
from torch import nn

from engine.sentiment.data import Batch, dataset_path
from engine.sentiment.negation import negated_mask

MAX_ROWS = 100_000
"""Training rows the companion is fitted on at most: bounds its memory (the sparse matrix,
≈ 8 bytes per distinct n-gram of a row) at any dataset size."""
BLOCK_ROWS = 8_192
"""Rows turned into features at a time."""
MIN_DF = 2
"""Training rows a feature must occur in."""
ALPHA = 1.0
"""Smoothing count added to each feature's positive and negative row counts (Wang & Manning's
alpha)."""
C_GRID = (1.0, 4.0, 16.0, 64.0)
"""Inverse L2 strengths tried (scikit-learn's C: C × summed log-loss + ½‖w‖²)."""
MAX_ITER = 300
"""L-BFGS iterations per C."""


# ---------------------------------------------------------------- features (fit and inference)


@dataclass(frozen=True, slots=True)
class Marking:
    """How token ids become feature ids: the vocabulary size (ids below it) and the negation
    scope of the wide path (0: none), with its negation and clause word ids."""

    num_ids: int
    scope: int = 0
    negation_ids: tuple[int, ...] = ()
    clause_ids: tuple[int, ...] = ()

    @property
    def base(self) -> int:
        """Distinct unigram feature ids: the ids, then the negated ids when there is a scope."""
        return self.num_ids * (2 if self.scope else 1)

    @property
    def key_limit(self) -> int:
        """Above every feature key, so row × key_limit + key identifies a row's feature."""
        return self.base * (self.base + 2)


def ngram_keys(
    tokens: torch.Tensor, lengths: torch.Tensor, marking: Marking
) -> tuple[torch.Tensor, torch.Tensor]:
    """(row index, feature key) of every unigram and bigram occurrence of right-padded token
    ids (B, T) with true lengths (B,): a unigram's key is its (negation-marked) id, a bigram's
    ``base + a * base + b`` (int64; padding never counts)."""
    tok = tokens.long()
    width = tok.shape[1]
    inside = torch.arange(width, device=tok.device).unsqueeze(0) < lengths.to(tok.device).clamp(
        max=width
    ).unsqueeze(1)
    if marking.scope and marking.negation_ids:
        neg = torch.tensor(marking.negation_ids, dtype=torch.long, device=tok.device)
        clause = torch.tensor(marking.clause_ids, dtype=torch.long, device=tok.device)
        tok = tok + negated_mask(tok, marking.scope, neg, clause) * marking.num_ids
    base = marking.base
    rows = torch.arange(len(tok), device=tok.device).unsqueeze(1)
    uni_rows, uni = rows.expand_as(tok)[inside], tok[inside]
    pair = inside[:, 1:]
    bi = base + tok[:, :-1] * base + tok[:, 1:]
    bi_rows = rows.expand(-1, max(0, width - 1))[pair]
    return torch.cat([uni_rows, bi_rows]), torch.cat([uni, bi[pair]])


def _present(
    rows: torch.Tensor, cols: torch.Tensor, n_cols: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(row, column) of each distinct (row, column) pair: the binary features."""
    pairs = torch.unique(rows * n_cols + cols)
    return pairs // n_cols, pairs % n_cols


def feature_entries(
    rows: torch.Tensor, keys: torch.Tensor, vocab: torch.Tensor, ratio: torch.Tensor, n_rows: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(row, column, value) of the rows' L2-normalised NB-weighted binary feature matrix over
    the sorted feature keys ``vocab`` (keys outside it are dropped; ``ratio``: r per key)."""
    if len(vocab) == 0:
        empty = torch.zeros(0, dtype=torch.long, device=keys.device)
        return empty, empty, torch.zeros(0, device=keys.device)
    col = torch.searchsorted(vocab, keys).clamp(max=len(vocab) - 1)
    found = vocab[col] == keys
    r, c = _present(rows[found], col[found], len(vocab))
    value = ratio[c]
    norm = torch.zeros(n_rows, dtype=value.dtype, device=value.device)
    norm.index_add_(0, r, value * value)
    return r, c, value / norm.sqrt().clamp(min=1e-12)[r]


# ---------------------------------------------------------------- the fitted model


class Companion(nn.Module):
    """The fitted NB-weighted logistic regression: its logit (B,) of right-padded token ids."""

    vocab: torch.Tensor
    ratio: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor

    def __init__(self, features: int, marking: Marking) -> None:
        super().__init__()
        self.marking = marking
        self.register_buffer("vocab", torch.zeros(features, dtype=torch.long))
        self.register_buffer("ratio", torch.zeros(features))
        self.register_buffer("weight", torch.zeros(features))
        self.register_buffer("bias", torch.zeros(()))

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The companion's logit (B,) (float32)."""
        rows, keys = ngram_keys(tokens, lengths, self.marking)
        r, c, value = feature_entries(rows, keys, self.vocab, self.ratio, len(tokens))
        logit = torch.zeros(len(tokens), device=value.device)
        logit.index_add_(0, r, value * self.weight[c])
        return logit + self.bias


# ---------------------------------------------------------------- fitting


@dataclass(slots=True)
class CompanionFit:
    """What fitting found (for summary.json), and the fitted arrays."""

    c: float
    valid_accuracy: float
    features: int
    rows: int
    seconds: float
    accuracies: dict[str, float]
    """Validation accuracy per C tried."""
    vocab: np.ndarray
    ratio: np.ndarray
    weight: np.ndarray
    bias: float

    def summary(self) -> dict[str, Any]:
        """The scalar facts."""
        return {
            "c": self.c,
            "valid_accuracy": round(self.valid_accuracy, 4),
            "features": self.features,
            "rows": self.rows,
            "seconds": round(self.seconds, 2),
            "accuracy_by_c": self.accuracies,
        }

    def module(self, marking: Marking) -> Companion:
        """The fitted companion as a module."""
        mod = Companion(self.features, marking)
        with torch.no_grad():
            mod.vocab.copy_(torch.from_numpy(self.vocab))
            mod.ratio.copy_(torch.from_numpy(self.ratio))
            mod.weight.copy_(torch.from_numpy(self.weight))
            mod.bias.fill_(self.bias)
        return mod


def training_blocks(data_dir: str | Path, max_rows: int = MAX_ROWS) -> Iterator[Batch]:
    """The first ``max_rows`` training rows of a dataset, BLOCK_ROWS at a time."""
    with h5py.File(dataset_path(data_dir), "r") as fh:
        tokens, lengths, labels = fh["train/tokens"], fh["train/lengths"], fh["train/labels"]
        n = min(int(lengths.shape[0]), max_rows)
        for lo in range(0, n, BLOCK_ROWS):
            hi = min(n, lo + BLOCK_ROWS)
            yield Batch(
                torch.from_numpy(np.asarray(tokens[lo:hi]).astype(np.int64)),
                torch.from_numpy(np.asarray(lengths[lo:hi]).astype(np.int64)),
                torch.from_numpy(np.asarray(labels[lo:hi]).astype(np.float32)),
            )


def _row_counts_by_label(
    blocks: Iterable[Batch], marking: Marking
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(feature keys in at least MIN_DF rows, sorted; their positive and negative row counts;
    rows read)."""
    seen: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    n_rows = 0
    for batch in blocks:
        rows, keys = ngram_keys(batch.tokens, batch.lengths, marking)
        stride = marking.key_limit
        per_row = torch.unique(rows * stride + keys)  # each key once per row
        positive = batch.labels[per_row // stride] > 0.5
        for label in (True, False):
            distinct, count = torch.unique(per_row[positive == label] % stride, return_counts=True)
            seen.append((distinct.numpy(), count.numpy(), np.full(len(count), label)))
        n_rows += len(batch.labels)
    if not seen:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0), 0
    keys_all, where = np.unique(np.concatenate([k for k, _, _ in seen]), return_inverse=True)
    counts = np.concatenate([c for _, c, _ in seen]).astype(np.float64)
    labels = np.concatenate([y for _, _, y in seen])
    pos = np.bincount(where, weights=counts * labels, minlength=len(keys_all))
    neg = np.bincount(where, weights=counts * ~labels, minlength=len(keys_all))
    keep = pos + neg >= MIN_DF
    return keys_all[keep], pos[keep], neg[keep], n_rows


def nb_ratios(positive: np.ndarray, negative: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """r = log((p / |p|₁) / (q / |q|₁)) with p, q the row counts plus ``alpha``."""
    p, q = positive + alpha, negative + alpha
    return np.asarray(np.log(p / p.sum()) - np.log(q / q.sum()))


def _matrix(
    blocks: Iterable[Batch], marking: Marking, vocab: torch.Tensor, ratio: torch.Tensor
) -> tuple[Any, np.ndarray]:
    """CSR feature matrix (float32) and labels of the blocks."""
    mats, labels = [], []
    for batch in blocks:
        rows, keys = ngram_keys(batch.tokens.cpu(), batch.lengths, marking)
        n = len(batch.labels)
        r, c, value = feature_entries(rows, keys, vocab, ratio, n)
        entries = (value.numpy().astype(np.float32), (r.numpy(), c.numpy()))
        mats.append(sp.csr_matrix(entries, shape=(n, len(vocab))))
        labels.append(batch.labels.cpu().numpy())
    matrix = sp.vstack(mats, format="csr") if mats else sp.csr_matrix((0, len(vocab)))
    return matrix, np.concatenate(labels) if labels else np.zeros(0, np.float32)


def _fit_lr(x: Any, y: np.ndarray, c: float, start: np.ndarray) -> np.ndarray:
    """L2 logistic regression (weights, then an unpenalised bias) by L-BFGS from ``start``."""
    sign = 2.0 * y.astype(np.float64) - 1.0

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:-1], theta[-1]
        margin = sign * (x @ w + b)
        loss = np.logaddexp(0.0, -margin)
        slope = -sign * np.exp(-np.logaddexp(0.0, margin))  # d loss / d z
        grad = np.empty_like(theta)
        grad[:-1] = c * (x.T @ slope) + w
        grad[-1] = c * slope.sum()
        return float(c * loss.sum() + 0.5 * w @ w), grad

    done = scipy.optimize.minimize(
        objective, start, jac=True, method="L-BFGS-B", options={"maxiter": MAX_ITER}
    )
    return np.asarray(done.x)


def fit_companion(
    train: Callable[[], Iterable[Batch]], valid: Iterable[Batch], marking: Marking
) -> CompanionFit | None:
    """The companion of the training batches (``train()`` gives them, read twice) and the
    validation batches, C picked on validation accuracy (ties to the smaller C); None when no
    feature occurs in MIN_DF training rows."""
    start = time.perf_counter()
    keys, positive, negative, n_rows = _row_counts_by_label(train(), marking)
    if len(keys) == 0:
        return None
    ratio_np = nb_ratios(positive, negative)
    vocab, ratio = torch.from_numpy(keys), torch.from_numpy(ratio_np)
    x_fit, y_fit = _matrix(train(), marking, vocab, ratio)
    x_valid, y_valid = _matrix(valid, marking, vocab, ratio)
    theta = np.zeros(len(keys) + 1)
    best: tuple[float, float, np.ndarray] | None = None
    accuracies: dict[str, float] = {}
    for c in C_GRID:
        # BLAS (inside L-BFGS-B) gets the rank's threads: its own pool beside the other
        # ranks' threads spins instead of working (as in engine/sentiment/own_text.py)
        with threadpool_limits(limits=torch.get_num_threads(), user_api="blas"):
            theta = _fit_lr(x_fit, y_fit, c, theta)
        scores = x_valid @ theta[:-1] + theta[-1]
        accuracy = float(((scores > 0) == (y_valid > 0.5)).mean()) if len(y_valid) else math.nan
        accuracies[f"{c:g}"] = round(accuracy, 4)
        if best is None or accuracy > best[0]:
            best = (accuracy, c, theta.copy())
    assert best is not None
    accuracy, c, theta = best
    return CompanionFit(
        c=c,
        valid_accuracy=accuracy,
        features=len(keys),
        rows=n_rows,
        seconds=time.perf_counter() - start,
        accuracies=accuracies,
        vocab=keys.astype(np.int64),
        ratio=ratio_np.astype(np.float32),
        weight=theta[:-1].astype(np.float32),
        bias=float(theta[-1]),
    )

"""Token ids for SGNS: corpus building (raw text or dataset.h5), sub-sampling, negatives, pairs.

A :class:`Corpus` is one flat id array with document offsets, ids ranked by frequency (0 = the
most frequent word). Skip-gram pairs never cross a document boundary. Everything here is numpy
except :class:`NegativeSampler` (torch, used in the training step).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from engine.errors import DatasetError, InputError

NEG_TABLE_SIZE = 1_000_000
"""Entries of the unigram^0.75 table negatives are drawn from (word2vec uses 1e8)."""


@dataclass(frozen=True, slots=True)
class Corpus:
    """Documents as one id array; ids 0..V-1 ranked by frequency."""

    ids: np.ndarray  # (T,) int32
    doc_starts: np.ndarray  # (D+1,) int64: document d is ids[doc_starts[d]:doc_starts[d+1]]
    itos: list[str]
    counts: np.ndarray  # (V,) int64, non-increasing
    raw_tokens: int
    """Tokens read before out-of-vocabulary words were dropped (what words/s counts)."""

    @property
    def vocab_size(self) -> int:
        """Number of distinct ids."""
        return len(self.itos)

    @property
    def num_docs(self) -> int:
        """Number of documents (some may be empty)."""
        return len(self.doc_starts) - 1

    def reach(self, window: int) -> int:
        """``window`` capped at the longest document's length - 1: a pair farther apart than
        that cannot exist, and each distance costs a pass over the whole corpus (a window of
        100000 took hours to find nothing, or failed in the SVD's chunked count)."""
        longest = int(np.diff(self.doc_starts).max()) if self.num_docs else 0
        return max(0, min(window, longest - 1))

    def doc_of(self) -> np.ndarray:
        """(T,) document index of every token."""
        lengths = np.diff(self.doc_starts)
        return np.repeat(np.arange(self.num_docs, dtype=np.int64), lengths)

    def save(self, path: str | Path) -> None:
        """Write an .npz (atomic: written next to ``path`` then renamed)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(
            tmp,
            ids=self.ids,
            doc_starts=self.doc_starts,
            counts=self.counts,
            itos=np.array(json.dumps(self.itos)),
            raw_tokens=np.array(self.raw_tokens),
        )
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> Corpus:
        """Read what :meth:`save` wrote."""
        with np.load(path) as z:
            return cls(
                ids=z["ids"],
                doc_starts=z["doc_starts"],
                itos=list(json.loads(str(z["itos"]))),
                counts=z["counts"],
                raw_tokens=int(z["raw_tokens"]),
            )


def build_corpus(
    docs: Iterable[list[str]],
    *,
    min_count: int,
    max_vocab: int,
    max_docs: int | None = None,
    source: str = "the input",
) -> Corpus:
    """A Corpus of tokenised documents: the ``max_vocab`` most frequent words seen at least
    ``min_count`` times (ties broken by first appearance), other words dropped; ``source``
    names the input in errors."""
    token_docs: list[list[str]] = []
    counter: Counter[str] = Counter()
    for n, words in enumerate(docs):
        if max_docs is not None and n >= max_docs:
            break
        token_docs.append(words)
        counter.update(words)
    raw = sum(counter.values())
    if not raw:
        raise InputError(
            f"{source}: no usable review with any word in it",
            hint="pass a JSON-lines review file (`sentitop synth` makes one)",
        )
    ranked = [(w, c) for w, c in counter.most_common(max_vocab) if c >= min_count]
    capped = max_docs is not None and len(token_docs) >= max_docs
    if len(ranked) < 2:
        raise InputError(
            f"only {len(ranked)} word(s) occur >= {min_count} times in {len(token_docs)} documents",
            hint="give more text (more or larger --input files"
            + (f"; --max-docs {max_docs} stopped reading at that many" if capped else "")
            + ") or a lower --min-count",
        )
    index = {w: i for i, (w, _) in enumerate(ranked)}
    lengths = np.zeros(len(token_docs) + 1, dtype=np.int64)
    flat: list[int] = []
    for d, words in enumerate(token_docs):
        kept = [index[w] for w in words if w in index]
        flat.extend(kept)
        lengths[d + 1] = len(kept)
    return Corpus(
        ids=np.asarray(flat, dtype=np.int32),
        doc_starts=np.cumsum(lengths),
        itos=[w for w, _ in ranked],
        counts=np.array([c for _, c in ranked], dtype=np.int64),
        raw_tokens=raw,
    )


def read_text_docs(path: str) -> Iterator[list[str]]:
    """Cleaned words of each usable review of a raw JSON-lines file (format auto-detected,
    cleaning as in preprocessing; stopwords are kept — sub-sampling thins them)."""
    from engine.config import PreprocessConfig
    from engine.preprocess.readers import iter_records

    cfg = PreprocessConfig(inputs=[path], output="-")
    for record in iter_records(path, cfg):
        yield record.text.split()


def read_dataset_docs(data_dir: str) -> Iterator[list[str]]:
    """Words of every /train row of a preprocessed dataset (padding and <unk> dropped)."""
    from engine.sentiment.data import dataset_path
    from engine.sentiment.splits import open_dataset

    folder = Path(data_dir)
    if not folder.is_dir():
        raise DatasetError(
            f"--data {folder}: {'not a folder' if folder.exists() else 'no such folder'}",
            hint="pass a folder `sentitop preprocess` wrote (dataset.h5 + vocab.json), or raw "
            "review files with --input",
        )
    try:
        doc = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(
            f"{folder / 'vocab.json'}: unreadable ({exc})",
            hint="pass a folder `sentitop preprocess` wrote, or raw review files with --input",
        ) from None
    if not isinstance(doc, dict):
        raise DatasetError(f"{folder / 'vocab.json'}: not a JSON object")
    if "itos" in doc:
        itos = list(doc["itos"])
    elif "words" in doc:
        words: dict[str, int] = doc["words"]
        itos = [""] * (max(words.values()) + 1)
        for word, i in words.items():
            itos[i] = word
    else:
        raise DatasetError(f"{folder / 'vocab.json'}: neither `itos` nor `words` is present")
    path = dataset_path(folder)
    with open_dataset(path) as fh:  # DatasetError naming a corrupt file or another layout
        tokens = fh["train/tokens"][:]
        lengths = fh["train/lengths"][:]
    if len(tokens) != len(lengths):
        raise DatasetError(
            f"{path}: /train/tokens has {len(tokens)} rows but /train/lengths {len(lengths)}"
        )
    if tokens.size and int(tokens.max()) >= len(itos):  # an itos[i] IndexError before
        raise DatasetError(
            f"{path}: token id {int(tokens.max())} is past the {len(itos)} words of "
            f"{folder / 'vocab.json'}: the two files come from different runs",
            hint="re-run `sentitop preprocess` into an empty folder",
        )
    for row, length in zip(tokens, lengths, strict=True):
        yield [itos[i] for i in row[: int(length)].tolist() if i >= 2]


def keep_probabilities(counts: np.ndarray, t: float) -> np.ndarray:
    """(V,) word2vec's sub-sampling keep probability min(1, sqrt(t/f) + t/f), f = frequency."""
    f = counts / max(1, int(counts.sum()))
    ratio = t / np.maximum(f, 1e-12)
    return np.minimum(1.0, np.sqrt(ratio) + ratio)


def shard_docs(corpus: Corpus, index: int, count: int) -> tuple[int, int]:
    """Document range [lo, hi) of shard ``index`` of ``count``, balanced by tokens."""
    total = int(corpus.doc_starts[-1])
    cuts = [int(np.searchsorted(corpus.doc_starts, total * k / count)) for k in range(count + 1)]
    cuts[0], cuts[-1] = 0, corpus.num_docs
    return cuts[index], max(cuts[index], cuts[index + 1])


def max_pairs(corpus: Corpus, doc_range: tuple[int, int], window: int) -> int:
    """Skip-gram pairs of the documents in ``doc_range`` with every word kept: an upper bound
    of what :func:`epoch_pairs` draws (sub-sampling only removes words)."""
    lo, hi = doc_range
    n = np.diff(corpus.doc_starts[lo : hi + 1]).astype(np.int64)
    m = np.clip(n - 1, 0, window)  # distances 1..m fit inside a document of n words
    return int((2 * (m * n - m * (m + 1) // 2)).sum())


def _offset_pairs(ids: Any, doc: Any, window: int) -> tuple[list[Any], list[Any]]:
    """Pieces of (centres, contexts) at distance 1..window inside one document, for numpy
    arrays or torch tensors alike (the caller concatenates them)."""
    centres: list[Any] = []
    contexts: list[Any] = []
    for off in range(1, window + 1):
        same = doc[:-off] == doc[off:]
        left, right = ids[:-off][same], ids[off:][same]
        centres += [left, right]
        contexts += [right, left]
    return centres, contexts


def _token_span(corpus: Corpus, doc_range: tuple[int, int]) -> tuple[int, int, int]:
    """(first token, end token, raw corpus tokens they stand for) of a document range."""
    lo, hi = doc_range
    start, stop = int(corpus.doc_starts[lo]), int(corpus.doc_starts[hi])
    return start, stop, round(corpus.raw_tokens * (stop - start) / max(1, len(corpus.ids)))


def skipgram_pairs(ids: np.ndarray, doc: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(centres, contexts) of every pair at distance 1..window inside one document."""
    centres, contexts = _offset_pairs(ids, doc, window)
    if not centres:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(centres).astype(np.int64), np.concatenate(contexts).astype(np.int64)


def epoch_pairs(
    corpus: Corpus,
    doc_range: tuple[int, int],
    *,
    window: int,
    subsample: float,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Shuffled skip-gram pairs of the documents in ``doc_range`` after sub-sampling (drawn
    with ``seed``), and the raw corpus tokens that range stands for."""
    rng = np.random.default_rng(seed)
    ids, doc, raw = _kept_tokens(corpus, doc_range, subsample, rng)
    centres, contexts = skipgram_pairs(ids, doc, corpus.reach(window))
    order = rng.permutation(len(centres))
    return centres[order], contexts[order], raw


def epoch_pair_count(
    corpus: Corpus, doc_range: tuple[int, int], *, window: int, subsample: float, seed: int
) -> int:
    """How many pairs :func:`epoch_pairs` draws with these arguments (the same sub-sampling
    draw), counted without building them: the launcher's check of --batch before ranks start."""
    _, doc, _ = _kept_tokens(corpus, doc_range, subsample, np.random.default_rng(seed))
    same_doc = (
        np.count_nonzero(doc[:-off] == doc[off:]) for off in range(1, corpus.reach(window) + 1)
    )
    return 2 * sum(int(n) for n in same_doc)  # each pair both ways, as _offset_pairs makes them


def pair_seed(seed: int, epoch: int, shard: int) -> int:
    """The sub-sampling seed of ``shard``'s pairs in ``epoch`` of a run seeded ``seed``."""
    return (seed * 1_000_003 + epoch) * 1009 + shard


def _kept_tokens(
    corpus: Corpus, doc_range: tuple[int, int], subsample: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, int]:
    """(ids, document index) of the tokens of ``doc_range`` that sub-sampling keeps (one draw
    of ``rng`` per token), and the raw corpus tokens that range stands for."""
    start, stop, raw = _token_span(corpus, doc_range)
    ids = corpus.ids[start:stop]
    doc = corpus.doc_of()[start:stop]
    keep = rng.random(len(ids)) < keep_probabilities(corpus.counts, subsample)[ids]
    return ids[keep], doc[keep], raw


class DevicePairs:
    """Skip-gram pairs built on a torch device (a GPU): the corpus ids, document indexes and
    keep probabilities are uploaded once; each epoch's sub-sampling, pairing and shuffle run
    there, so the host does no per-epoch or per-step work. Same rules as :func:`epoch_pairs`
    (a different random stream)."""

    def __init__(self, corpus: Corpus, doc_range: tuple[int, int], device: torch.device) -> None:
        start, stop, self.raw = _token_span(corpus, doc_range)
        self.ids = torch.from_numpy(corpus.ids[start:stop].astype(np.int64)).to(device)
        self.doc = torch.from_numpy(corpus.doc_of()[start:stop]).to(device)
        self.counts = corpus.counts
        self.reach = corpus.reach
        self.keep_cache: dict[float, torch.Tensor] = {}
        self.device = device

    def epoch(
        self, *, window: int, subsample: float, seed: int
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Shuffled (centres, contexts) on the device and the raw tokens they stand for."""
        if subsample not in self.keep_cache:
            keep_p = keep_probabilities(self.counts, subsample).astype(np.float32)
            self.keep_cache[subsample] = torch.from_numpy(keep_p).to(self.device)
        gen = torch.Generator(device=self.device).manual_seed(seed)
        draw = torch.rand(len(self.ids), generator=gen, device=self.device)
        keep = draw < self.keep_cache[subsample][self.ids]
        centres, contexts = _offset_pairs(self.ids[keep], self.doc[keep], self.reach(window))
        if not centres:  # documents of one word: no pair at any distance
            empty = torch.zeros(0, dtype=torch.int64, device=self.device)
            return empty, empty, self.raw
        c, x = torch.cat(centres), torch.cat(contexts)
        order = torch.randperm(len(c), generator=gen, device=self.device)
        return c[order], x[order], self.raw


class NegativeSampler:
    """Draws negatives from unigram^0.75 through a precomputed table (as word2vec does), on
    ``device`` (the table lives there; CPU by default)."""

    def __init__(
        self,
        counts: np.ndarray,
        seed: int,
        table_size: int = NEG_TABLE_SIZE,
        device: torch.device | None = None,
    ) -> None:
        probs = counts.astype(np.float64) ** 0.75
        probs /= probs.sum()
        repeats = np.maximum(1, np.round(probs * table_size)).astype(np.int64)
        device = device or torch.device("cpu")
        self.table = torch.from_numpy(np.repeat(np.arange(len(counts)), repeats)).to(device)
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def sample(self, batch: int, k: int) -> torch.Tensor:
        """(batch, k) int64 word ids."""
        pick = torch.randint(
            len(self.table), (batch, k), generator=self.generator, device=self.table.device
        )
        return self.table[pick]

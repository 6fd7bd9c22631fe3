"""The reduce side shared by every runner: distinct text → row (label, split, content words),
vocabulary counting and selection, and encoding to fixed-length id sequences."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.preprocess.dedupe import is_test, mode_rating, order_key
from engine.preprocess.records import RecordSpec
from engine.preprocess.text import content_words

PAD_ID = 0
UNK_ID = 1


@dataclass(frozen=True, slots=True)
class LabelRule:
    """The rating scale shared by all inputs of a run."""

    rating_min: int
    rating_max: int
    negative_max: int

    @classmethod
    def of(cls, spec: RecordSpec) -> LabelRule:
        """The rule of a record spec."""
        return cls(spec.rating_min, spec.rating_max, spec.negative_max)

    def label(self, rating: int) -> int:
        """0 (negative) up to negative_max, else 1."""
        return 0 if rating <= self.negative_max else 1


Row = tuple[int, bytes, int, int, bytes]
"""(order key, cleaned text, label, 1 if test else 0, content words joined by spaces)."""


@dataclass(slots=True)
class ReduceCounts:
    """Counts of the reduce side; mergeable."""

    distinct: int = 0
    duplicates: int = 0
    only_stopwords: int = 0
    positive: int = 0
    negative: int = 0
    train: int = 0
    test: int = 0

    def merge(self, other: ReduceCounts) -> None:
        """Add another partition's counts."""
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def reduce_one(
    text: bytes, packed: int, rule: LabelRule, stop: frozenset[bytes], test_fraction: float
) -> tuple[Row | None, int, list[bytes]]:
    """(row or None when only stopwords remain, duplicates removed, content words) of one
    distinct text."""
    rating, total = mode_rating(packed, rule.rating_min, rule.rating_max)
    words = content_words(text, stop)
    if not words:
        return None, total - 1, words
    test = int(is_test(text, test_fraction))
    row = (order_key(text), text, rule.label(rating), test, b" ".join(words))
    return row, total - 1, words


@dataclass(slots=True)
class ReducedPart:
    """Rows of one reduce partition in global order, with its counts and training word counts."""

    rows: list[Row] = field(default_factory=list)
    counts: ReduceCounts = field(default_factory=ReduceCounts)
    train_words: Counter[bytes] = field(default_factory=Counter)

    def add(self, row: Row | None, duplicates: int, words: list[bytes] | None = None) -> None:
        """Account one reduced text (`words`: its content words, if already split)."""
        self.counts.distinct += 1
        self.counts.duplicates += duplicates
        if row is None:
            self.counts.only_stopwords += 1
            return
        self.rows.append(row)
        if row[2]:
            self.counts.positive += 1
        else:
            self.counts.negative += 1
        if row[3]:
            self.counts.test += 1
        else:
            self.counts.train += 1
            self.train_words.update(row[4].split() if words is None else words)

    def finish(self) -> ReducedPart:
        """Sort rows into the global order (order key, then text)."""
        self.rows.sort(key=lambda r: (r[0], r[1]))
        return self


def reduce_texts(
    items: Iterable[tuple[bytes, int]],
    rule: LabelRule,
    stop: frozenset[bytes],
    test_fraction: float,
) -> ReducedPart:
    """Reduce (text, packed counts) pairs of distinct texts into a sorted part."""
    part = ReducedPart()
    for text, packed in items:
        part.add(*reduce_one(text, packed, rule, stop, test_fraction))
    return part.finish()


def select_vocab(counts: Counter[bytes] | dict[bytes, int], size: int) -> list[str]:
    """The `size` most frequent words, ties broken alphabetically; word i gets id i + 2."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [word.decode() for word, _ in ranked[:size]]


def token_dtype(num_ids: int) -> Any:
    """uint16 when every id fits, else int32."""
    return np.uint16 if num_ids <= 1 << 16 else np.int32


def encode_word_lists(
    texts: Iterable[bytes], index: dict[bytes, int], seq_len: int, dtype: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(tokens N×seq_len, lengths N): ids of the first seq_len words (unknown → 1), 0-padded
    at the end."""
    lengths_list: list[int] = []
    flat: list[int] = []
    get = index.get
    for text in texts:
        words = text.split(None, seq_len)[:seq_len]
        lengths_list.append(len(words))
        flat.extend([get(w, UNK_ID) for w in words])
    lengths = np.asarray(lengths_list, dtype=np.int32)
    tokens = np.zeros((len(lengths_list), seq_len), dtype=dtype)
    if flat:
        tokens[np.arange(seq_len)[None, :] < lengths[:, None]] = flat
    return tokens, lengths


def word_index(vocab: list[str]) -> dict[bytes, int]:
    """word (bytes) → id for a vocabulary list."""
    return {w.encode(): i + 2 for i, w in enumerate(vocab)}

"""The local runner's hand-over between workers: raw texts to the worker that cleans them, then
each reduce partition (counts and keys) to the worker that reduces it, as marshal files."""

from __future__ import annotations

import marshal
import mmap
import os
import re
from collections.abc import Iterator
from typing import Any

from engine.preprocess.dedupe import add_counts, partition_of, text_keys
from engine.preprocess.mapper import Agg, Cache, Pending
from engine.preprocess.text import clean_text

Keys = dict[bytes, tuple[int, int]]
"""cleaned text → text_keys(text, test_fraction): (order key, 1 if test else 0)."""


class WorkerState:
    """A worker's aggregation of the texts it cleans, and one pending dict per other worker for
    the raw texts that worker cleans (by raw text hash; fork keeps str hashes equal across
    workers), so a text seen by every worker is cleaned once. Once the raw texts are handed
    over, the aggregation is split by reduce partition, each text's keys computed once for
    both the partition and the reduce."""

    def __init__(self, wid: int, workers: int) -> None:
        self.wid, self.workers = wid, workers
        self.agg: Agg = {}
        self.pending: list[Any] = [{} for _ in range(workers)]

    def defer(self, text: str) -> Pending | None:
        owner = hash(text) % self.workers
        if owner == self.wid:
            return None  # its own: cleaned here
        if "&" in text:
            if not _HAS_WORD(_ENTITIES("", text)):
                return None  # it might clean to nothing (a skip, counted here with its line)
        elif not (text[:1].isascii() and text[:1].isalnum()) and not _HAS_WORD(text):
            return None  # (most texts start with a letter: no regex search for them)
        pending: Pending = self.pending[owner]
        return pending

    def resolve(self, received: Pending, cache: Cache) -> None:
        """Count raw texts sent by other workers (cleaned here, or found in the cache)."""
        agg = self.agg
        get = agg.get
        for text, packed in received.items():
            hit = cache.get(text)
            key = hit[1] if hit is not None and type(hit[1]) is bytes else clean_text(text)
            agg[key] = get(key, 0) + packed

    def partitions(self, test_fraction: float) -> list[Any]:
        """(counts, keys) of each reduce partition (contiguous order-key ranges); empties the
        aggregation."""
        parts: list[tuple[Agg, Keys]] = [({}, {}) for _ in range(self.workers)]
        workers = self.workers
        for text, packed in self.agg.items():
            keys = text_keys(text, test_fraction)
            counts, part_keys = parts[partition_of(keys[0], workers)]
            counts[text] = packed
            part_keys[text] = keys
        self.agg = {}
        return list(parts)


_HAS_WORD = re.compile("[A-Za-z0-9]").search
"""A text with an ASCII letter or digit outside its character references never cleans to
nothing."""
_ENTITIES = re.compile(r"&#?[^\t\n\f <&;]*;?").sub
"""Removes every span html.unescape may replace (its pattern's matches, each extended to the
next delimiter): an ASCII letter or digit left over survives unescaping and cleaning."""


def send(buckets: list[Any], tmp: str, kind: str, wid: int) -> None:
    """Write every bucket but the worker's own for the worker it belongs to; frees them."""
    for p, bucket in enumerate(buckets):
        if p != wid:
            with open(os.path.join(tmp, f"{kind}-{wid}-{p}.marshal"), "wb") as fh:
                marshal.dump(bucket, fh)
            buckets[p] = None


def received(tmp: str, kind: str, workers: int, wid: int) -> Iterator[Any]:
    """The buckets the other workers wrote for this one (files removed once read)."""
    for other in range(workers):
        if other != wid:
            path = os.path.join(tmp, f"{kind}-{other}-{wid}.marshal")
            with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
                bucket = marshal.loads(m)  # no copy of the file in fresh memory (load(fh): slow)
            os.unlink(path)
            yield bucket


def merge(own: tuple[Agg, Keys], others: Iterator[tuple[Agg, Keys]]) -> tuple[Agg, Keys]:
    """The worker's own partition merged with what the other workers sent for it."""
    counts, keys = own
    for other, other_keys in others:
        if len(other) > len(counts):
            counts, other, keys, other_keys = other, counts, other_keys, keys
        add_counts(counts, other)
        keys.update(other_keys)
    return counts, keys

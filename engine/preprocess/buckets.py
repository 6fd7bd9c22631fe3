"""The spill path's reduce side: each worker's buckets merged from every run, reduced one at a
time with one word table, stashed, then encoded into the worker's HDF5 part in bucket order."""

from __future__ import annotations

import marshal
import os
from collections import Counter

import numpy as np

from engine.preprocess.h5_write import written_h5
from engine.preprocess.job import JobSettings
from engine.preprocess.reduce import ReduceCounts, WordTable, reduce_texts, token_dtype, word_index
from engine.preprocess.spill import RunReader, all_runs, load_part, scratch_error, stash_part
from engine.preprocess.writer import PartWriter, local_lut

APPEND_BYTES = 16 << 20
"""Encoded token bytes gathered before one append to the worker's part file."""


def reduce_buckets(job: JobSettings, wid: int) -> tuple[ReduceCounts, Counter[bytes], list[str]]:
    """Reduce worker `wid`'s buckets from every worker's runs, one bucket in memory at a time
    (one word table for all of them); each reduced bucket is stashed on disk until the
    vocabulary is known. Returns (counts, training word counts, stash paths in bucket order;
    the last path holds the word table)."""
    assert job.spill is not None
    reader = RunReader(all_runs(job.tmp))
    counts, stashed = ReduceCounts(), []
    table = WordTable(job.stop)
    id_counts = np.zeros(0, dtype=np.int64)
    try:
        for b in job.spill.my_buckets(wid):
            merged = reader.bucket(b)
            rule, stop, seq_len = job.rule, job.stop, job.seq_len
            part = reduce_texts(merged.items(), rule, stop, job.test_fraction, seq_len, table)
            del merged
            counts.merge(part.counts)
            assert part.id_counts is not None
            grown = np.zeros(len(table.words), dtype=np.int64)
            grown[: len(id_counts)] = id_counts
            grown[: len(part.id_counts)] += part.id_counts
            id_counts = grown
            path = os.path.join(job.tmp, f"bucket-{b:05d}.stash")
            stash_part(part, path)
            stashed.append(path)
        words_path = os.path.join(job.tmp, f"words-{wid}.marshal")
        with open(words_path, "wb") as fh:
            marshal.dump(table.words, fh)
    except OSError as exc:
        raise scratch_error(exc, job.tmp, spilling=True) from exc
    nonzero = np.flatnonzero(id_counts).tolist()
    train = [table.words[i] for i in nonzero]
    words = Counter(dict(zip(train, id_counts[nonzero].tolist(), strict=True)))
    return counts, words, [*stashed, words_path]


def encode_buckets(stashed: list[str], vocab: list[str], job: JobSettings, wid: int) -> list[str]:
    """Encode the stashed buckets (word table last) into this worker's one HDF5 part, in
    bucket order; stashes removed. Returns [part path]."""
    *buckets, words_path = stashed
    with open(words_path, "rb") as fh:
        words = marshal.load(fh)
    dtype = token_dtype(len(vocab) + 2)
    lut = local_lut(words, word_index(vocab), dtype)
    path = os.path.join(job.tmp, f"part-{wid:05d}.h5")
    with written_h5(path) as h5:  # a full disk: its error, not a crash
        _append_buckets(PartWriter(h5, job.seq_len, dtype), buckets, lut)
    return [path]


def _append_buckets(writer: PartWriter, buckets: list[str], lut: np.ndarray) -> None:
    pending: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {"train": [], "test": []}
    held = 0

    def flush() -> None:
        for split, blocks in pending.items():
            if blocks:
                writer.append(
                    split, *(np.concatenate(column) for column in zip(*blocks, strict=True))
                )
                blocks.clear()

    for stash in buckets:
        labels, tests, lengths, local = load_part(stash)
        os.unlink(stash)
        tokens = lut.take(local + 1)
        for split, mask in (("train", ~tests), ("test", tests)):
            pending[split].append((tokens[mask], labels[mask], lengths[mask]))
        held += tokens.nbytes
        if held >= APPEND_BYTES:  # a few large appends: each one resizes the datasets
            flush()
            held = 0
    flush()

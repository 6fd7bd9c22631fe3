"""Bounded memory for the local runner: the distinct-text state spilled to disk as bucketed runs
(buckets are contiguous order-key ranges), merged and reduced one bucket at a time."""

from __future__ import annotations

import errno
import glob
import hashlib
import marshal
import math
import os
import shutil
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import InputError, StorageError
from engine.preprocess.budget import MIN_BUDGET
from engine.preprocess.dedupe import add_counts
from engine.preprocess.mapper import CACHE_ENTRIES, Agg, Pending
from engine.preprocess.reduce import ReducedPart
from engine.preprocess.text import clean_text

ENTRY_BYTES = 150
"""Bytes of one distinct text's entry besides the text itself (dict slot, bytes and int objects)."""
REDUCE_ENTRY_BYTES = 700
"""Reduce working set per distinct text besides its text and tokens (row tuple, keys, words)."""
REDUCE_TOKEN_BYTES = 12
"""Reduce working set per token position (int32 ids, their copies while sorting)."""
MIN_LINE_BYTES = 400
"""Assumed smallest mean input line when sizing buckets (McAuley lines average ≈ 800 bytes)."""
MAX_BUCKETS = 8192
_FOOTER = struct.Struct("<Q")


@dataclass(frozen=True, slots=True)
class SpillPlan:
    """How a job bounds its memory (picklable; the same in every worker)."""

    budget: int
    """Resident bytes the workers may hold together (each its share) before they spill."""
    workers: int
    buckets: int
    """Order-key ranges the spilled state is split into (a multiple of workers)."""
    cache_entries: int
    """Raw-text cache entries per worker."""

    @property
    def worker_limit(self) -> int:
        """Resident bytes of one worker at which it first spills."""
        return self.budget // self.workers

    def owner(self, bucket: int) -> int:
        """Worker that reduces a bucket: contiguous ranges, so worker w's buckets are exactly
        the order keys of its in-memory reduce partition."""
        return bucket * self.workers // self.buckets

    def my_buckets(self, wid: int) -> range:
        """The buckets worker `wid` reduces, in order."""
        per = self.buckets // self.workers
        return range(wid * per, (wid + 1) * per)


def plan_spill(budget: int, workers: int, input_bytes: int, seq_len: int) -> SpillPlan:
    """Buckets sized so that one bucket's reduce fits a worker's share of the budget even if
    every line held a distinct text. The raw-text cache keeps its full size (a fixed cost of
    each worker, like the input blocks: shrinking it makes the map clean texts again)."""
    if budget < MIN_BUDGET:
        raise InputError(
            f"--memory-budget {budget:,} byte{'s' if budget != 1 else ''} is below the smallest "
            f"accepted: 1MB ({MIN_BUDGET:,} bytes)",
            hint="give 1MB or more, e.g. --memory-budget 1GB",
        )
    entries = input_bytes / MIN_LINE_BYTES
    per_entry = REDUCE_ENTRY_BYTES + MIN_LINE_BYTES + REDUCE_TOKEN_BYTES * seq_len
    per_worker = max(1, math.ceil(2 * entries * per_entry / budget))  # half: fixed costs
    buckets = workers * min(per_worker, MAX_BUCKETS // workers)
    return SpillPlan(budget, workers, buckets, CACHE_ENTRIES)


def likely_to_spill(plan: SpillPlan, input_bytes: int, distinct_share: float = 0.15) -> bool:
    """True when the input is obviously too large for the budget: even at the real corpus's
    share of distinct texts its state would pass the budget."""
    entries = input_bytes / 800 * distinct_share
    return entries * (ENTRY_BYTES + 500) > plan.budget


def state_bytes(dicts: Iterable[dict[Any, int]]) -> int:
    """Estimated bytes held by text → count dicts (mean key length from a small sample)."""
    entries = sample_len = sampled = 0
    for d in dicts:
        n = len(d)
        if not n:
            continue
        entries += n
        for key in islice(d, 32):
            sample_len += len(key)
            sampled += 1
    mean = sample_len / sampled if sampled else 0.0
    return int(entries * (ENTRY_BYTES + mean))


MIN_RUN_STATE = 16 << 20
"""Smallest state written as one run (or a quarter of the worker's share, if smaller): a budget
below the workers' fixed costs (interpreter, input block, raw-text cache: ≈ 150-200 MB each)
still spills in runs of this size."""


def resident_bytes() -> int | None:
    """This process's resident memory (Linux /proc/self/statm), or None elsewhere."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def bucket_of(key: bytes, buckets: int) -> int:
    """Bucket of a cleaned text: its order key's range (see dedupe.partition_of)."""
    digest = hashlib.blake2b(key, digest_size=16).digest()
    return (int.from_bytes(digest[:8], "big") * buckets) >> 64


def scratch_error(
    exc: OSError, folder: str, spilling: bool | None = None
) -> StorageError | InputError:
    """The user-facing error of a failed write in the scratch folder (a full disk names the
    output folder the scratch is for, and the memory budget only when runs were spilled:
    ``spilling`` None looks for them in ``folder``)."""
    from engine.preprocess.output_folder import output_of

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        if spilling is None:
            spilling = bool(glob.glob(os.path.join(glob.escape(folder), "run-*.bin")))
        less = ", or raise --memory-budget so less is spilled" if spilling else ""
        return StorageError(
            f"no space left on the device of {output_of(folder)} while preprocessing",
            hint=f"free disk space there or preprocess into a folder on a larger disk{less}",
        )
    if exc.errno in (
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EEXIST,
        errno.EACCES,
        errno.EROFS,
        errno.EPERM,
    ):
        return InputError(
            f"cannot write to the scratch folder {folder}: {exc.strerror}",
            hint="the output folder must exist and be writable",
        )
    return StorageError(f"writing {folder} failed: {exc}")


@dataclass(slots=True)
class Spiller:
    """One worker's spilled runs: each run is one file of marshal sections, one per bucket,
    with a footer indexing them."""

    plan: SpillPlan
    tmp: str
    wid: int
    runs: list[str] = field(default_factory=list)
    bytes_written: int = 0
    state_limit: int | None = None
    """Estimated state at which this worker spills, fixed when its resident memory first
    reached its share of the budget (the memory a spill frees is reused by the next state,
    so resident memory stays near that share)."""

    def over(self, dicts: Iterable[dict[Any, int]]) -> bool:
        """True when the worker should spill `dicts` now: before its first spill, when its
        resident memory passes its share of the budget (so the estimate's error and the
        fixed costs are counted); afterwards, when the state is back at that size."""
        state = state_bytes(dicts)
        if self.state_limit is None:
            rss = resident_bytes()
            if rss is not None and rss <= self.plan.worker_limit:
                return False
            if rss is None and state <= self.plan.worker_limit:
                return False
            self.state_limit = max(state, min(MIN_RUN_STATE, self.plan.worker_limit // 4))
        return state >= self.state_limit

    def spill(self, aggs: list[Agg], pending: Iterable[Pending] = ()) -> None:
        """Write `aggs` (and `pending` raw texts, cleaned here) as one run; empties them in
        place (callers' caches keep pointing at the same dicts)."""
        k = self.plan.buckets
        parts: list[Agg] = [{} for _ in range(k)]
        for agg in aggs:
            for key, packed in agg.items():
                bucket = parts[bucket_of(key, k)]
                bucket[key] = bucket.get(key, 0) + packed
            agg.clear()
        for raw in pending:
            for text, packed in raw.items():
                key = clean_text(text)  # a deferred text never cleans to nothing
                bucket = parts[bucket_of(key, k)]
                bucket[key] = bucket.get(key, 0) + packed
            raw.clear()
        path = os.path.join(self.tmp, f"run-{self.wid}-{len(self.runs)}.bin")
        offsets = []
        try:
            with open(path, "wb") as fh:
                for b in range(k):
                    offsets.append(fh.tell())
                    marshal.dump(parts[b], fh)
                    parts[b] = {}
                end = fh.tell()
                offsets.append(end)
                marshal.dump(offsets, fh)
                fh.write(_FOOTER.pack(end))
                self.bytes_written += fh.tell()
        except OSError as exc:
            raise scratch_error(exc, self.tmp, spilling=True) from exc
        self.runs.append(path)


def all_runs(tmp: str) -> list[str]:
    """Every run file in the scratch folder (of every worker), in a fixed order."""
    return sorted(str(p) for p in Path(tmp).glob("run-*.bin"))


class RunReader:
    """Reads one bucket at a time out of run files (offset indexes read once)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.index: list[list[int]] = []
        for path in paths:
            with open(path, "rb") as fh:
                fh.seek(-_FOOTER.size, os.SEEK_END)
                (end,) = _FOOTER.unpack(fh.read(_FOOTER.size))
                fh.seek(end)
                self.index.append(marshal.loads(fh.read()[: -_FOOTER.size]))

    def bucket(self, b: int) -> Agg:
        """The merged text → packed counts of bucket b over all runs."""
        merged: Agg = {}
        for path, offsets in zip(self.paths, self.index, strict=True):
            with open(path, "rb") as fh:
                fh.seek(offsets[b])
                part: Agg = marshal.loads(fh.read(offsets[b + 1] - offsets[b]))
            if len(part) > len(merged):
                merged, part = part, merged
            add_counts(merged, part)
        return merged


def stash_part(part: ReducedPart, path: str) -> None:
    """Keep a reduced bucket on disk until the vocabulary is known (see load_part); its local
    ids are those of the worker's shared WordTable, saved once (save_words)."""
    assert part.local_tokens is not None and part.lengths is not None
    head = {
        "labels": bytes(r[2] for r in part.rows),
        "tests": bytes(r[3] for r in part.rows),
    }
    with open(path, "wb") as fh:
        marshal.dump(head, fh)
        np.save(fh, part.lengths)
        np.save(fh, part.local_tokens)


def load_part(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(labels uint8, test flags bool, lengths, local tokens) of a stashed bucket."""
    with open(path, "rb") as fh:
        head = marshal.load(fh)
        lengths = np.load(fh)
        tokens = np.load(fh)
    labels = np.frombuffer(head["labels"], dtype=np.uint8)
    tests = np.frombuffer(head["tests"], dtype=np.uint8).astype(bool)
    return labels, tests, lengths, tokens


def iter_buckets(reader: RunReader, buckets: range) -> Iterator[tuple[int, Agg]]:
    """(bucket, merged state) for each bucket in order."""
    for b in buckets:
        yield b, reader.bucket(b)


def make_tmp(output: str) -> str:
    """A fresh scratch folder inside the output folder (same filesystem for the final rename);
    scratch folders left by killed runs (their process is gone) are removed first."""
    for old in Path(output).glob(".preprocess-tmp-*"):
        try:
            os.kill(int(old.name.rsplit("-", 1)[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(old, ignore_errors=True)
        except (ValueError, PermissionError):
            continue
    path = Path(output) / f".preprocess-tmp-{os.getpid()}"
    path.mkdir(parents=True, exist_ok=True)
    return str(path)

"""The default `local` runner: map, shuffle by key range, reduce and encode on all cores.

Same MapReduce shape and pure functions as the mrjob job, without mrjob's sort: each worker
aggregates text → rating counts in a dict (in-mapper combining), writes one marshal file per
reduce partition, then reduces one partition and writes one HDF5 part."""

from __future__ import annotations

import marshal
import multiprocessing as mp
import os
import queue
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.preprocess.dedupe import partition_of, text_keys
from engine.preprocess.mapper import Agg, MapStats, map_task
from engine.preprocess.readers import MapTask
from engine.preprocess.records import RecordSpec
from engine.preprocess.reduce import (
    LabelRule,
    ReduceCounts,
    ReducedPart,
    reduce_texts,
    select_vocab,
    token_dtype,
    word_index,
)
from engine.preprocess.writer import write_part

Progress = Callable[[int, int], None]
"""Called with (input bytes done since last call, lines read since last call)."""


@dataclass(slots=True)
class JobSettings:
    """What every worker needs to know (picklable)."""

    specs: list[RecordSpec]
    rule: LabelRule
    stop: frozenset[bytes]
    test_fraction: float
    max_line_bytes: int
    vocab_size: int
    seq_len: int
    tmp: str


@dataclass(slots=True)
class LocalResult:
    """What a runner hands to the combine step."""

    stats: MapStats
    counts: ReduceCounts
    vocab: list[str]
    parts: list[str]


def _map_into(
    tasks: list[MapTask], job: JobSettings, progress: Progress | None
) -> tuple[Agg, MapStats]:
    agg: Agg = {}
    stats = MapStats()
    cache: dict[str, bytes] = {}
    for task in tasks:
        map_task(task, job.specs[task.file_index], job.max_line_bytes, agg, stats, cache, progress)
    return agg, stats


def _write_partitions(agg: Agg, partitions: int, tmp: str, wid: int) -> None:
    buckets: list[dict[bytes, int]] = [{} for _ in range(partitions)]
    for text, packed in agg.items():
        buckets[partition_of(text_keys(text, 0.0)[0], partitions)][text] = packed
    agg.clear()
    for p, bucket in enumerate(buckets):
        with open(os.path.join(tmp, f"map-{wid}-{p}.marshal"), "wb") as fh:
            marshal.dump(bucket, fh)


def _load_partition(tmp: str, workers: int, p: int) -> dict[bytes, int]:
    merged: dict[bytes, int] = {}
    for wid in range(workers):
        path = os.path.join(tmp, f"map-{wid}-{p}.marshal")
        with open(path, "rb") as fh:
            bucket = marshal.load(fh)
        os.unlink(path)
        if not merged:
            merged = bucket
            continue
        get = merged.get
        for text, packed in bucket.items():
            merged[text] = get(text, 0) + packed
    return merged


def encode_part(part: ReducedPart, vocab: list[str], job: JobSettings, p: int) -> str:
    path = os.path.join(job.tmp, f"part-{p:05d}.h5")
    write_part(path, part, word_index(vocab), job.stop, job.seq_len, token_dtype(len(vocab) + 2))
    return path


def run_local(
    tasks: list[MapTask], job: JobSettings, workers: int, progress: Progress | None = None
) -> LocalResult:
    """Run the whole job with `workers` processes (1: in this process)."""
    if workers <= 1:
        agg, stats = _map_into(tasks, job, progress)
        part = reduce_texts(agg.items(), job.rule, job.stop, job.test_fraction, job.seq_len)
        del agg
        vocab = select_vocab(part.train_words, job.vocab_size)
        return LocalResult(stats, part.counts, vocab, [encode_part(part, vocab, job, 0)])
    return _Pool(job, workers).run(tasks, progress)


def _worker(
    wid: int, workers: int, job: JobSettings, tasks: Any, commands: Any, results: Any
) -> None:
    try:
        agg: Agg = {}
        stats = MapStats()
        cache: dict[str, bytes] = {}

        def report(nbytes: int, lines: int) -> None:
            results.put(("progress", nbytes, lines))

        while (task := tasks.get()) is not None:
            spec = job.specs[task.file_index]
            map_task(task, spec, job.max_line_bytes, agg, stats, cache, report)
        cache.clear()
        _write_partitions(agg, workers, job.tmp, wid)
        del agg
        results.put(("mapped", wid, stats))
        commands.get()  # every worker has written its map files
        items = _load_partition(job.tmp, workers, wid)
        part = reduce_texts(items.items(), job.rule, job.stop, job.test_fraction, job.seq_len)
        del items
        results.put(("reduced", wid, (part.counts, part.train_words)))
        part.train_words = Counter()
        vocab = commands.get()
        results.put(("encoded", wid, encode_part(part, vocab, job, wid)))
    except BaseException:  # reported to the parent, which raises it
        results.put(("error", wid, traceback.format_exc()))
        raise


class _Pool:
    """Worker processes driven through the map, reduce and encode phases."""

    def __init__(self, job: JobSettings, workers: int) -> None:
        self.job, self.workers = job, workers
        self.ctx: Any = mp.get_context("fork" if os.name == "posix" else "spawn")

    def run(self, tasks: list[MapTask], progress: Progress | None) -> LocalResult:
        task_q = self.ctx.Queue()
        result_q = self.ctx.Queue()
        commands = [self.ctx.Queue() for _ in range(self.workers)]
        procs = [
            self.ctx.Process(
                target=_worker,
                args=(w, self.workers, self.job, task_q, commands[w], result_q),
                daemon=True,
                name=f"preprocess-{w}",
            )
            for w in range(self.workers)
        ]
        for proc in procs:
            proc.start()
        try:
            for task in sorted(tasks, key=lambda t: -t.nbytes):
                task_q.put(task)
            for _ in procs:
                task_q.put(None)
            stats = MapStats()
            for _, got in self._collect(result_q, procs, "mapped", progress):
                stats.merge(got)
            for cmd in commands:
                cmd.put("reduce")
            counts = ReduceCounts()
            words: Counter[bytes] = Counter()
            for _, (part_counts, part_words) in self._collect(result_q, procs, "reduced", None):
                counts.merge(part_counts)
                words.update(part_words)
            vocab = select_vocab(words, self.job.vocab_size)
            for cmd in commands:
                cmd.put(vocab)
            parts = dict(self._collect(result_q, procs, "encoded", None))
            for proc in procs:
                proc.join()
            return LocalResult(stats, counts, vocab, [parts[w] for w in range(self.workers)])
        finally:
            for proc in procs:
                if proc.is_alive():
                    proc.terminate()
                proc.join()

    def _collect(
        self, result_q: Any, procs: list[Any], kind: str, progress: Progress | None
    ) -> list[tuple[int, Any]]:
        got: list[tuple[int, Any]] = []
        while len(got) < len(procs):
            try:
                msg = result_q.get(timeout=0.5)
            except queue.Empty:
                dead = [p.name for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"preprocess worker(s) {', '.join(dead)} died") from None
                continue
            if msg[0] == "progress":
                if progress:
                    progress(msg[1], msg[2])
            elif msg[0] == "error":
                raise RuntimeError(f"preprocess worker {msg[1]} failed:\n{msg[2]}")
            elif msg[0] == kind:
                got.append((msg[1], msg[2]))
        return got


def make_tmp(output: str) -> str:
    """A fresh scratch folder inside the output folder (same filesystem for the final rename)."""
    path = Path(output) / f".preprocess-tmp-{os.getpid()}"
    path.mkdir(parents=True, exist_ok=True)
    return str(path)

"""The default `local` runner: map, shuffle by key range, reduce and encode on all cores.

Same MapReduce shape and pure functions as the mrjob job, without mrjob's sort: each worker
aggregates cleaned text → rating counts in one dict (in-mapper combining; raw texts another
worker cleans are counted raw and handed to it), then splits it by reduce partition with each
text's keys (one digest per text, reused by the reduce), hands the other workers their
partitions as one marshal file each (engine.preprocess.handover), merges what it got into its
own, then reduces it and writes one HDF5 part; worker 0 instead writes dataset.h5 itself, its
own rows from memory while the others still encode, theirs from their parts when due. The
calling process is worker 0 and forks the others (one cold process fewer: a fresh worker
faults all its memory in); a worker's phases are engine.preprocess.pool_worker's."""

from __future__ import annotations

import ctypes
import gc
import multiprocessing as mp
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import errors
from engine.errors import SentitopError
from engine.fork_guard import ForkGuard
from engine.preprocess.buckets import encode_buckets, reduce_buckets
from engine.preprocess.job import JobSettings
from engine.preprocess.mapper import (
    CACHE_ENTRIES,
    Agg,
    Cache,
    MapStats,
    map_task,
)
from engine.preprocess.pool_worker import (
    Progress,
    StageClock,
    TaskList,
    Worker,
    child_main,
    spill_counts,
)
from engine.preprocess.readers import MapTask
from engine.preprocess.reduce import (
    ReduceCounts,
    reduce_texts,
    select_vocab,
    token_dtype,
)
from engine.preprocess.spill import (
    Spiller,
    plan_spill,
    scratch_error,
)
from engine.preprocess.termination import Terminated
from engine.preprocess.worker_procs import join_all, stop_workers
from engine.preprocess.writer import (
    DatasetTarget,
    Part,
    combine_parts,
    encode_part,
)
from engine.rank_malloc import MAX_MMAP_THRESHOLD


@dataclass(slots=True)
class LocalResult:
    """What a runner hands to the combine step."""

    stats: MapStats
    counts: ReduceCounts
    vocab: list[str]
    parts: list[str]
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds per stage (map, shuffle, reduce, encode, parent), summed over processes."""
    spill: dict[str, int] = field(default_factory=dict)
    """runs, bytes and buckets spilled to disk (zeros when everything fitted in memory)."""
    workers: int = 0
    """Worker processes (0: one per part)."""
    dataset: str | None = None
    """dataset.h5, when the runner combined the parts itself (else the caller combines them)."""


def _map_into(
    tasks: list[MapTask], job: JobSettings, progress: Progress | None, spiller: Spiller | None
) -> tuple[Agg, MapStats]:
    agg: Agg = {}
    stats = MapStats()
    cache: Cache = {}
    entries = job.spill.cache_entries if job.spill else CACHE_ENTRIES

    def report(nbytes: int, lines: int) -> None:
        if progress:
            progress(nbytes, lines)
        if spiller and spiller.over([agg]):
            spiller.spill([agg])  # in place: the cache's entries still point at agg

    for task in tasks:
        spec = job.specs[task.file_index]
        map_task(task, spec, job.max_line_bytes, agg, stats, cache, report, None, entries)
    return agg, stats


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""glibc mallopt parameters."""


def keep_freed_memory() -> None:
    """Ask glibc's malloc to keep freed memory for reuse (this process and later forks): the
    8 MiB input blocks and their lines are otherwise mapped and unmapped block after block,
    and each page faulted in again costs system time (≈ 10 % of the job's CPU). No-op where
    mallopt is unavailable."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return
    mallopt(M_MMAP_THRESHOLD, MAX_MMAP_THRESHOLD)
    mallopt(M_TRIM_THRESHOLD, 256 << 20)


def release_freed_memory() -> None:
    """Return the heap's free memory to the system (glibc malloc_trim); no-op elsewhere."""
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return
    malloc_trim(0)


def run_local(
    tasks: list[MapTask],
    job: JobSettings,
    workers: int,
    progress: Progress | None = None,
    target: DatasetTarget | None = None,
) -> LocalResult:
    """Run the whole job with `workers` processes (1: in this process). With `target` and
    several workers (not spilling), worker 0 writes the dataset itself (LocalResult.dataset)."""
    keep_freed_memory()
    was_enabled = gc.isenabled()
    gc.disable()  # the job makes no reference cycles; collections only re-walk the caches
    try:
        return _run_local(tasks, job, workers, progress, target)
    finally:
        if was_enabled:
            gc.enable()


def _run_local(
    tasks: list[MapTask],
    job: JobSettings,
    workers: int,
    progress: Progress | None,
    target: DatasetTarget | None,
) -> LocalResult:
    if job.memory_budget is not None:
        job.spill = plan_spill(job.memory_budget, workers, job.input_bytes, job.seq_len)
    if workers <= 1:
        clock = StageClock()
        spiller = Spiller(job.spill, job.tmp, 0) if job.spill else None
        agg, stats = _map_into(tasks, job, progress, spiller)
        clock.lap("map")
        if spiller and spiller.runs:
            spiller.spill([agg])
            clock.lap("shuffle")
            counts, words, stashed = reduce_buckets(job, 0)
            vocab = select_vocab(words, job.vocab_size)
            clock.lap("reduce")
            paths = encode_buckets(stashed, vocab, job, 0)
            clock.lap("encode")
            spilled = spill_counts(job, spiller)
            return LocalResult(stats, counts, vocab, paths, clock.cpu, spilled, 1)
        part = reduce_texts(agg.items(), job.rule, job.stop, job.test_fraction, job.seq_len)
        del agg
        vocab = select_vocab(part.train_words, job.vocab_size)
        clock.lap("reduce")
        path = encode_part(part, vocab, job, 0)
        clock.lap("encode")
        return LocalResult(stats, part.counts, vocab, [path], clock.cpu, spill_counts(job, None))
    return _Pool(job, workers).run(tasks, progress, target)


EXIT_DRAIN_S = 1.0
"""How long the parent still reads the result queue for the message of a worker that has
exited cleanly (its last messages are flushed to the pipe before it exits)."""


class _Pool:
    """The parent is worker 0; workers 1.. are forked processes, driven phase by phase."""

    def __init__(self, job: JobSettings, workers: int) -> None:
        self.job, self.workers = job, workers
        self.ctx: Any = mp.get_context("fork" if os.name == "posix" else "spawn")
        self.early: list[tuple[Any, ...]] = []  # phase messages seen while draining progress

    def run(
        self, tasks: list[MapTask], progress: Progress | None, target: DatasetTarget | None
    ) -> LocalResult:
        start_cpu = time.process_time()
        task_list = TaskList(tasks, self.ctx)
        result_q = self.ctx.Queue()
        # put() pickles and writes in the caller's thread: a Queue's feeder thread would wait
        # for the GIL while the parent encodes, and the vocabulary reached worker 1 ≈ 10 ms late
        commands = [self.ctx.SimpleQueue() for _ in range(self.workers)]
        stopping = self.ctx.RawValue("b", 0)  # no lock: a killed worker cannot leave it held
        guard = ForkGuard()
        procs = [
            self.ctx.Process(
                target=child_main,
                args=(w, self.workers, self.job, task_list, commands[w], result_q, stopping, guard),
                daemon=True,
                name=f"preprocess-{w}",
            )
            for w in range(1, self.workers)
        ]
        release_freed_memory()  # workers would copy-on-write pages they only overwrite
        done = False
        try:
            with guard:  # a Ctrl-C while forking is raised after it, not lost in a fork hook
                for proc in procs:
                    proc.start()
            own = Worker(0, self.workers, self.job)

            def report(nbytes: int, lines: int) -> None:
                if progress:
                    progress(nbytes, lines)
                self._drain(result_q, progress)

            own.map(iter(task_list.take, None), report)
            stats = own.stats
            spill_mode = own.spilled
            for _, (got, spilled) in self._collect(result_q, procs, "mapped", progress):
                stats.merge(got)
                spill_mode = spill_mode or spilled
            for cmd in commands[1:]:
                cmd.put(spill_mode)
            own.shuffle(spill_mode)
            self._collect(result_q, procs, "shuffled", None)
            for cmd in commands[1:]:
                cmd.put(None)  # every partition is written: reduce
            counts, words = own.reduce()
            for _, (part_counts, part_words) in self._collect(result_q, procs, "reduced", None):
                counts.merge(part_counts)
                words.update(part_words)
            vocab = select_vocab(words, self.job.vocab_size)
            for cmd in commands[1:]:
                cmd.put(vocab)
            spill = spill_counts(self.job, own.spiller)
            encoded: dict[int, list[str]] = {}
            worker_cpu: list[dict[str, float]] = []

            def finished() -> dict[int, list[str]]:
                """Every other worker's part paths, once all have written theirs."""
                if not encoded:
                    for wid, (paths, used, spilled) in self._collect(
                        result_q, procs, "encoded", None
                    ):
                        encoded[wid] = paths
                        worker_cpu.append(used)
                        spill["runs"] += spilled["runs"]
                        spill["bytes"] += spilled["bytes"]
                        spill["buckets"] = max(spill["buckets"], spilled["buckets"])
                return encoded

            dataset: str | None = None
            if target is None or spill_mode:
                ordered = own.encode(vocab)
                ordered += [path for w in range(1, self.workers) for path in finished()[w]]
            else:  # worker 0 writes its rows into the dataset while the others encode theirs
                parts: list[Part] = [own.encode_arrays(vocab)]
                parts += [_part_of(finished, w) for w in range(1, self.workers)]
                dtype, seq_len = token_dtype(len(vocab) + 2), self.job.seq_len
                totals = {"train": counts.train, "test": counts.test}
                combine_parts(parts, target.path, seq_len, dtype, target.attrs(vocab), totals)
                own.clock.lap("combine")
                finished()  # (when no row was due, not asked for yet)
                dataset, ordered = target.path, []
            cpu = dict(own.clock.cpu)
            for used in worker_cpu:
                for stage, seconds in used.items():
                    cpu[stage] = cpu.get(stage, 0.0) + seconds
            cpu["parent"] = time.process_time() - start_cpu - sum(own.clock.cpu.values())
            done = True
            return LocalResult(stats, counts, vocab, ordered, cpu, spill, self.workers, dataset)
        finally:
            if done:  # parts are written: let the workers free their memory and exit meanwhile
                threading.Thread(target=join_all, args=(procs,), daemon=True).start()
            else:  # none may outlive the job: it would write into scratch removed next
                stopping.value = 1
                stop_workers(procs)

    def _drain(self, result_q: Any, progress: Progress | None) -> None:
        """Pass on the workers' progress without waiting; keep phase messages for later."""
        while True:
            try:
                msg = result_q.get_nowait()
            except queue.Empty:
                return
            self._handle(msg, progress)

    def _handle(self, msg: tuple[Any, ...], progress: Progress | None) -> None:
        if msg[0] == "progress":
            if progress:
                progress(msg[1], msg[2])
        elif msg[0] == "interrupted":
            raise KeyboardInterrupt
        elif msg[0] == "terminated":
            raise Terminated(msg[2])
        elif msg[0] == "error":
            raise RuntimeError(f"preprocess worker {msg[1]} failed:\n{msg[2]}")
        elif msg[0] == "oserror":
            code, strerror, _ = msg[2]
            raise scratch_error(OSError(code, strerror), self.job.tmp)
        elif msg[0] == "usererror":
            name, message, hint = msg[2]
            kind = getattr(errors, name, SentitopError)
            raise kind(message, hint=hint)
        else:
            self.early.append(msg)

    def _collect(
        self, result_q: Any, procs: list[Any], kind: str, progress: Progress | None
    ) -> list[tuple[int, Any]]:
        """One `kind` message from every worker process (progress passed on meanwhile); a
        worker that has exited without sending it — by a signal, an exit code, or even exit 0 —
        fails the job, once its last messages are read."""
        got = [(m[1], m[2]) for m in self.early if m[0] == kind]
        self.early = [m for m in self.early if m[0] != kind]
        while len(got) < len(procs):
            try:
                msg = result_q.get(timeout=0.5)
            except queue.Empty:
                sent = {wid for wid, _ in got}
                gone = [w for w, p in enumerate(procs, 1) if w not in sent and not p.is_alive()]
                if gone:
                    got += self._last_words(result_q, kind, progress)
                    sent = {wid for wid, _ in got}
                    if any(w not in sent for w in gone):
                        raise _died(procs, gone, sent) from None
                continue
            if msg[0] == kind:
                got.append((msg[1], msg[2]))
            else:
                self._handle(msg, progress)
        return got

    def _last_words(
        self, result_q: Any, kind: str, progress: Progress | None
    ) -> list[tuple[int, Any]]:
        """The messages still in the queue: `kind` ones returned, others handled (an error a
        worker sent before exiting is raised as such)."""
        got: list[tuple[int, Any]] = []
        while True:
            try:
                msg = result_q.get(timeout=EXIT_DRAIN_S)
            except queue.Empty:
                return got
            if msg[0] == kind:
                got.append((msg[1], msg[2]))
            else:
                self._handle(msg, progress)


def _died(procs: list[Any], gone: list[int], sent: set[int]) -> SentitopError:
    """The error (exit 1, no traceback) for workers that exited before sending their phase's
    message; SIGKILL is what the kernel's out-of-memory killer sends, so its hint says so."""
    names = [procs[w - 1].name for w in gone if w not in sent]
    codes = sorted({procs[w - 1].exitcode for w in gone if w not in sent}, key=str)
    how = ", ".join(f"signal {-c}" if c is not None and c < 0 else f"exit {c}" for c in codes)
    killed = -signal.SIGKILL in codes
    return SentitopError(
        f"preprocess worker(s) {', '.join(names)} died ({how}) before finishing its phase; "
        "nothing was written to the output",
        hint="SIGKILL is what the out-of-memory killer sends: give a lower --memory-budget "
        "(or fewer --workers) and run it again"
        if killed
        else "run it again; if it happens again, try --workers 1 to see the worker's own error",
    )


def _part_of(finished: Callable[[], dict[int, list[str]]], wid: int) -> Callable[[], str]:
    """Worker `wid`'s part file, waiting for the workers to finish when first asked."""
    return lambda: finished()[wid][0]

"""One worker of the local runner's pool: its phases (map, shuffle, reduce, encode) in the parent
or a forked child, the child's loop, and the map tasks every worker takes from."""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from engine.errors import SentitopError
from engine.fork_guard import ForkGuard
from engine.preprocess.buckets import encode_buckets, reduce_buckets
from engine.preprocess.handover import WorkerState, merge, received, send
from engine.preprocess.job import JobSettings
from engine.preprocess.mapper import CACHE_ENTRIES, Cache, MapStats, map_task
from engine.preprocess.readers import MapTask
from engine.preprocess.reduce import (
    ReduceCounts,
    ReducedPart,
    reduce_texts,
    token_dtype,
    word_index,
)
from engine.preprocess.spill import Spiller
from engine.preprocess.termination import Terminated
from engine.preprocess.worker_procs import die_with_parent
from engine.preprocess.writer import PartArrays, encode_arrays, encode_part

Progress = Callable[[int, int], None]
"""Called with (input bytes done since last call, lines read since last call)."""


class StageClock:
    """CPU seconds of this process per stage (time.process_time: all its threads)."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.last = time.process_time()

    def lap(self, stage: str) -> None:
        now = time.process_time()
        self.cpu[stage] = self.cpu.get(stage, 0.0) + now - self.last
        self.last = now


def spill_counts(job: JobSettings, spiller: Spiller | None) -> dict[str, int]:
    """The spill figures recorded in stats.json (runs and bytes of this process)."""
    return {
        "runs": len(spiller.runs) if spiller else 0,
        "bytes": spiller.bytes_written if spiller else 0,
        "buckets": job.spill.buckets if job.spill and spiller and spiller.runs else 0,
    }


class Worker:
    """One worker's part of the job, phase by phase (in a child process, or the parent as
    worker 0); every phase but the map starts when the parent says every worker finished the
    previous one."""

    def __init__(self, wid: int, workers: int, job: JobSettings) -> None:
        self.wid, self.workers, self.job = wid, workers, job
        self.clock = StageClock()
        self.state: WorkerState | None = WorkerState(wid, workers)
        self.parts: list[Any] = []
        """(counts, keys) of each reduce partition, between the shuffle and the reduce."""
        self.stats = MapStats()
        self.cache: Cache = {}
        self.part: ReducedPart | None = None
        self.spiller = Spiller(job.spill, job.tmp, wid) if job.spill else None
        self.spill_mode = False
        """True when any worker spilled: every worker then reduces buckets from the runs."""
        self.stashed: list[str] = []

    def map(self, tasks: Iterator[MapTask], report: Progress) -> None:
        """Map tasks until there are none left (spilling its state to a run whenever it passes
        the worker's budget), then hand other workers their raw texts."""
        state = self.state
        assert state is not None
        spiller = self.spiller
        entries = self.job.spill.cache_entries if self.job.spill else CACHE_ENTRIES

        def check(nbytes: int, lines: int) -> None:
            report(nbytes, lines)
            if spiller and spiller.over([state.agg, *state.pending]):
                spiller.spill([state.agg], state.pending)  # in place: the cache points at them

        for task in tasks:
            spec = self.job.specs[task.file_index]
            limit = self.job.max_line_bytes
            map_task(
                task, spec, limit, state.agg, self.stats, self.cache, check, state.defer, entries
            )
        self.clock.lap("map")
        send(state.pending, self.job.tmp, "raw", self.wid)
        self.clock.lap("shuffle")

    @property
    def spilled(self) -> bool:
        """True when this worker wrote a run during its map."""
        return bool(self.spiller and self.spiller.runs)

    def shuffle(self, spill_mode: bool) -> None:
        """Count the raw texts handed over, then hand other workers their partitions (or, in
        spill mode, write everything left as one more run)."""
        state = self.state
        assert state is not None
        for raw in received(self.job.tmp, "raw", self.workers, self.wid):
            state.resolve(raw, self.cache)
        self.cache.clear()
        self.state = None
        self.spill_mode = spill_mode
        if spill_mode:
            assert self.spiller is not None
            self.spiller.spill([state.agg])
        else:
            self.parts = state.partitions(self.job.test_fraction)
            send(self.parts, self.job.tmp, "map", self.wid)
        self.clock.lap("shuffle")

    def reduce(self) -> tuple[ReduceCounts, Counter[bytes]]:
        """Merge this worker's partition and reduce it: (counts, training word counts)."""
        if self.spill_mode:
            counts, words, self.stashed = reduce_buckets(self.job, self.wid)
            self.clock.lap("reduce")
            return counts, words
        own, self.parts = self.parts[self.wid], []
        items, keys = merge(own, received(self.job.tmp, "map", self.workers, self.wid))
        self.clock.lap("shuffle")
        job = self.job
        rule, stop, fraction, seq_len = job.rule, job.stop, job.test_fraction, job.seq_len
        part = reduce_texts(items.items(), rule, stop, fraction, seq_len, keys=keys)
        del items, keys
        words, part.train_words = part.train_words, Counter()
        self.part = part
        self.clock.lap("reduce")
        return part.counts, words

    def encode(self, vocab: list[str]) -> list[str]:
        """Encode and write this worker's HDF5 part(s); returns their paths in order."""
        if self.spill_mode:
            paths = encode_buckets(self.stashed, vocab, self.job, self.wid)
            self.clock.lap("encode")
            return paths
        assert self.part is not None
        path = encode_part(self.part, vocab, self.job, self.wid)
        self.part = None
        self.clock.lap("encode")
        return [path]

    def encode_arrays(self, vocab: list[str]) -> PartArrays:
        """This worker's part encoded in memory (not in spill mode)."""
        assert self.part is not None
        job = self.job
        index, dtype = word_index(vocab), token_dtype(len(vocab) + 2)
        arrays = encode_arrays(self.part, index, job.stop, job.seq_len, dtype)
        self.part = None
        self.clock.lap("encode")
        return arrays


def child_main(
    wid: int,
    workers: int,
    job: JobSettings,
    tasks: TaskList,
    commands: Any,
    results: Any,
    stopping: Any,
    guard: ForkGuard,
) -> None:
    """A worker process: each phase's result goes to the parent, which sends the next phase's
    input once every worker has sent its result (no barrier: a worker killed while holding a
    barrier's lock would hang the others and the parent's abort)."""
    try:
        parent = mp.parent_process()
        if parent is not None and parent.pid is not None:
            die_with_parent(parent.pid)  # not left waiting for a command if the parent is killed
        guard.release()  # the parent's handlers back; a signal that came mid-fork raised here
        worker = Worker(wid, workers, job)
        worker.clock.cpu["map"] = worker.clock.last  # the fork itself and the process start

        def report(nbytes: int, lines: int) -> None:
            results.put(("progress", nbytes, lines))

        worker.map(iter(tasks.take, None), report)
        results.put(("mapped", wid, (worker.stats, worker.spilled)))
        worker.shuffle(commands.get())  # every worker has written its raw texts; spill mode
        results.put(("shuffled", wid, None))
        commands.get()  # every worker has written its partitions
        results.put(("reduced", wid, worker.reduce()))
        paths = worker.encode(commands.get())
        spilled = spill_counts(job, worker.spiller)
        results.put(("encoded", wid, (paths, worker.clock.cpu, spilled)))
    except KeyboardInterrupt:  # a terminal's Ctrl-C reaches the whole group: the parent says
        results.put(("interrupted", wid, None))  # it once (a SIGINT to this worker alone
        return  # stops the run the same way) — no traceback per worker
    except Terminated as exc:  # SIGTERM/SIGHUP to the group or this worker alone, as Ctrl-C
        if stopping.value:  # the parent is stopping the job (and the workers): it reads no more
            results.cancel_join_thread()  # so leave without waiting for the pipe to take it
        else:
            results.put(("terminated", wid, exc.signum))
        raise  # exit 128 + signal, no traceback (a SystemExit)
    except OSError as exc:  # a full disk, reported as such by the parent
        results.put(("oserror", wid, (exc.errno, exc.strerror, traceback.format_exc())))
        raise SystemExit(1) from None  # the parent says it once: no traceback per worker
    except SentitopError as exc:  # e.g. StorageError from a spill: raised again by the parent
        results.put(("usererror", wid, (type(exc).__name__, exc.message, exc.hint)))
        raise SystemExit(1) from None
    except BaseException:  # reported to the parent, which raises it
        results.put(("error", wid, traceback.format_exc()))
        raise


LOCK_TIMEOUT_S = 60.0
"""The task counter's lock is held for a few instructions, so a wait this long means a worker
died while holding it."""


class TaskList:
    """The map tasks, largest first, each taken by whichever worker asks next: a counter in
    shared memory (the list itself reaches the forked workers with no pickling and no queue)."""

    def __init__(self, tasks: list[MapTask], ctx: Any) -> None:
        self.tasks = sorted(tasks, key=lambda t: -t.nbytes)
        self.taken = ctx.Value("q", 0)

    def take(self) -> MapTask | None:
        """The next task, or None when all are taken."""
        lock = self.taken.get_lock()
        if not lock.acquire(timeout=LOCK_TIMEOUT_S):  # its holder died while holding it
            raise SentitopError("a preprocess worker stopped while taking a map task")
        try:
            index = self.taken.value
            self.taken.value = index + 1
        finally:
            lock.release()
        return self.tasks[index] if index < len(self.tasks) else None

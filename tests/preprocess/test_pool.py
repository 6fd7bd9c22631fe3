"""The local runner's pool (the parent is worker 0): a worker that fails or dies in any phase
ends the job with an error naming it — no hang, no dataset, no process left behind."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from engine.config import PreprocessConfig
from engine.errors import SentitopError
from engine.preprocess import pool_worker, readers, writer
from engine.preprocess.handover import WorkerState
from engine.preprocess.pipeline import run_preprocess
from tests.preprocess.conftest import assert_same_dataset, load_dataset, review, write_lines

PHASES = ("map", "shuffle", "reduce", "encode")


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(readers, "MIN_SPLIT_BYTES", 20_000)  # several ranges per worker
    lines = [review(f"review {i % 700} was good and fine", 1 + i % 5) for i in range(3000)]
    return write_lines(tmp_path / "in.jsonl", lines)


def break_phase(monkeypatch: pytest.MonkeyPatch, phase: str, how: str) -> None:
    """Make `phase` of the forked worker (not the parent, worker 0) raise or exit."""
    original = getattr(pool_worker.Worker, phase)

    def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        if mp.parent_process() is not None:  # a forked worker
            if how == "raise":
                raise ValueError(f"broken {phase}")
            os._exit(0 if how == "exit0" else 3)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pool_worker.Worker, phase, broken)


def run_two_workers(corpus: Path, out: Path) -> None:
    run_preprocess(PreprocessConfig(inputs=[str(corpus)], output=str(out), workers=2))


def assert_clean(out: Path) -> None:
    deadline = time.monotonic() + 10
    while mp.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not mp.active_children()
    assert not (out / "dataset.h5").exists()


def _take_all(tasks: Any, out: Any) -> None:
    for task in iter(tasks.take, None):
        out.put(task.start)
        time.sleep(0.001)  # let the other process take some too
    out.put(None)


def test_each_map_task_is_taken_once_largest_first() -> None:
    from engine.preprocess.readers import MapTask

    ctx = mp.get_context("fork")
    tasks = pool_worker.TaskList(
        [MapTask(0, "f", i * 10, i * 10 + 1 + i % 7, False, i) for i in range(60)], ctx
    )
    assert [t.nbytes for t in tasks.tasks] == sorted((t.nbytes for t in tasks.tasks), reverse=True)
    out = ctx.Queue()
    other = ctx.Process(target=_take_all, args=(tasks, out))
    other.start()
    theirs = [out.get()]  # the other process has taken its first task
    mine = [task.start for task in iter(tasks.take, None)]
    theirs += list(iter(out.get, None))
    other.join()
    assert sorted(mine + theirs) == [i * 10 for i in range(60)]


def test_a_deferred_raw_text_never_cleans_to_nothing() -> None:
    """Only texts that keep a word are handed to another worker: a skip must be counted where
    its line number is known. Random texts of entity pieces, letters and other characters."""
    import random

    from engine.preprocess.text import clean_text

    pieces = ["&", "#", ";", "a", "A", "1", "x", " ", "é", "amp", "quot", "#65", "#x41", "\n", "<"]
    pieces += ["'", "\u2019", "!", "ß", "\uff21"]
    rng = random.Random(5)
    state, handed = WorkerState(1, 2), 0
    for _ in range(50_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 7)))
        if state.defer(text) is not None:
            handed += 1
            assert clean_text(text), text
    assert handed > 10_000
    # texts with "&" are handed over too when a word lies outside every character reference
    for text, handed_over in (("ok &amp; fine", True), ("&amp;&#65;", False), ("&quot;", False)):
        other = WorkerState(1 - hash(text) % 2, 2)  # a worker that does not own it
        assert (other.defer(text) is not None) is handed_over, text


def test_two_workers_match_one(corpus: Path, tmp_path: Path) -> None:
    run_preprocess(PreprocessConfig(inputs=[str(corpus)], output=str(tmp_path / "a"), workers=1))
    run_two_workers(corpus, tmp_path / "b")
    one, two = load_dataset(tmp_path / "a"), load_dataset(tmp_path / "b")
    assert_same_dataset(one, two)
    for key in ("read", "kept", "duplicates", "train", "test", "skipped"):
        assert one["stats"][key] == two["stats"][key], key
    assert set(two["stats"]["cpu_seconds"]) >= {"map", "shuffle", "reduce", "encode", "parent"}
    # worker 0 wrote dataset.h5 itself (its rows from memory, worker 1's from its part file,
    # asked for when due): the very bytes of the pipeline's combine of one worker's part
    assert (tmp_path / "a" / "dataset.h5").read_bytes() == (
        tmp_path / "b" / "dataset.h5"
    ).read_bytes()


def test_combining_files_arrays_or_late_parts_writes_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """combine_parts takes HDF5 part files, arrays, or a callable asked for a part once its
    rows are due (with the totals known up front): the file's bytes do not depend on which."""
    rng = np.random.default_rng(3)
    parts: list[dict[str, dict[str, np.ndarray]]] = []
    for rows in ((3000, 400), (2500, 0), (1700, 300)):
        parts.append(
            {
                split: {
                    "tokens": rng.integers(0, 900, (n, 64), dtype=np.uint16),
                    "labels": rng.integers(0, 2, n, dtype=np.uint8),
                    "lengths": rng.integers(1, 64, n, dtype=np.int32),
                }
                for split, n in zip(("train", "test"), rows, strict=True)
            }
        )
    files = []
    for i, arrays in enumerate(parts):
        files.append(tmp_path / f"part-{i}.h5")
        with h5py.File(files[-1], "w") as h5:
            for split, named in arrays.items():
                for name, values in named.items():
                    h5[f"{split}/{name}"] = values
    asked: list[int] = []

    def late(i: int) -> Callable[[], Path]:
        def get() -> Path:
            asked.append(i)
            return files[i]

        return get

    totals = {"train": 7200, "test": 700}
    attrs = {"seq_len": 64}
    monkeypatch.setattr(writer, "COPY_BYTES", 64 << 10)  # several blocks per part
    writer.combine_parts(files, tmp_path / "a.h5", 64, np.uint16, attrs)
    writer.combine_parts(parts, tmp_path / "b.h5", 64, np.uint16, attrs, totals)
    late_parts = [parts[0], late(1), late(2)]
    writer.combine_parts(late_parts, tmp_path / "c.h5", 64, np.uint16, attrs, totals)
    assert asked == [1, 2]  # each asked for once, in order
    a = (tmp_path / "a.h5").read_bytes()
    assert a == (tmp_path / "b.h5").read_bytes() == (tmp_path / "c.h5").read_bytes()


@pytest.mark.parametrize("phase", PHASES)
def test_a_worker_that_raises_fails_the_job(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    break_phase(monkeypatch, phase, "raise")
    with pytest.raises(RuntimeError, match=rf"(?s)preprocess worker 1 failed:.*broken {phase}"):
        run_two_workers(corpus, tmp_path / "o")
    assert_clean(tmp_path / "o")


@pytest.mark.parametrize("phase", PHASES)
def test_a_worker_that_dies_fails_the_job(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    break_phase(monkeypatch, phase, "exit")
    start = time.monotonic()
    with pytest.raises(SentitopError, match=r"preprocess worker\(s\) preprocess-1 died"):
        run_two_workers(corpus, tmp_path / "o")
    assert time.monotonic() - start < 30
    assert_clean(tmp_path / "o")


@pytest.mark.parametrize("phase", PHASES)
def test_a_worker_that_exits_0_mid_job_fails_the_job(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    """A worker gone with exit status 0 but no result (a library calling exit, a stray
    os._exit) is a failure too: the parent used to wait for its message for ever."""
    break_phase(monkeypatch, phase, "exit0")
    start = time.monotonic()
    with pytest.raises(SentitopError, match=r"preprocess-1 died \(exit 0\) before finishing"):
        run_two_workers(corpus, tmp_path / "o")
    assert time.monotonic() - start < 30
    assert_clean(tmp_path / "o")


def test_a_worker_killed_while_waiting_for_the_next_phase_fails_the_job(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL (the OOM killer) to worker 1 while it waits for the parent between the shuffle
    and the reduce: the parent, still shuffling, notices once it looks, names the signal and
    stops; nothing waits at a barrier the dead worker can no longer reach."""
    original = pool_worker.Worker.shuffle

    def shuffle_then_kill(self: Any, spill_mode: bool) -> None:
        original(self, spill_mode)
        if mp.parent_process() is None:  # the parent: worker 1 is waiting (or about to)
            for child in mp.active_children():
                os.kill(child.pid, signal.SIGKILL)
                child.join(10)

    monkeypatch.setattr(pool_worker.Worker, "shuffle", shuffle_then_kill)
    start = time.monotonic()
    with pytest.raises(SentitopError, match=r"preprocess-1 died \(signal 9\)") as caught:
        run_two_workers(corpus, tmp_path / "o")  # a one-line error, no traceback (exit 1)
    assert caught.value.hint is not None and "out-of-memory killer" in caught.value.hint
    assert time.monotonic() - start < 30
    assert_clean(tmp_path / "o")

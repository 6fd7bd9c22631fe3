"""Streaming data: the order's windows, the node's memory-mapped copy, and the same batches."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from engine.errors import DatasetError
from engine.sentiment.data import (
    EpochPlan,
    PlanSampler,
    eval_batches,
    eval_size,
    even_plan,
    load_split,
    train_loader,
)
from engine.sentiment.order import EpochOrder
from engine.sentiment.store import cache_root, ensure_copy, open_split

from .conftest import write_dataset


@pytest.mark.parametrize("n", [1, 4095, 4096, 10_000, 70_001])
def test_order_visits_every_sample_once_and_depends_on_seed_and_epoch(n: int) -> None:
    order = EpochOrder(n, seed=1, epoch=2, block=64, window_blocks=8)
    ids = order.full()
    assert np.array_equal(np.sort(ids), np.arange(n))
    again = EpochOrder(n, seed=1, epoch=2, block=64, window_blocks=8)
    pieces = [again.take(lo, min(n, lo + 97)) for lo in range(0, n, 97)]  # straddles windows
    assert np.array_equal(np.concatenate(pieces), ids)
    if n > 100:
        assert not np.array_equal(EpochOrder(n, 1, 3, block=64, window_blocks=8).full(), ids)
        assert not np.array_equal(EpochOrder(n, 2, 2, block=64, window_blocks=8).full(), ids)


def test_order_holds_two_windows_and_announces_the_next() -> None:
    seen: list[list[tuple[int, int]]] = []
    order = EpochOrder(10_000, seed=0, epoch=0, block=100, window_blocks=10, on_window=seen.append)
    first = order.take(0, 10)
    assert len(seen) == 2  # the first window itself, then the next one ahead
    assert all(hi - lo == 100 for lo, hi in seen[0]) and len(seen[0]) == 10
    assert set(first.tolist()) <= {i for lo, hi in seen[0] for i in range(lo, hi)}
    order.take(0, order.n)
    assert len(order._cache) <= 2  # memory does not grow with the split
    assert len(seen) == order.windows  # each announced once (the first with itself)


def test_a_window_draws_from_blocks_spread_over_the_split() -> None:
    order = EpochOrder(1_000_000, seed=0, epoch=0)
    batch = order.take(0, 256)
    blocks = set((batch // order.block).tolist())
    assert len(blocks) > 40  # one batch mixes rows of many places of the file


def test_memory_mapped_copy_gives_the_in_memory_loaders_batches(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data", n_train=3000, n_test=100, chunk_rows=128)
    h5 = data / "dataset.h5"
    store, info = open_split(h5, "train", cache=tmp_path / "cache")
    memory = load_split(data, "train")
    assert info.written_s > 0 and store.nbytes == (3000 * 12 * 2 + 3000 + 3000 * 4)
    for rank, shares in [(0, (1500, 1500)), (1, (2100, 900))]:  # even and balancer shares
        sampler = PlanSampler(3000, seed=4, rank=rank)
        sampler.set_epoch(1)
        sampler.add_plan(even_plan(3000, 2, 64) if rank == 0 else _unequal(shares))
        mapped = list(train_loader(store, sampler, 0, sampler.steps))
        held = list(train_loader(memory, sampler, 0, sampler.steps))
        for a, b in zip(mapped, held, strict=True):
            assert torch.equal(a.tokens, b.tokens) and torch.equal(a.lengths, b.lengths)
            assert torch.equal(a.labels, b.labels) and a.labels.dtype == torch.float32
    again, info2 = open_split(h5, "train", cache=tmp_path / "cache")
    assert info2.written_s == 0.0 and info2.folder == info.folder  # written once per node
    assert not isinstance(again.tokens, np.memmap) and again.tokens.base is not None


def _unequal(counts: tuple[int, int]) -> EpochPlan:
    return EpochPlan(counts, (counts[0] // 30 + 1, counts[1] // 30 + 1))


def _copy_in_child(h5: str, cache: str, out: str) -> None:
    info = ensure_copy(Path(h5), "train", cache)
    Path(out).write_text(f"{info.written_s}")


def test_ranks_of_a_node_write_one_copy_and_share_it(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data", n_train=20_000, n_test=10)
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(
            target=_copy_in_child,
            args=(str(data / "dataset.h5"), str(tmp_path / "c"), str(tmp_path / f"r{i}")),
        )
        for i in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    written = [float((tmp_path / f"r{i}").read_text()) for i in range(3)]
    assert sum(w > 0 for w in written) == 1  # one writer, the others waited and mapped it
    entries = [p for p in (tmp_path / "c").iterdir()]
    assert len(entries) == 1
    assert sorted(p.name.split(".")[1] for p in entries[0].glob("*.npy")) == [
        "labels",
        "lengths",
        "tokens",
    ]
    assert not list(entries[0].glob(".*.tmp"))


def test_a_changed_dataset_replaces_its_copy_and_a_deleted_one_is_collected(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    a = write_dataset(tmp_path / "a", n_train=300, seed=1)
    b = write_dataset(tmp_path / "b", n_train=300, seed=2)
    first = ensure_copy(a / "dataset.h5", "train", cache)
    ensure_copy(b / "dataset.h5", "train", cache)
    write_dataset(tmp_path / "a", n_train=400, seed=3)  # preprocessed again: new size/mtime
    os.utime(a / "dataset.h5", ns=(1, 1))
    store, _ = open_split(a / "dataset.h5", "train", cache=cache)
    assert len(store) == 400 and len(list(first.folder.glob("train-*.npy"))) == 3
    for path in (b / "dataset.h5", b / "vocab.json"):
        path.unlink()
    elsewhere = cache / "0123456789abcdef"  # another host's copy, on a shared cache folder
    elsewhere.mkdir()
    (elsewhere / "source.json").write_text('{"dataset": "/gone/dataset.h5", "host": "other"}')
    ensure_copy(a / "dataset.h5", "train", cache)
    assert sorted(p.name for p in cache.iterdir()) == sorted([first.folder.name, elsewhere.name])


def test_a_full_cache_disk_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    data = write_dataset(tmp_path / "data", n_train=300)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage._replace(free=1000))
    with pytest.raises(DatasetError, match="GB free"):
        ensure_copy(data / "dataset.h5", "train", tmp_path / "cache")
    assert not list((tmp_path / "cache").rglob("*.npy"))


@pytest.mark.parametrize("row", [5, 700])  # in the first block of the copy, and in a later one
def test_a_token_id_past_the_vocabulary_is_named_with_its_row(
    tmp_path: Path, row: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It failed a rank's embedding lookup with an IndexError traceback once its batch came,
    which on a large split can be hours into an epoch."""
    import h5py

    from engine.sentiment import store

    monkeypatch.setattr(store, "_BLOCK_BYTES", 64 * 12 * 2)  # blocks of 64 rows

    data = write_dataset(tmp_path / "data", n_train=1024, vocab_size=50)
    with h5py.File(data / "dataset.h5", "a") as fh:
        fh["train/tokens"][row, 1] = 60_000
    with pytest.raises(DatasetError, match=f"/train/tokens row {row:,} holds token id 60,000, "
                       r"but its vocabulary has 52 ids \(0..51\)"):  # fmt: skip
        ensure_copy(data / "dataset.h5", "train", tmp_path / "cache")
    left = [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert not [n for n in left if n.endswith(".npy") or n.endswith(".tmp")]
    ensure_copy(data / "dataset.h5", "test", tmp_path / "cache")  # the sound split copies


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTITOP_CACHE_DIR", "/x/y")
    assert cache_root() == Path("/x/y/streams") and cache_root("/z") == Path("/z")
    monkeypatch.delenv("SENTITOP_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/c")
    assert cache_root() == Path("/c/sentitop/streams")


def test_evaluation_reads_the_whole_split_or_a_fixed_spread_sample(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data", n_train=100, n_test=1000)
    store, _ = open_split(data / "dataset.h5", "test", cache=tmp_path / "c")
    assert eval_size(1000, 100_000, None) == 1000  # small test split: all of it
    assert eval_size(1000, 1000, None) == 300  # 0.3 x the training samples
    assert eval_size(1000, 10, 50) == 50
    full = list(eval_batches(store, 1000, 0, 1000, 128))
    assert sum(len(b.labels) for b in full) == 1000
    sample = [b for r in range(2) for b in eval_batches(store, 300, *_shard(300, r), 64)]
    labels = torch.cat([b.labels for b in sample]).numpy()
    rows = np.arange(300) * 1000 // 300  # evenly spread, the same rows on any world size
    assert np.array_equal(labels, store.labels[rows].astype(np.float32))


def _shard(n: int, rank: int) -> tuple[int, int]:
    from engine.sentiment.data import shard_bounds

    return shard_bounds(n, rank, 2)


def test_loader_workers_gather_from_the_mapped_copy(tmp_path: Path) -> None:
    import pickle

    data = write_dataset(tmp_path / "data", n_train=700)
    store, _ = open_split(data / "dataset.h5", "train", cache=tmp_path / "c")
    assert len(pickle.dumps(store)) < 1000  # a worker reopens the files, never gets the rows
    sampler = PlanSampler(700, seed=0, rank=0, on_window=store.prefetch)
    sampler.set_epoch(0)
    sampler.add_plan(even_plan(700, 1, 64))
    inline = list(train_loader(store, sampler, 2, sampler.steps))
    workers = list(train_loader(store, sampler, 2, sampler.steps, workers=1))
    assert len(inline) == len(workers) == sampler.steps - 2
    for a, b in zip(inline, workers, strict=True):
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.labels, b.labels)


def test_training_events_report_the_data_and_memory(tiny_data: Path, tmp_path: Path) -> None:
    from engine.config import ModelConfig, TrainConfig
    from engine.events import Emitter
    from engine.sentiment.trainer import DistEnv, Trainer

    events: list[dict[str, object]] = []

    class Sink:
        def write(self, event: dict[str, object]) -> None:
            events.append(dict(event))

        def close(self) -> None:
            """Nothing to release."""

    cfg = TrainConfig(
        data_dir=str(tiny_data), run_dir=str(tmp_path / "run"), epochs=1, batch_size=64,
        log_every=2, checkpoint_every_min=0, events_file=False, eval_max_samples=100,
        model=ModelConfig(preset="default"), data_cache=str(tmp_path / "node-cache"),
    )  # fmt: skip
    summary = Trainer(cfg, emitter=Emitter(Sink()), env=DistEnv()).fit()
    start = next(e for e in events if e["type"] == "train_start")
    assert start["n_eval"] == 100 and summary["n_test"] == 100  # a fixed sample of the 128
    assert str(start["data_cache"]).startswith(str(tmp_path / "node-cache"))
    assert start["data_bytes"] == 512 * (12 * 2 + 1 + 4) + 128 * (12 * 2 + 1 + 4)
    steps = [e for e in events if e["type"] == "step"]
    assert steps and all(e["read_mb_s"] > 0 for e in steps)  # type: ignore[operator]
    rss = steps[-1]["rss_mb"]
    assert isinstance(rss, list) and len(rss) == 1 and rss[0] > 50  # torch alone holds more
    phase = next(e for e in events if e["type"] == "phase")
    assert phase["rss_mb"] is not None and phase["disk_mb"] is not None

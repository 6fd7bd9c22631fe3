"""Loader throughput: the streaming loader (node copy, memory-mapped) cold and warm vs in memory.

Writes a synthetic dataset.h5 in the preprocessing layout (≈ 1 MiB token chunks), then
measures in one run, with one thread (sequences per wall second, and per CPU second of the
process: the per-core figure on a shared machine, where wall time includes waiting for a core):

* copy: sequences/s of making the node's uncompressed copy (``store.ensure_copy``);
* cold: one epoch of ``PlanSampler`` + ``gather_batch`` (batch 256) from the memory-mapped
  copy after evicting it from the page cache (``posix_fadvise(DONTNEED)``; the storage bytes
  read, from /proc/self/io, show that the epoch really read the disk);
* warm: the same epoch again, the copy now in the page cache;
* memory: the same epoch from ``load_split`` (the split held in RAM: the old design and the
  reference the streaming loader is tested against);
* old: per-sample HDF5 reads, one row per chunk, shuffled (the design before issue 3).

Rounds of cold, warm and memory alternate (``--repeat``); medians are printed, and the best
wall rates (the closest to what the code does with a core to itself on a shared machine).

    nice -n 10 .venv/bin/python benchmarks/bench_loader.py [--rows 2000000] [--seq-len 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import torch

from engine.procstats import storage_read_bytes
from engine.sentiment.data import PlanSampler, Rows, even_plan, gather_batch, load_split
from engine.sentiment.store import ensure_copy, open_split

_BLOCK = 1 << 18


def write_dataset(folder: Path, rows: int, seq_len: int, test_rows: int | None = None) -> Path:
    """A random dataset.h5 in the preprocessing layout, written in blocks (bounded memory)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    chunk = max(1, (1 << 20) // (seq_len * 2))
    with h5py.File(folder / "dataset.h5", "w") as fh:
        for split, n in (("train", rows), ("test", rows if test_rows is None else test_rows)):
            g = fh.create_group(split)
            tokens = g.create_dataset(
                "tokens",
                shape=(n, seq_len),
                dtype=np.uint16,
                chunks=(max(1, min(chunk, n)), seq_len),
            )
            vec = max(1, min(n, 1 << 16))
            labels = g.create_dataset("labels", shape=(n,), dtype=np.uint8, chunks=(vec,))
            lengths = g.create_dataset("lengths", shape=(n,), dtype=np.int32, chunks=(vec,))
            for lo in range(0, n, _BLOCK):
                k = min(_BLOCK, n - lo)
                length = rng.integers(1, seq_len + 1, size=k).astype(np.int32)
                block = rng.integers(2, 10_002, size=(k, seq_len), dtype=np.uint16)
                block[np.arange(seq_len)[None, :] >= length[:, None]] = 0
                tokens[lo : lo + k] = block
                labels[lo : lo + k] = (rng.random(k) < 0.8).astype(np.uint8)
                lengths[lo : lo + k] = length
        fh.attrs.update(vocab_size=10_000, seq_len=seq_len, pad_id=0, unk_id=1, format_version=1)
    itos = ["<pad>", "<unk>", *(f"w{i}" for i in range(10_000))]  # as many ids as encoded
    (folder / "vocab.json").write_text(json.dumps({"itos": itos, "settings": {}}))
    return folder


def epoch_rate(rows: Rows, n: int, batch: int) -> tuple[float, float]:
    """Sequences per wall second and per CPU second (this process: user + system, so page
    faults count) of one epoch of this rank's batches (sampler + gather), world of one."""
    sampler = PlanSampler(n, seed=0, rank=0, on_window=getattr(rows, "prefetch", None))
    start, cpu = time.perf_counter(), time.process_time()
    sampler.set_epoch(0)
    sampler.add_plan(even_plan(n, 1, batch))
    for step in range(sampler.steps):
        gather_batch(rows, sampler.indices(step))
    return n / (time.perf_counter() - start), n / (time.process_time() - cpu)


def per_sample_reads(folder: Path, rows: int, seq_len: int, samples: int) -> float:
    """Samples/s of the design before issue 3: one HDF5 read per sample, one row per chunk."""
    rng = np.random.default_rng(1)
    with h5py.File(folder / "old.h5", "w") as fh:
        fh.create_dataset(
            "tokens",
            data=rng.integers(0, 10_000, (rows, seq_len), dtype=np.uint16),
            chunks=(1, seq_len),
        )
        fh.create_dataset("labels", data=np.zeros(rows, np.uint8), chunks=(1,))
    with h5py.File(folder / "old.h5", "r") as fh:
        tokens, labels = fh["tokens"], fh["labels"]
        order = rng.permutation(rows)[:samples]
        start = time.perf_counter()
        for i in order:
            _ = tokens[i], labels[i]
        return samples / (time.perf_counter() - start)


def mb(a: int | None, b: int | None) -> float | None:
    """MB between two byte counters (None when /proc/self/io is unavailable)."""
    return None if a is None or b is None else round((b - a) / 1e6, 1)


def _median(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """Median wall and CPU rates of repeated runs."""
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--seq-len", type=int, default=100)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--old-samples", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3, help="cold/warm/memory rounds")
    parser.add_argument("--dir", help="scratch folder (default: a temporary one)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = write_dataset(Path(tmp) / "data", args.rows, args.seq_len, test_rows=1000)
        h5, cache = folder / "dataset.h5", Path(tmp) / "cache"
        t0 = time.perf_counter()
        copy = ensure_copy(h5, "train", cache)
        copy_s = time.perf_counter() - t0
        memory_rows = load_split(folder, "train")
        colds, warms, memories, cold_mb, warm_mb = [], [], [], [], []
        for _ in range(args.repeat):  # alternate, so the machine's load hits every kind alike
            store, _ = open_split(h5, "train", cache=cache)
            store.evict()  # nothing has touched the mapping yet: every page goes
            disk0 = storage_read_bytes()
            colds.append(epoch_rate(store, args.rows, args.batch))
            disk1 = storage_read_bytes()
            warms.append(epoch_rate(store, args.rows, args.batch))
            disk2 = storage_read_bytes()
            cold_mb.append(mb(disk0, disk1))
            warm_mb.append(mb(disk1, disk2))
            store.close()
            del store
            memories.append(epoch_rate(memory_rows, args.rows, args.batch))
        del memory_rows
        old = per_sample_reads(Path(tmp), 200_000, args.seq_len, args.old_samples)
    cold, warm, memory = _median(colds), _median(warms), _median(memories)

    result = {
        "rows": args.rows,
        "seq_len": args.seq_len,
        "batch": args.batch,
        "copy_bytes": copy.nbytes,
        "copy_seq_per_s": round(args.rows / copy_s),
        "repeat": args.repeat,
        "cold_seq_per_s": round(cold[0]),
        "cold_best_seq_per_s": round(max(c[0] for c in colds)),
        "cold_seq_per_cpu_s": round(cold[1]),
        "cold_storage_read_mb": cold_mb,
        "warm_seq_per_s": round(warm[0]),
        "warm_seq_per_cpu_s": round(warm[1]),
        "warm_best_seq_per_s": round(max(w[0] for w in warms)),
        "warm_storage_read_mb": warm_mb,
        "memory_seq_per_s": round(memory[0]),
        "memory_seq_per_cpu_s": round(memory[1]),
        "memory_best_seq_per_s": round(max(m[0] for m in memories)),
        "ratio_warm_vs_memory": round(warm[0] / memory[0], 3),
        "ratio_cold_vs_memory": round(cold[0] / memory[0], 3),
        "old_per_sample_reads_per_s": round(old),
        "ratio_warm_vs_old": round(warm[0] / old, 1),
        "ratio_cold_vs_old": round(cold[0] / old, 1),
        "load_avg_1m": os.getloadavg()[0],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

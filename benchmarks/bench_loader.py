"""Loader throughput: chunk-aligned block reads + in-memory batches vs per-sample HDF5 reads.

Writes one synthetic split twice — in the preprocessing layout (row blocks of ~1 MiB chunks)
and in the old design's layout (one row per chunk, read one sample at a time in shuffled
order) — then measures, in one run, with one thread:

* old: samples/s of per-sample reads (shuffled order, from the page cache);
* load: sequences/s of ``engine.sentiment.data.load_split`` (the chunk-aligned block reads);
* batches: sequences/s of one epoch of ``PlanSampler`` + ``gather_batch`` from memory;
* end to end: load + one epoch of batches.

    .venv/bin/python benchmarks/bench_loader.py [--rows 200000] [--seq-len 100]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import torch

from engine.sentiment.data import PlanSampler, even_plan, gather_batch, load_split


def write_layouts(folder: Path, rows: int, seq_len: int) -> None:
    """dataset.h5 (block chunks) and old.h5 (one row per chunk) holding the same rows."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, seq_len + 1, size=rows).astype(np.int32)
    tokens = rng.integers(2, 10_002, size=(rows, seq_len), dtype=np.uint16)
    tokens[np.arange(seq_len)[None, :] >= lengths[:, None]] = 0
    labels = (rng.random(rows) < 0.8).astype(np.uint8)
    chunk = max(1, (1 << 20) // (seq_len * 2))
    with h5py.File(folder / "dataset.h5", "w") as fh:
        for split in ("train", "test"):
            g = fh.create_group(split)
            g.create_dataset("tokens", data=tokens, chunks=(min(chunk, rows), seq_len))
            g.create_dataset("labels", data=labels, chunks=(min(rows, 1 << 16),))
            g.create_dataset("lengths", data=lengths, chunks=(min(rows, 1 << 16),))
        fh.attrs.update(vocab_size=10_000, seq_len=seq_len, pad_id=0, unk_id=1, format_version=1)
    with h5py.File(folder / "old.h5", "w") as fh:
        fh.create_dataset("tokens", data=tokens, chunks=(1, seq_len))
        fh.create_dataset("labels", data=labels, chunks=(1,))


def per_sample_reads(path: Path, samples: int) -> float:
    """Samples/s of the old design: one HDF5 read per sample, shuffled order."""
    with h5py.File(path, "r") as fh:
        tokens, labels = fh["tokens"], fh["labels"]
        order = np.random.default_rng(1).permutation(tokens.shape[0])[:samples]
        start = time.perf_counter()
        for i in order:
            _ = tokens[i], labels[i]
        return samples / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--seq-len", type=int, default=100)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--old-samples", type=int, default=5_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_layouts(folder, args.rows, args.seq_len)
        per_sample_reads(folder / "old.h5", 200)  # warm the page cache
        load_split(folder, "train")
        old = per_sample_reads(folder / "old.h5", args.old_samples)
        t0 = time.perf_counter()
        arrays = load_split(folder, "train")
        load_s = time.perf_counter() - t0
        sampler = PlanSampler(args.rows, seed=0, rank=0)
        sampler.set_epoch(0)
        sampler.add_plan(even_plan(args.rows, 1, args.batch))
        t0 = time.perf_counter()
        for step in range(sampler.steps):
            gather_batch(arrays, sampler.indices(step))
        batch_s = time.perf_counter() - t0
    result = {
        "rows": args.rows,
        "seq_len": args.seq_len,
        "batch": args.batch,
        "old_per_sample_reads_per_s": round(old),
        "block_load_seq_per_s": round(args.rows / load_s),
        "batches_seq_per_s": round(args.rows / batch_s),
        "end_to_end_seq_per_s": round(args.rows / (load_s + batch_s)),
        "ratio_end_to_end_vs_old": round(args.rows / (load_s + batch_s) / old, 1),
        "load_avg_1m": os.getloadavg()[0],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""What a rank trains and evaluates on: the node's memory-mapped copy of each split.

Ranks never load a split whole (see :mod:`engine.sentiment.store` for the design): batches
are gathered from the mapping as the loader needs them, and evaluation reads the whole test
split or a fixed evenly spread sample of it (``train.eval_max_samples``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.config import TrainConfig
from engine.sentiment.data import (
    Batch,
    PlanSampler,
    eval_batches,
    eval_size,
    read_info,
    shard_bounds,
    train_loader,
)
from engine.sentiment.splits import check_rows, check_splits
from engine.sentiment.store import CopyInfo, SplitStore, open_split


@dataclass(slots=True)
class TrainData:
    """Both splits of a run's dataset as seen by one rank."""

    train: SplitStore
    test: SplitStore
    copy: CopyInfo
    """The training split's copy on this node (where, how big, seconds to write it)."""
    eval_count: int
    """Test samples each evaluation scores (all ranks together)."""
    vocab_size: int
    """Embedding rows the dataset needs."""

    @classmethod
    def open(cls, cfg: TrainConfig) -> TrainData:
        """Map the splits of ``cfg.data_dir`` (copying them into the node's cache first)."""
        info = read_info(cfg.data_dir)
        train, copy = open_split(
            info.path, "train", limit=cfg.max_train_samples, cache=cfg.data_cache
        )
        test, _ = open_split(info.path, "test", cache=cfg.data_cache)
        for split, rows in (("train", train), ("test", test)):
            check_rows(info.path, split, rows.labels, rows.lengths, info.seq_len)
        check_splits(info.path, train.labels, test.labels)  # empty or one class: exit 2
        count = eval_size(len(test), len(train), cfg.eval_max_samples)
        return cls(train, test, copy, count, info.vocab_size)

    @property
    def n_train(self) -> int:
        """Training samples per epoch."""
        return len(self.train)

    @property
    def sample_bytes(self) -> int:
        """Bytes a training sample occupies (its token row, label and length)."""
        return self.train.row_bytes + self.train.labels.itemsize + self.train.lengths.itemsize

    def positives(self) -> int:
        """Positive training labels (one pass over the mapped labels)."""
        return int(np.count_nonzero(self.train.labels))

    def positive_rate(self) -> float | None:
        """Share of positive training labels (the prior the model's P(positive) is calibrated
        to, with pos_weight; `sentitop eval --adapt-prior` reads it from summary.json)."""
        return self.positives() / self.n_train if self.n_train else None

    def balancing_weight(self) -> float | None:
        """negatives / positives of the training labels (pos_weight auto; None with one class)."""
        positives = self.positives()
        negatives = self.n_train - positives
        return negatives / positives if positives and negatives else None

    def batches(
        self,
        sampler: PlanSampler,
        first: int,
        stop: int,
        *,
        workers: int = 0,
        pin_memory: bool = False,
    ) -> Iterator[tuple[Batch, float]]:
        """This rank's batches for steps [first, stop) with the seconds spent waiting for each."""
        loader = train_loader(
            self.train, sampler, first, stop, workers=workers, pin_memory=pin_memory
        )
        it = iter(loader)
        for _ in range(first, stop):
            t0 = time.perf_counter()
            batch = next(it)
            yield batch, time.perf_counter() - t0

    def eval_batches(self, rank: int, world: int, batch_size: int) -> Iterator[Batch]:
        """This rank's shard of the evaluated test samples, batch by batch."""
        lo, hi = shard_bounds(self.eval_count, rank, world)
        return eval_batches(self.test, self.eval_count, lo, hi, batch_size)

    def event_fields(self) -> dict[str, Any]:
        """Fields of the train ``stage_start`` event about the data."""
        return {
            "n_test": len(self.test),
            "n_eval": self.eval_count,
            "data_cache": str(self.copy.folder),
            "data_bytes": self.train.nbytes + self.test.nbytes,
            "copy_s": round(self.copy.written_s, 3),
        }

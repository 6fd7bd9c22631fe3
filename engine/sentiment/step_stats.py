"""Samples, data read and memory of every rank between two ``step`` events (one tiny gather)."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from engine.procstats import rss_anon_bytes, storage_read_bytes


class StepWindow:
    """Counts this rank's samples since the last ``step`` event; :meth:`collect` sums ranks.

    Every rank calls :meth:`collect` at the same global steps (a collective of 3 numbers per
    rank), so ``samples_per_s`` is exact for unequal balancer shares and rank 0 can report the
    data read rate and each rank's anonymous resident memory.
    """

    def __init__(self, device: torch.device, world: int, sample_bytes: int) -> None:
        self.device, self.world, self.sample_bytes = device, world, sample_bytes
        self.samples = 0
        self.since = time.perf_counter()
        self.disk = storage_read_bytes()

    def add(self, samples: int) -> None:
        """Count one step's samples of this rank."""
        self.samples += samples

    def collect(self) -> dict[str, Any]:
        """Fields for the ``step`` event (on every rank; only rank 0 emits them)."""
        now, disk = time.perf_counter(), storage_read_bytes()
        rss = rss_anon_bytes()
        mine = [
            float(self.samples),
            float(disk - self.disk) if disk is not None and self.disk is not None else -1.0,
            float(rss) if rss is not None else -1.0,
        ]
        rows = [mine]
        if self.world > 1:
            local = torch.tensor(mine, dtype=torch.float64, device=self.device)
            parts = [torch.empty_like(local) for _ in range(self.world)]
            dist.all_gather(parts, local)
            rows = [p.tolist() for p in parts]
        seconds = max(now - self.since, 1e-9)
        self.samples, self.since, self.disk = 0, now, disk
        samples = sum(r[0] for r in rows)
        disk_known = all(r[1] >= 0 for r in rows)
        return {
            "samples_per_s": samples / seconds,
            "read_mb_s": samples * self.sample_bytes / seconds / 1e6,
            "disk_mb_s": sum(r[1] for r in rows) / seconds / 1e6 if disk_known else None,
            "rss_mb": [round(r[2] / 1e6, 1) if r[2] >= 0 else None for r in rows],
        }

"""Trainer overhead: sentitop's loop (streaming and in-memory rows) vs a bare PyTorch loop.

The bare loop trains on batches prepared in memory beforehand (forward, BCE with the same
pos_weight, backward, gradient clipping, Adam). sentitop's loop does everything it normally
does per step (plan sampler, batch gather, phase timers, LR warm-up, per-step reseed, loss
read-back, threshold clock, step events with their per-rank gather to a null sink), reading
its rows either from the node's memory-mapped copy (``stream``: what training does) or from
the split held in memory (``memory``: the loader before issue 12, through the same Trainer).
Samples/s of the second epoch of each; rounds alternate to share the machine's noise.

    .venv/bin/python benchmarks/bench_trainer.py [--rows 4096] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_loader import write_dataset

from engine.config import ModelConfig, TrainConfig
from engine.events import Emitter
from engine.sentiment import train_data
from engine.sentiment.data import (
    PlanSampler,
    SplitArrays,
    even_plan,
    gather_batch,
    load_split,
    read_info,
)
from engine.sentiment.hooks import StepTiming, TrainHooks
from engine.sentiment.model import build_model, resolve_spec
from engine.sentiment.store import CopyInfo
from engine.sentiment.trainer import DistEnv, Trainer


class InMemoryRows:
    """A split held in memory with what TrainData asks of a store (the pre-streaming loader)."""

    def __init__(self, arrays: SplitArrays) -> None:
        self.tokens, self.labels, self.lengths = arrays
        self.row_bytes = int(self.tokens.strides[0])
        self.nbytes = self.tokens.nbytes + self.labels.nbytes + self.lengths.nbytes

    def __len__(self) -> int:
        return len(self.labels)

    def prefetch(self, ranges: list[tuple[int, int]]) -> None:
        """Nothing to read ahead."""


def open_in_memory(cfg: TrainConfig) -> train_data.TrainData:
    """TrainData.open, but both splits loaded whole into memory."""
    train = InMemoryRows(load_split(cfg.data_dir, "train", cfg.max_train_samples))
    test = InMemoryRows(load_split(cfg.data_dir, "test"))
    count = train_data.eval_size(len(test), len(train), cfg.eval_max_samples)
    info = CopyInfo(Path(cfg.data_dir), train.nbytes, 0.0)
    vocab = read_info(cfg.data_dir).vocab_size
    return train_data.TrainData(train, test, info, count, vocab)  # type: ignore[arg-type]


def bare_loop(data: Path, cfg: TrainConfig) -> float:
    """Samples/s of the second of two epochs of a plain loop on in-memory batches."""
    arrays = load_split(data, "train")
    n = len(arrays.labels)
    sampler = PlanSampler(n, seed=cfg.seed, rank=0)
    torch.manual_seed(cfg.seed)
    model = build_model(resolve_spec(cfg.model, read_info(data).vocab_size))
    positives = float(arrays.labels.sum())
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor([(n - positives) / positives]))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    rate = 0.0
    for epoch in range(2):
        sampler.set_epoch(epoch)
        sampler.add_plan(even_plan(n, 1, cfg.batch_size))
        batches = [gather_batch(arrays, sampler.indices(s)) for s in range(sampler.steps)]
        start = time.perf_counter()
        for tokens, lengths, labels in batches:
            loss = loss_fn(model(tokens, lengths), labels)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_grad_norm)
            opt.step()
            opt.zero_grad(set_to_none=True)
        rate = n / (time.perf_counter() - start)
    return rate


class _Events:
    """Keeps the `phase` events (what the loader waited for, per epoch)."""

    def __init__(self) -> None:
        self.phases: list[dict[str, Any]] = []

    def write(self, event: dict[str, Any]) -> None:
        if event["type"] == "phase":
            self.phases.append(event)

    def close(self) -> None:
        """Nothing to release."""


class _CpuClock(TrainHooks):
    """Process CPU seconds of epoch 1 (from its first step's backward to its end)."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.seconds = 0.0

    def after_compute(self, timing: StepTiming) -> None:
        if timing.epoch == 1 and self.start is None:
            self.start = time.process_time()

    def end_plan(self, epoch: int, plan: Any, windows: list[dict[str, float]]) -> None:
        if epoch == 1 and self.start is not None:
            self.seconds = time.process_time() - self.start


def sentitop_loop(cfg: TrainConfig, *, in_memory: bool) -> tuple[float, float, float]:
    """Epoch 1 of engine.sentiment.trainer.Trainer (evaluation excluded): samples per wall
    second, samples per CPU second of the process, and loader seconds per 1000 samples."""
    streaming = train_data.TrainData.open
    if in_memory:
        train_data.TrainData.open = open_in_memory  # type: ignore[method-assign,assignment]
    events, clock = _Events(), _CpuClock()
    try:
        summary = Trainer(cfg, emitter=Emitter(events), hooks=clock, env=DistEnv()).fit()
    finally:
        train_data.TrainData.open = streaming  # type: ignore[method-assign]
    epoch = summary["per_epoch"][1]
    phase = next(p for p in events.phases if p["epoch"] == 1)
    n = float(phase["samples"])
    steps = float(phase["steps"])
    cpu_rate = n * (steps - 1) / steps / clock.seconds  # the first step is outside the clock
    return float(epoch["samples_per_s"]), cpu_rate, 1e6 * phase["data"] / n


def _ratio(a: list[tuple[float, ...]], b: list[tuple[float, ...]], i: int) -> float:
    return round(statistics.median(x[i] for x in a) / statistics.median(x[i] for x in b), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--seq-len", type=int, default=48)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default="seed", choices=["seed", "default"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bare: list[float] = []
    ours: list[tuple[float, float, float]] = []
    memory: list[tuple[float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        write_dataset(data, args.rows, args.seq_len)
        for r in range(args.rounds):
            cfg = TrainConfig(
                data_dir=str(data),
                data_cache=str(data / "cache"),
                run_dir=str(data / f"run{r}"),
                epochs=2,
                batch_size=args.batch,
                lr=2e-3,
                lr_reference_batch=args.batch,
                model=ModelConfig(preset=args.model),
                checkpoint_every_min=0,
                log_every=20,
                threads=args.threads,
                events_file=False,
                eval_every=10,
            )
            bare.append(bare_loop(data, cfg))
            cfg.run_dir = str(data / f"stream{r}")
            ours.append(sentitop_loop(cfg, in_memory=False))
            cfg.run_dir = str(data / f"memory{r}")
            memory.append(sentitop_loop(cfg, in_memory=True))
    result = {
        "model": args.model,
        "rows": args.rows,
        "seq_len": args.seq_len,
        "batch": args.batch,
        "threads": args.threads,
        "bare_samples_per_s": [round(x) for x in bare],
        "sentitop_stream_samples_per_s": [round(x[0]) for x in ours],
        "sentitop_memory_samples_per_s": [round(x[0]) for x in memory],
        "stream_vs_memory_ratio_of_medians": _ratio(ours, memory, 0),
        "stream_vs_memory_per_round": [
            round(o[0] / m[0], 3) for o, m in zip(ours, memory, strict=True)
        ],
        "stream_samples_per_cpu_s": [round(x[1]) for x in ours],
        "memory_samples_per_cpu_s": [round(x[1]) for x in memory],
        "stream_vs_memory_per_cpu_s_ratio_of_medians": _ratio(ours, memory, 1),
        "loader_ms_per_1000_samples_stream": [round(x[2], 2) for x in ours],
        "loader_ms_per_1000_samples_memory": [round(x[2], 2) for x in memory],
        "stream_vs_bare_ratio_of_medians": round(
            statistics.median(x[0] for x in ours) / statistics.median(bare), 3
        ),
        "load_avg_1m": os.getloadavg()[0],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

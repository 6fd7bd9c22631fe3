"""Trainer overhead: sentitop's loop vs a bare PyTorch loop (same model, batches, threads).

The bare loop trains on batches prepared in memory beforehand (forward, BCE with the same
pos_weight, backward, gradient clipping, Adam). sentitop's loop reads the same data from
dataset.h5 and does everything it normally does per step (plan sampler, batch gather, phase
timers, LR warm-up, per-step reseed, loss read-back, threshold clock, step events to a null
sink). Samples/s of the second epoch of each; rounds alternate to share the machine's noise.

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

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_loader import write_layouts

from engine.config import ModelConfig, TrainConfig
from engine.events import Emitter
from engine.sentiment.data import PlanSampler, even_plan, gather_batch, load_split, read_info
from engine.sentiment.model import build_model, resolve_spec
from engine.sentiment.trainer import DistEnv, Trainer


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


def sentitop_loop(data: Path, run: Path, cfg: TrainConfig) -> float:
    """Samples/s of the second epoch of engine.sentiment.trainer.Trainer (evaluation excluded)."""
    summary = Trainer(cfg, emitter=Emitter(), env=DistEnv()).fit()
    return float(summary["per_epoch"][1]["samples_per_s"])


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
    ours: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        write_layouts(data, args.rows, args.seq_len)
        for r in range(args.rounds):
            cfg = TrainConfig(
                data_dir=str(data),
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
            ours.append(sentitop_loop(data, data / f"run{r}", cfg))
    result = {
        "model": args.model,
        "rows": args.rows,
        "seq_len": args.seq_len,
        "batch": args.batch,
        "threads": args.threads,
        "bare_samples_per_s": [round(x) for x in bare],
        "sentitop_samples_per_s": [round(x) for x in ours],
        "ratio_of_medians": round(statistics.median(ours) / statistics.median(bare), 3),
        "ratio_of_best": round(max(ours) / max(bare), 3),
        "ratio_per_round": [round(o / b, 3) for o, b in zip(ours, bare, strict=True)],
        "load_avg_1m": os.getloadavg()[0],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

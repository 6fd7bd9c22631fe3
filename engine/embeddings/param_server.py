"""Asynchronous training through a parameter server on rank 0 (torch.distributed send/recv).

Rank 0 holds the parameters and the optimizer and serves whichever worker speaks first
(``recv`` from any source). A worker (ranks 1..N-1) computes the gradient of a batch on its
copy, pushes it, and pulls the weights the server sends back, which already include the other
workers' pushes. Nothing waits for all workers at once: a slow worker only delays its own
exchanges. Every message is one float32 buffer ``[header | flat gradient]``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from engine.embeddings.runtime import EmbedRun, EpochStats
from engine.errors import ConfigError

GRAD, EPOCH_END, DONE = 0.0, 1.0, 2.0
"""Message kinds (header slot 0)."""
HEADER = 12
"""Header floats: kind, epoch, steps, pairs, loss_sum, words, compute, comm, straggle, seconds."""


def _pack(buf: torch.Tensor, kind: float, stats: EpochStats) -> None:
    values = [kind, stats.epoch, stats.steps, stats.pairs, stats.loss_sum, stats.words,
              stats.compute, stats.comm, stats.straggle, stats.seconds]  # fmt: skip
    buf[: len(values)] = torch.tensor(values, dtype=buf.dtype)


def _unpack(buf: torch.Tensor) -> tuple[int, EpochStats]:
    h = buf[:HEADER].tolist()
    stats = EpochStats(int(h[1]), int(h[2]), int(h[3]), h[4], h[5], h[6], h[7], h[8], h[9])
    return int(h[0]), stats


def run_async(run: EmbedRun) -> dict[str, Any] | None:
    """Server on rank 0 (returns the summary), workers elsewhere (return None)."""
    if run.env.world < 2:
        raise ConfigError(
            "mode = async needs --nproc >= 2 (rank 0 serves the parameters, ranks 1.. train)"
        )
    if run.env.rank == 0:
        return _serve(run)
    _work(run)
    return None


def _serve(run: EmbedRun) -> dict[str, Any]:
    """Apply pushed gradients in arrival order and answer each with the current weights."""
    cfg, workers = run.cfg, run.env.world - 1
    params = list(run.model.parameters())
    optimizer = torch.optim.Adam(params, lr=cfg.lr)
    size = sum(p.numel() for p in params)
    buf = torch.empty(HEADER + size)
    pip0 = run.pip()
    run.start_event(workers, pip0)
    reports: dict[int, dict[int, EpochStats]] = defaultdict(dict)
    done, updates, pairs_since_log, words_since_log = 0, 0, 0, 0.0
    last_log, started = time.perf_counter(), time.perf_counter()
    served: dict[int, int] = defaultdict(int)
    while done < workers:
        sender = dist.recv(buf)  # from whichever worker pushes first
        kind, stats = _unpack(buf)
        if kind in (GRAD, EPOCH_END):  # a diverged worker: stop before NaN reaches anything
            run.check_loss(stats.loss_sum, stats.epoch)
        if kind == GRAD:
            offset = HEADER
            for p in params:
                p.grad = buf[offset : offset + p.numel()].view_as(p)  # used before next recv
                offset += p.numel()
            optimizer.step()
            dist.send(parameters_to_vector(params).detach(), dst=sender)
            updates += 1
            served[sender] += 1
            pairs_since_log += stats.pairs
            words_since_log += stats.words
            if updates % cfg.log_every == 0:
                now = time.perf_counter()
                elapsed = max(now - last_log, 1e-9)
                run.emitter.emit(
                    "step",
                    epoch=stats.epoch,
                    step=stats.steps,
                    global_step=updates,
                    loss=stats.loss_sum / max(1, stats.pairs),
                    samples_per_s=pairs_since_log / elapsed,
                    words_per_s=words_since_log / elapsed,
                    lr=cfg.lr,
                    worker=sender,
                )
                last_log, pairs_since_log, words_since_log = now, 0, 0.0
        elif kind == EPOCH_END:
            reports[stats.epoch][sender] = stats
            if len(reports[stats.epoch]) == workers:  # every worker is past this epoch
                ranks = [reports[stats.epoch][r] for r in range(1, workers + 1)]
                run.epoch_event(stats.epoch, ranks, run.pip())
        elif kind == DONE:
            done += 1
    extra = {
        "workers": workers,
        "updates": updates,
        "updates_per_worker": {str(r): n for r, n in sorted(served.items())},
        "serve_s": time.perf_counter() - started,
    }
    return run.finish(pip0, extra)


def _work(run: EmbedRun) -> None:
    """Train on shard rank-1 of world-1: push a gradient, pull the weights, repeat."""
    cfg, env = run.cfg, run.env
    params = list(run.model.parameters())
    size = sum(p.numel() for p in params)
    buf = torch.zeros(HEADER + size)
    weights = torch.empty(size)
    shard, shards = env.rank - 1, env.world - 1
    for epoch in range(cfg.epochs):
        centres, contexts, words_per_pair = run.shard_pairs(epoch, shard, shards)
        run.check_steps(epoch, len(centres), f"worker {env.rank}")
        stats = EpochStats(epoch)
        start = time.perf_counter()
        for step in range(len(centres) // cfg.batch):
            lo, hi = step * cfg.batch, (step + 1) * cfg.batch
            t0 = time.perf_counter()
            for p in params:
                p.grad = None
            loss = run.loss(run.model, centres[lo:hi], contexts[lo:hi])
            loss.backward()
            t1 = time.perf_counter()
            stats.straggle += run.straggle(t1 - t0)
            t2 = time.perf_counter()
            offset = HEADER
            for p in params:
                grad = p.grad if p.grad is not None else torch.zeros_like(p)
                buf[offset : offset + p.numel()] = grad.reshape(-1)
                offset += p.numel()
            step_stats = EpochStats(epoch, step, hi - lo, float(loss.item()) * (hi - lo),
                                    (hi - lo) * words_per_pair)  # fmt: skip
            _pack(buf, GRAD, step_stats)
            dist.send(buf, dst=0)
            dist.recv(weights, src=0)
            vector_to_parameters(weights, params)
            stats.comm += time.perf_counter() - t2
            stats.compute += t1 - t0
            stats.add(hi - lo, step_stats.loss_sum / (hi - lo), step_stats.words)
        stats.seconds = time.perf_counter() - start
        _pack(buf, EPOCH_END, stats)
        dist.send(buf, dst=0)
    _pack(buf, DONE, EpochStats(cfg.epochs))
    dist.send(buf, dst=0)

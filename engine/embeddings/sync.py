"""Synchronous data parallelism: every rank steps on its shard, DDP all-reduces the gradients.

All ranks run the same number of steps per epoch (the smallest shard's), so every step is a
global barrier: a straggling rank holds back every other rank.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from engine.embeddings.runtime import EmbedRun, EpochStats


def run_sync(run: EmbedRun) -> dict[str, Any] | None:
    """Train ``run.cfg.epochs`` epochs; rank 0 returns the summary, other ranks None."""
    cfg, env = run.cfg, run.env
    main = env.rank == 0
    cuda = run.device.type == "cuda"
    module: nn.Module = run.model
    if env.world > 1:
        ids = [run.device.index] if cuda else None
        module = DDP(run.model, device_ids=ids, forward_sync_buffers=False)
    # one fused kernel per update on a GPU, as the sentiment trainer does
    optimizer = torch.optim.Adam(run.model.parameters(), lr=cfg.lr, fused=True if cuda else None)
    pip0 = run.pip()
    if main:
        run.start_event(env.world, pip0)
    global_step, last_log, pairs_since_log = 0, time.perf_counter(), 0
    for epoch in range(cfg.epochs):
        start = time.perf_counter()
        centres, contexts, words_per_pair = run.shard_pairs(epoch, env.rank, env.world)
        fewest = torch.tensor([len(centres)], device=run.device)
        if env.world > 1:
            dist.all_reduce(fewest, op=dist.ReduceOp.MIN)  # same step count on every rank
        # every rank sees the same count and refuses alike (none waits in a collective)
        run.check_steps(epoch, int(fewest), "a rank" if env.world > 1 else "the run")
        steps = int(fewest) // cfg.batch
        stats = EpochStats(epoch)
        stats.sampling = time.perf_counter() - start
        # the loss is summed where it is computed: no device-to-host sync every step
        loss_sum = torch.zeros((), dtype=torch.float64, device=run.device)
        for step in range(steps):
            lo, hi = step * cfg.batch, (step + 1) * cfg.batch
            t_s = time.perf_counter()
            negatives = run.negatives.sample(hi - lo, cfg.negatives)
            t0 = time.perf_counter()
            loss = run.loss(module, centres[lo:hi], contexts[lo:hi], negatives)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # DDP all-reduces the gradient buckets here
            t1 = time.perf_counter()
            stats.straggle += run.straggle(t1 - t0)
            t2 = time.perf_counter()
            optimizer.step()
            stats.comm += time.perf_counter() - t2
            stats.compute += t1 - t0
            stats.sampling += t0 - t_s
            loss_sum += loss.detach() * (hi - lo)
            stats.add(hi - lo, 0.0, (hi - lo) * words_per_pair)
            global_step += 1
            pairs_since_log += hi - lo
            if global_step % cfg.log_every == 0:
                step_loss = float(loss.item())
                run.check_loss(_any_rank(step_loss, env.world, run.device), epoch)
            if main and global_step % cfg.log_every == 0:
                now = time.perf_counter()
                rate = pairs_since_log * env.world / max(now - last_log, 1e-9)
                run.emitter.emit(
                    "step",
                    epoch=epoch,
                    step=step,
                    global_step=global_step,
                    loss=step_loss,
                    samples_per_s=rate,
                    words_per_s=rate * words_per_pair,
                    lr=cfg.lr,
                )
                last_log, pairs_since_log = now, 0
        stats.loss_sum = float(loss_sum.item())
        if cuda:
            torch.cuda.synchronize(run.device)
        stats.seconds = time.perf_counter() - start
        gathered = _gather(stats, env.world)
        for each in gathered:  # every rank sees every loss, so all stop alike
            run.check_loss(each.loss_sum, epoch)
        if main:
            run.epoch_event(epoch, gathered, run.pip())
    if not main:
        return None
    return run.finish(pip0, {"workers": env.world})


def _any_rank(loss: float, world: int, device: torch.device) -> float:
    """The sum of every rank's ``loss`` (not finite when any rank's is not): each rank checks
    it, so all stop together. Only rank 0 checked its own, and its peers, left waiting in the
    next all-reduce, crashed with a gloo traceback under the diverged-loss message."""
    if world == 1:
        return loss
    total = torch.tensor([loss], dtype=torch.float64, device=device)
    dist.all_reduce(total)
    return float(total.item())


def _gather(stats: EpochStats, world: int) -> list[EpochStats]:
    """Every rank's stats, in rank order (on every rank)."""
    if world == 1:
        return [stats]
    out: list[Any] = [None] * world
    dist.all_gather_object(out, stats)
    return list(out)

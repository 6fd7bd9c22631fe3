"""The training loop: one process or DDP across ranks; plans, events, evaluation, checkpoints.

Run it through ``python -m engine.sentiment.train`` (standalone, under torchrun, or from
``engine.launch``). The loop reads top to bottom in :meth:`Trainer.fit`; the load balancer
plugs in through :class:`TrainHooks` (per-plan sample split, per-step timings, per-plan
gathered measurements).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from engine.config import OWN_TEXT_SVD, TrainConfig, config_to_dict
from engine.events import Emitter, rank_emitter
from engine.procstats import rss_anon_bytes, storage_read_bytes
from engine.sentiment import checkpoint as ckpt
from engine.sentiment.after_training import (
    after_training_plan,
    companion_rows,
    fit_after_training,
    outcome_checks,
    warmup_warning,
)
from engine.sentiment.blend import BlendFit
from engine.sentiment.data import Batch, PlanSampler, even_plan, to_device
from engine.sentiment.dist_env import DistEnv
from engine.sentiment.divergence import check_loss, check_weights
from engine.sentiment.evaluate import confusion_stats
from engine.sentiment.hooks import PHASES, HookContext, StepTiming, TrainHooks
from engine.sentiment.lexicon_phrases import forward_with_phrases, phrases_for
from engine.sentiment.metrics import Confusion, ThresholdClock
from engine.sentiment.model import SentimentLSTM, count_parameters, model_for
from engine.sentiment.pretrained import coverage_warning
from engine.sentiment.resume_checks import dataset_stamp
from engine.sentiment.selection import BestEpoch
from engine.sentiment.step_stats import StepWindow
from engine.sentiment.train_data import TrainData
from engine.sentiment.trainer_checkpoints import CARRIED, CheckpointState
from engine.sentiment.weight_average import WeightAverage


class _Clock:
    """Lap timer that waits for queued CUDA work so phases are attributed correctly."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.last = time.perf_counter()

    def lap(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        now = time.perf_counter()
        seconds, self.last = now - self.last, now
        return seconds


class Trainer(CheckpointState):
    """Trains one model on this rank's share; rank 0 writes events, checkpoints and summary."""

    def __init__(
        self,
        cfg: TrainConfig,
        *,
        emitter: Emitter | None = None,
        hooks: TrainHooks | None = None,
        env: DistEnv | None = None,
    ) -> None:
        self.cfg = cfg
        self.env = env or DistEnv.from_environ(cfg.device)
        self.emitter = emitter or rank_emitter(
            cfg.run_dir, self.env.rank, events_file=cfg.events_file
        )
        self.hooks = hooks or TrainHooks()
        self.main, self.device = self.env.rank == 0, self.env.device
        # progress (restored by --resume)
        self.epoch, self.resume_step = 0, 0
        """Epoch, and steps of ``self.epoch`` already done (mid-epoch resume skips them)."""
        self.resumed_sampler = False
        """The sampler already holds the resumed epoch (set by :meth:`_resume`)."""
        self.global_step, self.samples_seen = 0, 0
        self.train_seconds, self.eval_seconds = 0.0, 0.0
        self.prior_wall_s = 0.0
        """Wall seconds of earlier sessions of this run."""
        self.history: list[dict[str, Any]] = []
        self.last_test: dict[str, Any] | None = None
        self.carried: dict[str, float] | None = None
        """The resumed epoch's part before the checkpoint: samples, seconds, loss_sum."""
        self.carried_world = 0
        """The ranks that trained the carried part of the resumed epoch (the checkpoint's)."""

    # ------------------------------------------------------------------ the loop, top to bottom
    def fit(self) -> dict[str, Any]:
        """Train ``cfg.epochs`` epochs (continuing a checkpoint if asked); return the summary."""
        self._setup()
        for epoch in range(self.epoch, self.cfg.epochs):
            self.epoch = epoch
            train = self._train_epoch(epoch)
            check_weights(self.model, epoch=epoch + 1, step=0, lr=self.cfg.lr)
            last = epoch == self.cfg.epochs - 1
            with self._averaged():  # a weight average, when kept, is what is measured and kept
                test = self._evaluate() if last or (epoch + 1) % self.cfg.eval_every == 0 else None
                stop = test is not None and self.best.update(epoch, test, self.model)
            train["eval"] = self.eval_seconds if test else 0.0
            self._end_epoch(epoch, self._gather(train), test)
            if stop:
                break  # early stopping: every rank sees the same all-reduced loss
        return self._finish()

    def _train_epoch(self, epoch: int) -> dict[str, float]:
        """Run every step of ``epoch`` (from the resumed step); return this rank's totals."""
        sampler, step = self.sampler, self.resume_step
        if not self.resumed_sampler:
            sampler.set_epoch(epoch)
        self.resume_step, self.resumed_sampler = 0, False
        totals = dict.fromkeys((*PHASES, "loss_sum", "samples", "steps"), 0.0)
        disk_before = storage_read_bytes()
        start = self.epoch_start = time.perf_counter()
        self.epoch_totals = totals
        while step < sampler.steps or sampler.covered < self.n_train:
            if step == sampler.steps:
                sampler.add_plan(self.hooks.next_plan(epoch, sampler.covered))
            plan_first, window = (
                step,
                dict.fromkeys(("samples", "compute", "forward", "allreduce_opt", "data"), 0.0),
            )
            for batch, data_s in self._batches(step, sampler.steps):
                timing = self._train_step(epoch, step, batch, data_s)
                self._account(timing, totals, window)
                step += 1
                self.global_step += 1
                self._after_step(epoch, step, timing, start)
            plan, _ = sampler.plan_at(plan_first)
            self.hooks.end_plan(epoch, plan, self._gather(window))
        totals["seconds"] = time.perf_counter() - start
        disk, rss = storage_read_bytes(), rss_anon_bytes()
        totals["disk_mb"] = -1.0  # /proc/self/io unreadable
        if disk is not None and disk_before is not None:
            totals["disk_mb"] = (disk - disk_before) / 1e6
        totals["rss_mb"] = rss / 1e6 if rss is not None else -1.0
        return totals

    def _train_step(self, epoch: int, step: int, batch: Batch, data_s: float) -> StepTiming:
        """One optimisation step; the loss is scaled by b_i·W/B so the gradient is exact."""
        clock = _Clock(self.device)
        timing = StepTiming(epoch, step, len(batch.labels), data=data_s)
        batch = to_device(batch, self.device)
        timing.h2d = clock.lap()
        self._set_lr()
        torch.manual_seed(hash((self.cfg.seed, self.env.rank, self.global_step)) & 0x7FFFFFFF)
        with self._sync_context():
            with self._autocast():  # (B,) logits; lexicon phrases ride along in the forward
                logits, phrase_loss = forward_with_phrases(self.ddp, self.phrases, batch)
            loss = self.criterion(logits.float(), batch.labels)
            timing.forward = clock.lap()
            (loss * self.sampler.loss_scale(step) + phrase_loss).backward()
            timing.backward = clock.lap()
            self.hooks.after_compute(timing)  # may sleep (straggler): counted as backward
            timing.backward += clock.lap()
        if self.cfg.sync_mode == "separate":
            self._allreduce_grads()
        if self.cfg.clip_grad_norm > 0:
            nn.utils.clip_grad_norm_(self.params, self.cfg.clip_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.average is not None:
            self.average.update()
        timing.loss = float(loss.item())
        timing.allreduce_opt = clock.lap()
        check_loss(timing.loss, epoch=epoch, step=step, rank=self.env.rank, lr=self.cfg.lr)
        return timing

    def _end_epoch(
        self, epoch: int, ranks: list[dict[str, float]], test: dict[str, Any] | None
    ) -> None:
        """Per-epoch events (phases of every rank, metrics), history and the checkpoint."""
        carried, self.carried = self.carried or dict.fromkeys(CARRIED, 0.0), None
        samples = sum(r["samples"] for r in ranks) + carried["samples"]
        seconds = max(r["seconds"] for r in ranks) + carried["seconds"]
        record = {
            "epoch": epoch,
            "train_loss": (sum(r["loss_sum"] for r in ranks) + carried["loss_sum"])
            / max(1.0, samples),
            "test_loss": test["loss"] if test else None,
            **{k: (test[k] if test else None) for k in ("accuracy", "precision", "recall", "f1")},
            "seconds": seconds,
            "samples_per_s": samples / seconds if seconds > 0 else 0.0,
            "world_size": self.env.world,  # a resumed run may change it between epochs
        }
        if carried["samples"]:  # split by a mid-epoch resume: its time is no one configuration's
            record.update(resumed_mid_epoch=True, world_size_before=self.carried_world)
        self.history.append(record)
        self.train_seconds += seconds
        self.samples_seen += int(samples)
        self.last_test = test or self.last_test
        if self.main:
            for rank, r in enumerate(ranks):
                self.emitter.emit(
                    "phase",
                    rank=rank,
                    epoch=epoch,
                    **{k: r[k] for k in PHASES},
                    eval=r["eval"],
                    steps=int(r["steps"]),
                    samples=int(r["samples"]),
                    disk_mb=round(r["disk_mb"], 3) if r["disk_mb"] >= 0 else None,
                    rss_mb=round(r["rss_mb"], 1) if r["rss_mb"] >= 0 else None,
                )
            self.emitter.emit("epoch", **record)
            self._save_checkpoint(epoch + 1, 0)

    # ------------------------------------------------------------------ setup
    def _setup(self) -> None:
        cfg, env = self.cfg, self.env
        self.wall_start = time.time()
        self.data = TrainData.open(cfg)
        self.n_train = self.data.n_train
        self.dataset_record = dataset_stamp(cfg.data_dir, self.n_train)  # hashed once, not per save
        torch.manual_seed(cfg.seed)
        resumed = ckpt.resumed_spec(cfg.run_dir) if cfg.resume else None
        self.spec, model, init = model_for(
            cfg.model, self.data.vocab_size, cfg.data_dir, cfg.seed, env.rank == 0, resumed
        )
        self.init_facts = init.facts() if init is not None else None
        """The embeddings run the table started from and how much of the vocabulary it knew."""
        self.model: SentimentLSTM = model.to(self.device)
        self.params = list(self.model.parameters())
        self.ddp: nn.Module = self.model
        if env.world > 1:
            ids = [env.local_rank] if self.device.type == "cuda" else None
            self.ddp = DDP(self.model, device_ids=ids, gradient_as_bucket_view=True)
        self.pos_weight = self._pos_weight()
        pw = torch.tensor([self.pos_weight], device=self.device) if self.pos_weight else None
        self.criterion = nn.BCEWithLogitsLoss(pos_weight=pw)
        self.eval_criterion = nn.BCEWithLogitsLoss(pos_weight=pw, reduction="sum")
        self.base_lr = cfg.lr * cfg.batch_size / cfg.lr_reference_batch
        opt_cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
        # one fused kernel for the whole update on a GPU instead of a launch per tensor (+40 %
        # samples/s for the seed model at batch 2048 on an H100, BENCHMARKS.md "GPU path")
        fused = {"fused": True} if self.device.type == "cuda" else {}
        self.optimizer = opt_cls[cfg.optimizer](
            self.params, lr=self.base_lr, weight_decay=cfg.weight_decay, **fused
        )
        self.average = WeightAverage(self.model, cfg.ema_decay) if cfg.ema_decay else None
        self.total_steps = cfg.epochs * -(-self.n_train // cfg.batch_size)
        lengths = self.data.train.padded_lengths if cfg.length_buckets else None
        self.sampler = PlanSampler(
            self.n_train, cfg.seed, env.rank, on_window=self.data.train.prefetch,
            lengths=lengths, group=cfg.batch_size,
        )  # fmt: skip
        self.hooks.setup(
            HookContext(
                cfg=cfg,
                rank=env.rank,
                world=env.world,
                num_samples=self.n_train,
                global_batch=cfg.batch_size,
                emitter=self.emitter,
            )
        )
        self.clock, self.best = ThresholdClock(cfg.loss_threshold), BestEpoch(cfg.patience)
        self.phrases = phrases_for(cfg, env.rank)
        self.last_checkpoint = time.monotonic()
        self.window = StepWindow(self.device, env.world, self.data.sample_bytes)
        self.steps_logged = False
        """A `step` event was emitted (the first step of a session always emits one)."""
        self.early_warnings: list[dict[str, str]] = []
        """Warnings emitted at the start; the summary lists them too."""
        if cfg.resume:
            self._resume()
        if self.main:
            ckpt.prepare_run_dir(
                cfg.run_dir, cfg.data_dir, spec=self.spec.to_dict(), config=config_to_dict(cfg)
            )
            steps_per_epoch = even_plan(self.n_train, env.world, cfg.batch_size).steps
            self.emitter.emit(
                "train_start",
                epochs=cfg.epochs,
                steps_per_epoch=steps_per_epoch,
                total_steps=cfg.epochs * steps_per_epoch,
                balancer=cfg.balance.enabled,
                world_size=env.world,
                device=str(self.device),
                n_train=self.n_train,
                **self.data.event_fields(),
                params=count_parameters(self.model),
                spec=self.spec.to_dict(),
                global_batch=cfg.batch_size,
                lr=self.base_lr,
                reference_lr=cfg.lr,
                pos_weight=self.pos_weight,
                length_buckets=cfg.length_buckets,
                resumed_epoch=self.epoch,
                resumed_step=self.resume_step,
                threads=torch.get_num_threads(),
                init_embeddings=self.init_facts,
            )
            if warned := warmup_warning(cfg.warmup_steps, self.total_steps):
                self.emitter.emit("warning", stage="train", **warned)  # now: before it is paid
                self.early_warnings.append(warned)

    def _pos_weight(self) -> float | None:
        pw = self.cfg.pos_weight
        if pw in ("none", "auto"):
            return self.data.balancing_weight() if pw == "auto" else None
        return float(pw)

    def _blend(self) -> tuple[BlendFit | None, dict[str, Any] | None]:
        """Rank 0: the paths' blend fitted on validation, with the linear companion when the run
        asks for it (engine/sentiment/after_training.py), and the companion's facts."""
        if not self.main:
            return None, None
        size, device = self.cfg.eval_batch_size, self.device

        def valid() -> Iterator[Batch]:
            return (to_device(b, device) for b in self.data.eval_batches(0, 1, size))

        weighted = bool(self.pos_weight)
        fits = after_training_plan(self.model, self.cfg, weighted)
        self.emitter.emit(
            "after_training",
            stage="train",
            fits=fits,
            valid_samples=self.data.eval_count,
            companion_rows=min(companion_rows(self.cfg), self.n_train)
            if "companion" in fits
            else 0,
        )
        fitted = fit_after_training(self.model, self.cfg, valid, device, weighted)
        self.spec = self.model.spec
        return fitted

    # ------------------------------------------------------------------ step helpers
    def _batches(self, first: int, stop: int) -> Iterator[tuple[Batch, float]]:
        """This rank's batches for steps [first, stop) and the seconds spent waiting for each
        (pinned host memory only when they go to a CUDA device)."""
        return self.data.batches(
            self.sampler,
            first,
            stop,
            workers=self.cfg.loader_workers,
            pin_memory=self.device.type == "cuda",
        )

    def _set_lr(self) -> None:
        """Goyal warm-up (linear from 0), then ``lr_schedule`` down to 0 at the last step."""
        warm, step = self.cfg.warmup_steps, self.global_step
        factor = min(1.0, (step + 1) / warm) if warm > 0 else 1.0
        if self.cfg.lr_schedule != "constant" and step >= warm:
            done = min(1.0, (step - warm) / max(1, self.total_steps - warm))  # 0 → 1
            linear = self.cfg.lr_schedule == "linear"
            factor *= 1 - done if linear else 0.5 * (1 + math.cos(math.pi * done))
        for group in self.optimizer.param_groups:
            group["lr"] = self.base_lr * factor

    def _sync_context(self) -> contextlib.AbstractContextManager[Any]:
        if isinstance(self.ddp, DDP) and self.cfg.sync_mode == "separate":
            return self.ddp.no_sync()  # gradients are all-reduced after backward, timed apart
        return contextlib.nullcontext()

    def _averaged(self) -> contextlib.AbstractContextManager[Any]:
        """The weight average (``train.ema_decay``) in the model inside the block."""
        return self.average.swapped_in() if self.average else contextlib.nullcontext()

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        on = self.device.type == "cuda" and self.cfg.amp
        return torch.autocast("cuda", dtype=torch.bfloat16) if on else contextlib.nullcontext()

    def _allreduce_grads(self) -> None:
        """Average gradients in one flat all-reduce (``grad_sync = separate``)."""
        if self.env.world == 1:
            return
        grads = [p.grad for p in self.params if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.env.world
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def _account(self, t: StepTiming, totals: dict[str, float], window: dict[str, float]) -> None:
        for k in PHASES:
            totals[k] += getattr(t, k)
        totals["loss_sum"] += t.loss * t.samples
        totals["samples"] += t.samples
        totals["steps"] += 1
        window["samples"] += t.samples
        window["compute"] += t.compute
        window["forward"] += t.forward
        window["allreduce_opt"] += t.allreduce_opt
        window["data"] += t.data

    def _after_step(self, epoch: int, step: int, t: StepTiming, epoch_start: float) -> None:
        """Threshold clock, `step` events and time-based checkpoints (rank 0)."""
        self.window.add(t.samples)
        # every rank: the step event's rates and memory are gathered from all ranks
        log = self.global_step % self.cfg.log_every == 0 or not self.steps_logged
        stats = self.window.collect() if log else None
        self.steps_logged = True
        if not self.main:
            return
        elapsed = self.prior_wall_s + time.time() - self.wall_start
        if self.clock.update(t.loss, seconds=elapsed, epoch=epoch, global_step=self.global_step):
            self.emitter.emit(
                "threshold",
                loss=self.clock.smoothed,
                epoch=epoch,
                step=self.global_step,
                seconds=elapsed,
                threshold=self.cfg.loss_threshold,
            )
        if stats is not None:
            self.emitter.emit(
                "step",
                epoch=epoch,
                step=step,
                global_step=self.global_step,
                loss=t.loss,
                smoothed_loss=self.clock.smoothed,
                lr=self.optimizer.param_groups[0]["lr"],
                **stats,
            )
        every_steps = self.cfg.checkpoint_every_steps
        minutes = self.cfg.checkpoint_every_min
        due = (every_steps and self.global_step % every_steps == 0) or (
            minutes and time.monotonic() - self.last_checkpoint >= minutes * 60
        )
        due = due or ckpt.checkpoint_requested(self.cfg.run_dir)  # e.g. a spot notice
        mid_epoch = step < self.sampler.steps or self.sampler.covered < self.n_train
        if due and mid_epoch:  # the epoch-end checkpoint follows the epoch's evaluation
            self._save_checkpoint(epoch, step)

    def _gather(self, values: dict[str, float]) -> list[dict[str, float]]:
        """Every rank's ``values`` (on every rank), rank order."""
        if self.env.world == 1:
            return [dict(values)]
        out: list[Any] = [None] * self.env.world
        dist.all_gather_object(out, dict(values))
        return out

    # ------------------------------------------------------------------ evaluation
    def _evaluate(self) -> dict[str, Any]:
        """Metrics on the test split: each rank scores its shard, counts are summed."""
        start = time.perf_counter()
        with self._autocast():
            batches = self.data.eval_batches(
                self.env.rank, self.env.world, self.cfg.eval_batch_size
            )
            on_device = (to_device(b, self.device) for b in batches)
            stats = confusion_stats(self.model, on_device, self.eval_criterion)
        if self.env.world > 1:
            dist.all_reduce(stats)
        result = Confusion.from_vector(stats.cpu().tolist()).metrics()
        self.eval_seconds = time.perf_counter() - start
        return result

    # ------------------------------------------------------------------ summary
    def _finish(self) -> dict[str, Any]:
        """Rank 0 writes model.pt and summary.json and emits `summary`; returns the summary."""
        if self.average is not None:  # the final weights are the average (or its best epoch)
            self.average.copy_to_model()
        best = self.best.restore(self.model) if self.cfg.keep_best else None
        test = best or self.last_test or {}
        blend, companion = self._blend()
        test = {**test, **blend.metrics} if blend and blend.metrics else test
        wall = self.prior_wall_s + time.time() - self.wall_start
        summary = {
            "status": "ok",
            **{k: test.get(k) for k in ("accuracy", "precision", "recall", "f1")},
            "test_loss": test.get("loss"),
            "n_test": test.get("n"),
            "confusion": test.get("confusion"),
            "epochs": len(self.history),
            "best_epoch": self.best.best_epoch if best else None,
            "wall_s": wall,
            "train_s": self.train_seconds,
            "samples_per_s": self.samples_seen / self.train_seconds if self.train_seconds else 0,
            "time_to_threshold_s": self.clock.reached_at_s,
            "threshold_epoch": self.clock.reached_epoch,
            "loss_threshold": self.clock.threshold,
            "world_size": self.env.world,
            "device": str(self.device),
            "global_batch": self.cfg.batch_size,
            "lr": self.base_lr,
            "pos_weight": self.pos_weight,
            "ema_decay": self.cfg.ema_decay or None,  # the weights are the average's
            "train_positive_rate": self.data.positive_rate(),
            "blend": blend.summary() if blend else None,
            "companion": companion,
            "model": self.spec.to_dict(),
            "params": count_parameters(self.model),
            "n_train": self.n_train,
            "per_epoch": self.history,
            "init_embeddings": self.init_facts,
            **self.hooks.summary(),
        }
        summary.update(outcome_checks(test, blend))
        facts = self.init_facts or {"source": OWN_TEXT_SVD}  # own text: no coverage to warn of
        if facts["source"] != OWN_TEXT_SVD and (
            few := coverage_warning(
                facts["found"],
                facts["missing"],
                facts["source"],
                (facts.get("top_found", 0), facts.get("top_total", 0)),
            )
        ):
            summary["warnings"].append({"code": "few_known_words", "message": few})
        summary["warnings"][:0] = self.early_warnings
        if self.main:
            for warning in summary["warnings"][len(self.early_warnings) :]:
                self.emitter.emit("warning", stage="train", **warning)
            ckpt.save_weights(self.cfg.run_dir, self.model.state_dict())
            ckpt.write_json(os.path.join(self.cfg.run_dir, ckpt.SUMMARY), summary)
            self.emitter.emit("summary", stage="train", **summary)
        return summary

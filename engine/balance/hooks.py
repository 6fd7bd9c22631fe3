"""The load balancer plugged into the trainer: plans, measurements, straggler, events, advice.

:class:`BalanceHooks` implements the trainer's :class:`~engine.sentiment.trainer.TrainHooks`
seam. Every rank holds one and receives the same gathered measurement windows, so every rank
derives the same plans from the pure functions of :mod:`engine.balance.balancer` without more
communication.
"""

from __future__ import annotations

import time
from typing import Any

from engine.balance.balancer import Balancer, SplitPlan
from engine.config import BalanceConfig, TrainConfig
from engine.sentiment.data import StepPlan
from engine.sentiment.hooks import HookContext, StepTiming, TrainHooks


class BalanceHooks(TrainHooks):
    """Per-rank shares and batch sizes from measured compute speed (or equal when disabled).

    Measures forward+backward seconds per sample (``measure = forward``: forward only) on
    every rank, excluding the gradient all-reduce (the trainer runs backward under
    ``no_sync()`` and all-reduces separately), and re-plans every X epochs / K steps.
    A straggling rank sleeps ``(factor - 1)`` × its compute time after each backward (counted
    as backward time, so ``measure = forward`` does not see an injected straggler).
    """

    def __init__(self, config: BalanceConfig) -> None:
        self.config = config
        self.balancer: Balancer | None = None
        self._restored: dict[str, Any] | None = None
        self.last_measured: list[float] | None = None

    def setup(self, ctx: HookContext) -> None:
        """Build the balancer for this run's world, global batch and epoch size."""
        super().setup(ctx)
        self.factor = self.config.straggle.get(ctx.rank, 1.0)
        self.balancer = Balancer(
            config=self.config, world=ctx.world, global_batch=ctx.global_batch, n=ctx.num_samples
        )
        if self._restored is not None:
            self._apply_state(self._restored)

    @property
    def _bal(self) -> Balancer:
        if self.balancer is None:
            raise RuntimeError("BalanceHooks.setup() was not called")
        return self.balancer

    def next_plan(self, epoch: int, start: int) -> StepPlan:
        """The split for epoch positions from ``start``; rank 0 emits a ``balance`` event."""
        plan = self._bal.plan(start)
        if self.ctx.rank == 0:  # every earlier plan of the epoch had K full steps
            self.ctx.emitter.emit(
                "balance", epoch=epoch, step=start // self.ctx.global_batch, start=start,
                rebalances=self._bal.rebalances, measured=self.last_measured,
                **self._bal.event_fields(plan),
            )  # fmt: skip
        return plan

    def after_compute(self, timing: StepTiming) -> None:
        """Emulated device time, then the straggler's (factor - 1) × compute (timed by the trainer).

        With ``emulate_s`` the straggler multiplies the emulated seconds only, so the speed
        ratio of the ranks does not depend on how loaded the host's cores are.
        """
        emulated = self.config.emulate_s * timing.samples
        base = emulated if emulated > 0 else timing.compute
        time.sleep(emulated + max(self.factor - 1.0, 0.0) * base)

    def end_plan(self, epoch: int, plan: StepPlan, windows: list[dict[str, float]]) -> None:
        """Feed every rank's measured seconds per sample; maybe move the shares."""
        key = "forward" if self.config.measure == "forward" else "compute"
        steps = max(plan.steps, 1)
        measured = [max(w[key], 1e-12) / max(w["samples"], 1.0) for w in windows]
        self.last_measured = measured
        # the least-waiting rank's all-reduce+optimizer time is the closest to the pure cost
        allreduce = min(w["allreduce_opt"] for w in windows) / steps
        other = sum(w.get("data", 0.0) + w.get("h2d", 0.0) for w in windows) / len(windows)
        self._bal.observe(measured, per_step_s=allreduce + other / steps, allreduce_s=allreduce)
        end = plan.start + plan.n >= self.ctx.num_samples
        self._bal.end_chunk(epoch_end=end)

    def summary(self) -> dict[str, Any]:
        """The ``balance`` block of summary.json: final split, speeds and drop-a-rank advice."""
        bal = self._bal
        advice = bal.advice()
        plan: SplitPlan = bal.epoch_plan()
        return {
            "balance": {
                **bal.event_fields(plan),
                "n": bal.n,
                "global_batch": bal.global_batch,
                "min_share": self.config.min_share,
                "rebalances": bal.rebalances,
                "allreduce_s_per_step": bal.allreduce_s,
                "other_s_per_step": max(bal.per_step_s - bal.allreduce_s, 0.0),
                "straggle": {str(k): v for k, v in self.config.straggle.items()},
                "advice": None if advice is None else advice.as_dict(),
            }
        }

    def state_dict(self) -> dict[str, Any]:
        """Balancer state for checkpoints (plain types)."""
        bal = self._bal
        return {
            "shares": list(bal.shares),
            "sec_per_sample": bal.sec_per_sample,
            "per_step_s": bal.per_step_s,
            "allreduce_s": bal.allreduce_s,
            "epochs_seen": bal.epochs_seen,
            "rebalances": bal.rebalances,
            "fresh": bal.fresh,
            "world": bal.world,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the shares and measurements (ignored when the world size changed)."""
        if self.balancer is None:
            self._restored = state
        else:
            self._apply_state(state)

    def _apply_state(self, state: dict[str, Any]) -> None:
        bal = self._bal
        if not state or state.get("world") != bal.world:
            return
        bal.shares = [float(s) for s in state["shares"]]
        sps = state.get("sec_per_sample")
        bal.sec_per_sample = None if sps is None else [float(s) for s in sps]
        bal.per_step_s = float(state["per_step_s"])
        bal.allreduce_s = float(state["allreduce_s"])
        bal.epochs_seen = int(state["epochs_seen"])
        bal.rebalances = int(state["rebalances"])
        bal.fresh = bool(state.get("fresh", bal.sec_per_sample is None))


def make_hooks(cfg: TrainConfig) -> BalanceHooks:
    """The trainer hooks for ``cfg.balance`` (also when disabled: equal split, straggler)."""
    return BalanceHooks(cfg.balance)


def make_train_hooks(cfg: TrainConfig) -> TrainHooks:
    """The trainer hooks for ``cfg`` (``engine.sentiment.train`` calls this).

    Balancing or straggling runs get :class:`BalanceHooks`; their ``grad_sync = auto`` means
    ``separate`` (backward under ``no_sync()``, then one all-reduce): with overlapped DDP a fast
    rank's backward would include waiting for the slow one, and every rank would look equally
    slow (:attr:`TrainConfig.sync_mode`). Other runs get the trainer's default (even split)
    hooks. Kept out of :mod:`engine.balance.balancer` so that module stays free of torch for the
    operator side.
    """
    if not (cfg.balance.enabled or cfg.balance.straggle or cfg.balance.emulate_s):
        return TrainHooks()
    return make_hooks(cfg)

"""What the dashboard reads off a RunState: elapsed time, ETA, costs, best metrics, the row.

A mixin of :class:`tui.model.run_state.RunState` (which holds the fields it reads), kept apart
so ingesting events and deriving figures from them each stay one readable module.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from tui.model.dollars import usd_at
from tui.model.records import EpochRow, NodeInfo, StageInfo

if TYPE_CHECKING:
    from tui.model.series import Series

PHASES = ("data", "h2d", "forward", "backward", "allreduce_opt", "eval")
"""Per-rank time phases reported by `phase` events, in display order."""

EMBED_PHASES = ("compute", "comm", "straggle")
"""Per-worker time phases of an embeddings run's `phase` events."""

EMBEDDINGS = "embeddings"
"""The `workload` of an embeddings run's train `stage_start` (sentiment runs carry none)."""

REPLAY_STOPPED = "replay stopped"
"""The status of a replay stopped with `s` before the recording's end (not the run's own)."""
FINAL_STATUSES = ("ok", "failed", "interrupted", "budget", "unfinished", REPLAY_STOPPED)
"""Run statuses after `run_end` (unfinished: the recording stops before the run's end)."""
LIVE_NODE_STATUSES = ("launching", "starting", "ready", "running", "interrupting")
"""Node statuses of a node still at work (the run's end stops it)."""


class RunViews:
    """Derived figures of a run (properties and small queries)."""

    if TYPE_CHECKING:  # the fields RunState holds (declared, documented and set there)
        run_id: str
        profile: str
        world_size: int
        config: dict[str, Any]
        status: str
        start_t: float | None
        last_t: float | None
        end_t: float | None
        workload: str
        train_info: dict[str, Any]
        train_plan: dict[str, Any]
        usd: float
        accrued_usd: float | None
        usd_per_hour: float | None
        projected_usd: float | None
        predicted_epoch_s: float | None
        last_checkpoint: dict[str, Any] | None
        summary: dict[str, Any]
        epochs_seen: int
        resumed_epoch: int
        stages: dict[str, StageInfo]
        nodes: dict[str, NodeInfo]
        epochs: deque[EpochRow]
        train_loss: Series
        test_loss: Series
        epoch_train_loss: Series
        accuracy: Series
        throughput: Series
        cost: Series
        pip_loss: Series
        word_throughput: Series
        rank_throughput: dict[int, Series]
        rank_shares: dict[int, Series]
        _step_clock: list[tuple[float, int]]

    @property
    def elapsed(self) -> float:
        """Seconds from the first to the newest (or the end) event."""
        if self.start_t is None or self.last_t is None:
            return 0.0
        return (self.end_t or self.last_t) - self.start_t

    @property
    def embeddings(self) -> bool:
        """True for an embeddings run (words/s and PIP loss instead of samples/s and accuracy)."""
        return self.workload == EMBEDDINGS

    @property
    def phase_names(self) -> tuple[str, ...]:
        """The phases this run's `phase` events report, in display order."""
        return EMBED_PHASES if self.embeddings else PHASES

    @property
    def total_epochs(self) -> int | None:
        """Planned epochs: the run's config, else the trainer's `train_start` (or `stage_start`)."""
        cfg = self.config
        train = cfg.get("train") if isinstance(cfg.get("train"), dict) else None
        for source in (cfg, train, self.train_info, self.train_plan):
            if isinstance(source, dict) and isinstance(source.get("epochs"), int):
                return int(source["epochs"])
        return None

    @property
    def current_stage(self) -> StageInfo | None:
        """The running stage, else the newest one."""
        for stage in reversed(self.stages.values()):
            if stage.status == "running":
                return stage
        return next(reversed(self.stages.values()), None) if self.stages else None

    @property
    def finished(self) -> bool:
        """True after `run_end`."""
        return self.status in FINAL_STATUSES

    def eta_seconds(self) -> float | None:
        """Estimated seconds left in the run (None when unknown or finished)."""
        if self.finished:
            return None
        stage = self.current_stage
        if stage is not None and stage.name == "train" and len(self._step_clock) == 2:
            (t0, s0), (t1, s1) = self._step_clock  # the step rate since the trainer began
            if s1 > s0 and t1 > t0 and stage.total:
                return max(stage.total - stage.done, 0.0) * (t1 - t0) / (s1 - s0)
        total_epochs = self.total_epochs
        done_epochs = [r.seconds for r in self.epochs if r.seconds]
        if stage is not None and stage.name == "train" and total_epochs and done_epochs:
            mean = sum(done_epochs) / len(done_epochs)
            into = self.predicted_epoch_s or mean
            remaining = max(total_epochs - self.epochs_done, 0)
            return max(remaining * into, 0.0)
        if stage is not None and stage.total and stage.rate:
            return max(stage.total - stage.done, 0.0) / stage.rate
        return None

    @property
    def spent(self) -> float:
        """The running figure: dollars used so far (accrued; billed for older recordings)."""
        return self.usd if self.accrued_usd is None else self.accrued_usd

    def projected_cost(self) -> float | None:
        """Projected total $: used now + $/h x ETA, at least what is billed already (the
        one-minute minimum); the runner's projection when no ETA is known."""
        eta = self.eta_seconds()
        if self.usd_per_hour is not None and eta is not None:
            return max(self.usd, self.spent + self.usd_per_hour * eta / 3600.0)
        return self.projected_usd

    def best(self, metric: str) -> float | None:
        """Best (max) value of an epoch metric such as accuracy or f1."""
        values = [getattr(r, metric) for r in self.epochs if getattr(r, metric) is not None]
        return max(values) if values else None

    def summary_row(self) -> dict[str, Any]:
        """One row for the runs table (summary event values win over derived ones)."""
        s = self.summary
        epochs = [r for r in self.epochs]
        sps = [r.samples_per_s for r in epochs if r.samples_per_s]
        return {
            "run": s.get("run") or self.run_id,
            "profile": s.get("profile") or self.profile,
            "gpus": s.get("world_size") or self.world_size,
            "epochs": s.get("epochs") or self.epochs_done,
            "device": s.get("device") or self.train_plan.get("device") or self._rank_device(),
            "hours": s.get("hours") or self.elapsed / 3600.0,
            "usd": s.get("usd") if s.get("usd") is not None else self.usd,
            "accuracy": s.get("accuracy") or (epochs[-1].accuracy if epochs else None),
            "f1": s.get("f1") or (epochs[-1].f1 if epochs else None),
            "samples_per_s": s.get("samples_per_s") or (sum(sps) / len(sps) if sps else None),
            "status": self.status,
        }

    @property
    def epochs_done(self) -> int:
        """Epochs completed: the highest `epoch` event index + 1, or where the newest checkpoint
        resumes (an interrupted run may have checkpointed an epoch it did not report), or the
        epochs a resumed run's trainer started after."""
        done = max([r.epoch + 1 for r in self.epochs] + [self.resumed_epoch])
        checkpoint = self.last_checkpoint or {}
        resumes = checkpoint.get("epoch")
        return max(done, resumes if isinstance(resumes, int) else 0)

    def _rank_device(self) -> str:
        """The device a `rank_start` named (runs recorded before `train_start` had one)."""
        return next((d for n in self.nodes.values() for d in n.devices.values()), "")

    def usd_at(self, elapsed: Iterable[float]) -> list[float]:
        """Dollars used at each elapsed time (linear between `cost` events)."""
        xs = np.fromiter(elapsed, dtype=np.float64)
        ts, ys = np.asarray(self.cost.t), np.asarray(self.cost.y)
        used: list[float] = usd_at(ts, ys, self.usd_per_hour, xs).tolist()
        return used

    def nbytes(self) -> int:
        """Approximate bytes held by series buffers (for the memory benchmark)."""
        series = [self.train_loss, self.test_loss, self.epoch_train_loss, self.accuracy]
        series += [self.throughput, self.cost, self.pip_loss, self.word_throughput]
        series += list(self.rank_throughput.values()) + list(self.rank_shares.values())
        return sum(s.nbytes() for s in series)

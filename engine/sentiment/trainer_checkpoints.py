"""The trainer's checkpoints: the state rank 0 saves, and how a resumed run takes it back."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from engine.config import TrainConfig
from engine.errors import TrainError
from engine.events import Emitter
from engine.sentiment import checkpoint as ckpt
from engine.sentiment.data import PlanSampler
from engine.sentiment.dist_env import DistEnv
from engine.sentiment.divergence import check_weights
from engine.sentiment.hooks import TrainHooks
from engine.sentiment.metrics import ThresholdClock
from engine.sentiment.model import ModelShape, SentimentLSTM
from engine.sentiment.resume_checks import refuse_fewer_epochs, refuse_other_dataset
from engine.sentiment.selection import BestEpoch
from engine.sentiment.weight_average import WeightAverage

CARRIED = ("samples", "seconds", "loss_sum")
"""What a mid-epoch checkpoint carries of its epoch so far (Trainer.carried)."""


class CheckpointState:
    """Mixin of :class:`engine.sentiment.trainer.Trainer`: save and restore its progress
    (the attributes below are the Trainer's)."""

    cfg: TrainConfig
    env: DistEnv
    emitter: Emitter
    hooks: TrainHooks
    main: bool
    model: SentimentLSTM
    optimizer: torch.optim.Optimizer
    sampler: PlanSampler
    spec: ModelShape
    clock: ThresholdClock
    epoch: int
    global_step: int
    n_train: int
    dataset_record: dict[str, object]
    """engine.sentiment.resume_checks.dataset_stamp of the dataset, taken once at the start."""
    resume_step: int
    resumed_sampler: bool
    samples_seen: int
    train_seconds: float
    prior_wall_s: float
    wall_start: float
    history: list[dict[str, Any]]
    last_test: dict[str, Any] | None
    carried: dict[str, float] | None
    carried_world: int
    epoch_totals: dict[str, float]
    epoch_start: float
    init_facts: dict[str, Any] | None
    last_checkpoint: float
    average: WeightAverage | None
    best: BestEpoch

    def _save_checkpoint(self, epoch: int, step: int) -> None:
        """Rank 0: the state to continue at ``epoch``/``step`` (atomic replace)."""
        if not self.main:
            return
        check_weights(self.model, epoch=epoch, step=step, lr=self.cfg.lr)
        t0 = time.perf_counter()
        state = {
            "format": 2,
            "epoch": epoch,
            "step": step,
            "global_step": self.global_step,
            "world_size": self.env.world,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "sampler": self.sampler.state_dict() if step else None,
            "position": self.sampler.position(step) if step else 0,
            "buckets": self.sampler.buckets,
            "clock": self.clock.state_dict(),
            "history": self.history,
            "train_seconds": self.train_seconds,
            "samples_seen": self.samples_seen,
            "wall_s": self.prior_wall_s + time.time() - self.wall_start,
            "last_test": self.last_test,
            "hooks": self.hooks.state_dict(),
            "spec": self.spec.to_dict(),
            "init_embeddings": self.init_facts,
            "partial": self._partial(step) if step else None,
            "average": self.average.state_dict() if self.average is not None else None,
            "dataset": self.dataset_record,
            "best": self.best.state_dict(),  # the epoch a resumed run may still finish with
        }
        path = ckpt.save_checkpoint(self.cfg.run_dir, state)
        ckpt.clear_request(self.cfg.run_dir)
        self.last_checkpoint = time.monotonic()
        self.emitter.emit(
            "checkpoint",
            epoch=epoch,
            step=step,
            global_step=self.global_step,
            position=state["position"],
            epoch_samples=self.n_train,
            path=str(path),
            seconds=time.perf_counter() - t0,
        )

    def _partial(self, step: int) -> dict[str, float]:
        """The epoch so far at ``step``, for the epoch's record after a resume: samples of all
        ranks, seconds, and a loss sum scaled up from rank 0's own mean loss."""
        done, seen = self.carried or dict.fromkeys(CARRIED, 0.0), self.epoch_totals
        samples = float(self.sampler.position(step))
        mean = seen["loss_sum"] / seen["samples"] if seen["samples"] else 0.0
        return {
            "samples": samples,
            "seconds": done["seconds"] + time.perf_counter() - self.epoch_start,
            "loss_sum": done["loss_sum"] + mean * (samples - done["samples"]),
        }

    def _resume(self) -> None:
        """Load the latest checkpoint (read on rank 0, broadcast to all ranks)."""
        box: list[Any] = [ckpt.load_checkpoint(self.cfg.run_dir) if self.main else None]
        if self.env.world > 1:
            dist.broadcast_object_list(box, src=0)
        state = box[0]
        if state is None:
            return  # nothing saved yet: start fresh
        refuse_other_dataset(state.get("dataset"), self.dataset_record)
        if state["spec"] != self.spec.to_dict():
            now = self.spec.to_dict()
            differ = [k for k in sorted(set(now) | set(state["spec"]))
                      if now.get(k) != state["spec"].get(k)]  # fmt: skip
            shown = ", ".join(
                f"{k} {state['spec'].get(k)!r} then, {now.get(k)!r} now"
                if len(repr(now.get(k))) < 40
                else f"{k} differs"
                for k in differ
            )
            raise TrainError(
                f"the checkpoint in {self.cfg.run_dir} is for another model: {shown}",
                hint="the model settings (or the dataset's vocabulary) changed since it was "
                "saved: resume with the run's own, or use a new run folder",
            )
        refuse_fewer_epochs(int(state["epoch"]), int(state.get("step") or 0), self.cfg.epochs)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch, self.global_step = int(state["epoch"]), int(state["global_step"])
        if state["sampler"] is not None:
            self._resume_sampler(state)
        self.clock.load_state_dict(state["clock"])
        self.history = list(state["history"])
        self.train_seconds = float(state["train_seconds"])
        self.samples_seen = int(state["samples_seen"])
        self.prior_wall_s = float(state["wall_s"])
        self.last_test = state["last_test"]
        self.hooks.load_state_dict(state["hooks"])
        self.best.load_state_dict(state.get("best"))
        self.init_facts = state.get("init_embeddings", self.init_facts)
        if self.average is not None:  # no average kept (it was off then): start it here
            if state.get("average"):
                self.average.load_state_dict(state["average"])
            else:
                self.average = WeightAverage(self.model, self.average.decay)

    def _resume_sampler(self, state: dict[str, Any]) -> None:
        """Continue a checkpoint taken mid-epoch at its global sample position.

        Same world size: the saved plans again (the very same batches). Another world size (a
        node lost): the epoch's permutation from the saved position on, planned for this world
        (the samples before it were consumed; none is repeated or skipped). Length buckets
        turned on or off since: another order, so the epoch is done again from its start.
        """
        step = int(state["step"])
        if state.get("buckets", 0) != self.sampler.buckets:
            return
        if state["world_size"] == self.env.world:
            self.sampler.load_state_dict(state["sampler"])
        elif "position" in state:  # format 2
            epoch, position = int(state["epoch"]), int(state["position"])
            self.sampler.set_epoch(epoch, position=position, step=step)
        else:  # a format-1 checkpoint has no global position: redo the epoch from its start
            return
        self.resume_step, self.resumed_sampler = step, True
        self.carried, self.carried_world = state.get("partial"), int(state["world_size"])

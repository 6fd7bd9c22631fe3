"""The trainer's seams for the load balancer: per-step timings, what hooks may read, and the
default hooks (the even split, nothing else)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config import TrainConfig
from engine.events import Emitter
from engine.sentiment.data import StepPlan, even_plan

PHASES = ("data", "h2d", "forward", "backward", "allreduce_opt")
"""Per-step phases timed on every rank (plus ``eval`` per epoch)."""


@dataclass(slots=True)
class StepTiming:
    """Seconds of one step on this rank (CUDA work is synchronised at each boundary)."""

    epoch: int
    step: int
    samples: int
    data: float = 0.0
    h2d: float = 0.0
    forward: float = 0.0
    backward: float = 0.0
    allreduce_opt: float = 0.0
    loss: float = 0.0

    @property
    def compute(self) -> float:
        """Forward + backward seconds (what the balancer divides by the samples)."""
        return self.forward + self.backward


@dataclass(slots=True)
class HookContext:
    """What hooks may read: the run's shape and its event emitter."""

    cfg: TrainConfig
    rank: int
    world: int
    num_samples: int
    global_batch: int
    emitter: Emitter


class TrainHooks:
    """Seams for the load balancer. The defaults give the even split and do nothing else.

    Every rank calls every hook with identical arguments except ``after_compute``, so plans
    computed from the gathered windows agree without more communication.
    """

    def setup(self, ctx: HookContext) -> None:
        """Called once before training."""
        self.ctx = ctx

    def next_plan(self, epoch: int, start: int) -> StepPlan:
        """The plan covering epoch positions from ``start`` (to the end or a chunk of steps)."""
        c = self.ctx
        return even_plan(c.num_samples - start, c.world, c.global_batch, start)

    def after_compute(self, timing: StepTiming) -> None:
        """After forward+backward, before gradient sync (may sleep: straggler injection)."""

    def end_plan(self, epoch: int, plan: StepPlan, windows: list[dict[str, float]]) -> None:
        """After a plan's steps; ``windows[r]`` = rank r's samples/compute/forward/allreduce
        seconds over them (gathered from every rank)."""

    def summary(self) -> dict[str, Any]:
        """Extra keys for summary.json (the balancer's split and advice)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Saved in checkpoints."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restored on resume."""

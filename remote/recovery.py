"""Recovery policy and bookkeeping: whether a lost node is recovered from, and what it cost.

The training stage (:mod:`remote.train_stage`) asks :meth:`RecoveryLedger.decide` after a node
was lost; the answer is ``shrink``, ``replace`` or a reason to fail. Once training resumed, the
ledger turns what it saw (the loss, the last step, the stored checkpoint the run went back to,
the moment the resumed ranks started) into one ``recovery`` event: what was lost, downtime, work
redone and the dollars that downtime and redone work cost.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from remote.profile_spec import RecoverySpec

Action = Literal["shrink", "replace"]


@dataclass(slots=True)
class StoredCheckpoint:
    """A checkpoint that survives its node (fetched here or written here)."""

    epoch: int
    step: int
    global_step: int
    t: float
    """When rank 0 wrote it (the `checkpoint` event's time)."""
    position: int = 0
    """Samples of the epoch trained before it, over all ranks (0 at an epoch's end)."""
    epoch_samples: int = 0
    """Samples in a whole epoch (0: not said, an older event)."""

    def place(self) -> str:
        """Where a resume continues, in words (see :func:`checkpoint_place`)."""
        return checkpoint_place(self.epoch, self.step, self.position, self.epoch_samples)


def checkpoint_place(epoch: int, step: int, position: int = 0, epoch_samples: int = 0) -> str:
    """A checkpoint's place for people: events count epochs from 0 and a step-0 checkpoint is
    an epoch's end ("after epoch 2"); a mid-epoch one says how much of its epoch it holds, so
    "in epoch 2 at step 38" next to "epochs done: 1" cannot read as a contradiction."""
    if not step:
        return f"after epoch {epoch}"
    where = f"in epoch {epoch + 1} at step {step:,}"
    if epoch_samples > 0 and position >= epoch_samples:
        return where + " (all its samples trained, its evaluation not yet run)"
    if epoch_samples > 0 and position > 0:
        return where + f" ({position:,} of its {epoch_samples:,} samples)"
    return where


@dataclass(slots=True)
class PendingRecovery:
    """A recovery under way: filled when the loss is seen, emitted when training resumes."""

    attempt: int
    lost: list[str]
    cause: str
    action: Action
    detail: str
    lost_at: float
    world_before: int
    usd_per_hour: float
    last_global_step: int
    restored: StoredCheckpoint | None
    replacements: list[str] = field(default_factory=list)
    world_after: int = 0


def classify(exit_code: int, reason: str | None, lost_code: int) -> str:
    """The cause of a node loss in one word for events and the summary."""
    if reason:
        if "spot" in reason:
            return "spot_interruption"
        if "instance" in reason:
            return "instance_terminated"
        return "given_up"
    return "connection_lost" if exit_code == lost_code else "crashed"


class RecoveryLedger:
    """Counts restarts against ``recovery.max_restarts`` and the deadline; builds the events."""

    def __init__(self, spec: RecoverySpec, *, run_started: float) -> None:
        self.spec = spec
        self.run_started = run_started
        self.restarts = 0
        self.done: list[dict[str, Any]] = []
        """Emitted recovery events' fields (ok and failed)."""
        self.pending: PendingRecovery | None = None
        self.checkpoints: list[StoredCheckpoint] = []
        """Stored checkpoints in order (the last is what a restart resumes from)."""
        self.last_global_step = 0
        self.train_started: float | None = None

    # -- what the stream says ------------------------------------------------------------------
    def observe(self, event: Mapping[str, Any]) -> None:
        """Track the last step (work that a loss would throw away)."""
        if event.get("type") == "step" and isinstance(event.get("global_step"), int):
            self.last_global_step = max(self.last_global_step, int(event["global_step"]))

    def stored(self, checkpoint: StoredCheckpoint) -> None:
        """A checkpoint now survives its node."""
        self.checkpoints.append(checkpoint)

    # -- deciding ----------------------------------------------------------------------------
    def decide(self, *, now: float | None = None) -> Action | str:
        """``shrink``/``replace``, or why the run fails instead (a sentence)."""
        now = time.time() if now is None else now
        spec = self.spec
        if spec.on_node_loss == "fail":
            return "recovery.on_node_loss is fail"
        if self.restarts >= spec.max_restarts:
            return f"recovery.max_restarts ({spec.max_restarts}) reached"
        if spec.deadline_min is not None and now - self.run_started > spec.deadline_min * 60:
            return f"past recovery.deadline_min ({spec.deadline_min:g} min after the start)"
        return spec.on_node_loss

    def begin(self, **fields: Any) -> PendingRecovery:
        """Record a loss being recovered from (see :class:`PendingRecovery`)."""
        self.restarts += 1
        self.pending = PendingRecovery(
            attempt=self.restarts,
            last_global_step=self.last_global_step,
            restored=self.checkpoints[-1] if self.checkpoints else None,
            **fields,
        )
        return self.pending

    def resumed(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        """Fields of the ``recovery`` event once the resumed rank 0 reports ``train_start``."""
        rec = self.pending
        if rec is None or event.get("type") != "train_start" or "resumed_epoch" not in event:
            return None
        self.pending = None
        t = float(event.get("t") or time.time())
        restored = rec.restored
        if restored is not None and restored.step and not event.get("resumed_step"):
            # another world size: the trainer went back to the start of the checkpointed epoch
            restored = next(
                (c for c in self.checkpoints if c.epoch == restored.epoch and c.step == 0), None
            )
        since = restored.t if restored is not None else (self.train_started or rec.lost_at)
        redone_s = max(0.0, rec.lost_at - since)
        downtime_s = max(0.0, t - rec.lost_at)
        fields = self._fields(rec, "ok", downtime_s=downtime_s, redone_s=redone_s)
        fields["redone_steps"] = max(
            0, rec.last_global_step - (restored.global_step if restored else 0)
        )
        fields["resumed_epoch"] = event.get("resumed_epoch")
        fields["resumed_step"] = event.get("resumed_step")
        self.last_global_step = restored.global_step if restored else 0  # counted again from here
        self.done.append(fields)
        return fields

    def failed(self, reason: str, *, now: float | None = None) -> dict[str, Any] | None:
        """Fields of a failed ``recovery`` event (the restart itself failed)."""
        rec = self.pending
        if rec is None:
            return None
        self.pending = None
        now = time.time() if now is None else now
        fields = self._fields(rec, "failed", downtime_s=max(0.0, now - rec.lost_at), redone_s=0)
        fields["reason"] = reason
        self.done.append(fields)
        return fields

    def _fields(
        self, rec: PendingRecovery, status: str, *, downtime_s: float, redone_s: float
    ) -> dict[str, Any]:
        usd = rec.usd_per_hour * (downtime_s + redone_s) / 3600.0
        restored = rec.restored
        return {
            "attempt": rec.attempt,
            "status": status,
            "lost": list(rec.lost),
            "cause": rec.cause,
            "detail": rec.detail,
            "action": rec.action,
            "replacements": list(rec.replacements),
            "world_size_before": rec.world_before,
            "world_size": rec.world_after,
            "checkpoint": None if restored is None else _where(restored),
            "downtime_s": round(downtime_s, 3),
            "redone_s": round(redone_s, 3),
            "usd": round(usd, 6),
        }

    def summary(self) -> dict[str, Any]:
        """Totals for summary.json: recoveries, downtime_s, redone_s, usd_lost, events."""
        ok = [r for r in self.done if r["status"] == "ok"]
        return {
            "recoveries": len(ok),
            "failed_recoveries": len(self.done) - len(ok),
            "downtime_s": round(sum(r["downtime_s"] for r in self.done), 3),
            "redone_s": round(sum(r["redone_s"] for r in self.done), 3),
            "usd_lost": round(sum(r["usd"] for r in self.done), 6),
            "events": list(self.done),
        }


def _where(checkpoint: StoredCheckpoint) -> dict[str, int]:
    c = checkpoint
    return {"epoch": c.epoch, "step": c.step, "global_step": c.global_step}

"""RunRecord: what the review needs from one run, recorded in a run folder or imported."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Billing = Literal["per_second", "hours_2dp"]
Mode = Literal["strong", "weak"]
BILLINGS: tuple[str, ...] = ("per_second", "hours_2dp")
"""per_second: EC2 per-second billing, 60 s minimum; hours_2dp: hours rounded to 0.01 x rate
(how the old study priced its table)."""


def last_epoch_accuracy(summary: dict[str, Any]) -> tuple[float, int] | None:
    """(test accuracy, epoch number from 1) of the last evaluated epoch of a run stopped
    before its end (summary ``train.partial``), which has no accuracy of its own: the trainer
    picks and blends its model only at its end. None for any other run."""
    found = last_evaluated_epoch(summary)
    return None if found is None else (float(found[0]["accuracy"]), found[1])


def last_evaluated_epoch(summary: dict[str, Any]) -> tuple[dict[str, Any], int] | None:
    """The record and number (from 1) of the last epoch with a test accuracy of a run stopped
    before its end (see :func:`last_epoch_accuracy`), None for any other run."""
    train = summary.get("train")
    if summary.get("accuracy") is not None or not isinstance(train, dict):
        return None
    found = train.get("per_epoch") if train.get("partial") else None
    epochs: list[Any] = found if isinstance(found, list) else []
    for epoch in reversed(epochs):
        value = epoch.get("accuracy") if isinstance(epoch, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            number = epoch.get("epoch")
            return epoch, (number + 1 if isinstance(number, int) else len(epochs))
    return None


@dataclass(slots=True)
class RunRecord:
    """One run as the review sees it (from a run folder or a CSV row)."""

    run_id: str
    source: Literal["folder", "csv"]
    path: Path
    """The run folder, or the CSV file."""
    profile: str
    provider: str
    status: str
    instance_type: str | None
    """Priced instance type (None: unpriced local machine)."""
    instances: int
    """Machines of the configuration."""
    workers: int
    """Training processes (= GPUs on GPU clusters)."""
    gpus: int
    gpu_model: str
    """GPU model, '' for CPU training."""
    usd_per_hour: float
    """Price of the whole configuration per hour."""
    epochs: int
    epoch_seconds: list[float]
    """Training seconds of each epoch (CSV: total / epochs)."""
    line: int | None = None
    """CSV line of an imported row."""
    billing: Billing = "per_second"
    mode: Mode = "strong"
    sweep: str | None = None
    leftovers: bool = False
    """Its cloud machines could not be terminated when it ended (summary.json ``leftovers``):
    they may still bill until `sentitop teardown` terminates them."""
    groups: str = ""
    """Its machines when they are not one on-demand group of one type: '1×g5.xlarge +
    2×g4dn.xlarge spot' (the planner's label of such a profile); '' otherwise."""
    wall_s: float | None = None
    eval_s: float = 0.0
    """Evaluation seconds over the run."""
    prep_s: float = 0.0
    """Synthetic generation + preprocessing seconds (0 when cached)."""
    data_cached: bool = False
    time_to_threshold_s: float | None = None
    loss_threshold: float | None = None
    accuracy: float | None = None
    f1: float | None = None
    samples_per_s: float | None = None
    n_train: int | None = None
    global_batch: int | None = None
    threads: int | None = None
    """torch threads per rank (from the trainer's `train_start` event)."""
    mixed_world: bool = False
    """A recovery changed its number of ranks mid-training (summary ``world_sizes``): its
    epoch times belong to no one configuration, so no fit or speedup uses them."""
    stopped_accuracy: tuple[float, int] | None = None
    """A run stopped before its end: its last evaluated epoch's (accuracy, epoch from 1)."""
    epochs_left_out: int = 0
    """Epochs of a `sentitop train --resume`d folder left out of epoch_seconds: split by a
    mid-epoch resume, or trained on another number of ranks than its last."""
    usd: float | None = None
    """Recorded (metered) or published cost of the whole run."""
    started: float | None = None
    note: str = ""
    phases: list[dict[str, Any]] = field(default_factory=list)
    """`phase` events (per rank per epoch: compute and all-reduce seconds)."""
    curve: list[tuple[float, float]] = field(default_factory=list)
    """(seconds since training began, smoothed train loss) from `step` events."""
    workload: str = ""
    """Model + sequence settings: runs with the same workload share per-sample costs."""
    data_key: str = ""
    """Data + preprocessing settings: runs with the same key train on the same samples."""
    task: str = "sentiment"
    """What the run trained: sentiment, or embeddings (summary.json's `workload`)."""
    words_per_s: float | None = None
    """Embeddings runs: corpus words per training second."""
    pip_loss: float | None = None
    """Embeddings runs: final PIP loss against the SPPMI reference."""
    pip_loss_initial: float | None = None
    """Embeddings runs: PIP loss of the random start (what training improved on)."""
    embed_mode: str = ""
    """Embeddings runs: sync, async or svd (summary.json ``mode``); '' for sentiment runs."""
    recoveries: int = 0
    """Lost nodes the run recovered from (summary.json ``recoveries``)."""
    downtime_s: float = 0.0
    """Seconds the run stood still recovering (summary.json ``downtime_s``)."""
    usd_lost: float = 0.0
    """Dollars the recoveries cost: downtime and redone work at the run's rate."""
    resumed_from: str | None = None
    """The stopped run it continued (summary.json ``resumed_from``; see remote.resume_chain)."""
    straggle: str = ""
    """Injected straggle of its ranks (`--straggle R:F`, e.g. "1:3"): an experiment on the load
    balancer, not the hardware's speed, so a configuration of its own."""
    epochs_in_events: int = 0
    """Epochs its events show done (`epoch` events, or where the newest checkpoint resumes):
    what a run stopped before its trainer's summary trained."""

    @property
    def train_s(self) -> float:
        """Training seconds over all epochs."""
        return sum(self.epoch_seconds)

    @property
    def epoch_s(self) -> float:
        """Mean training seconds of one epoch."""
        return self.train_s / len(self.epoch_seconds) if self.epoch_seconds else math.nan

    @property
    def hardware(self) -> str:
        """What a worker runs on: the GPU model, 'local CPU', 'ssh CPU' (the planner's class
        of an SSH profile without GPUs: its runs read 'CPU ?' and were never matched to it),
        or the CPU instance type."""
        if self.gpu_model:
            return self.gpu_model
        if self.provider == "local" or (self.provider == "ssh" and not self.instance_type):
            return f"{self.provider} CPU"
        return f"CPU {self.instance_type or '?'}"

    @property
    def label(self) -> str:
        """Configuration label: '4×g3.4xlarge', 'local ×2 proc'; an embeddings run's names its
        mode ('local ×2 proc, async'): sync and async runs are never one configuration; a run
        with injected straggle names it ('local ×2 proc, straggle 1:3')."""
        mode = f", {self.embed_mode}" if self.embed_mode else ""
        mode += f", straggle {self.straggle}" if self.straggle else ""
        if self.provider == "local":
            return f"local ×{self.workers} proc{mode}"
        base = self.groups or (
            f"{self.instances}×{self.instance_type}" if self.instance_type else self.profile
        )
        return (base if self.gpus == self.workers else f"{base} ({self.workers} proc)") + mode


def groups_label(groups: list[tuple[str, int, bool]]) -> str:
    """'1×g5.xlarge + 2×g4dn.xlarge spot' of (instance type, count, spot) machine groups when
    they are not one on-demand group of one type; '' otherwise (then 'N×TYPE' is the label)."""
    if len(groups) < 2 and not any(spot for _, _, spot in groups):
        return ""
    return " + ".join(f"{count}×{name}{' spot' if spot else ''}" for name, count, spot in groups)

"""RunState: everything the dashboard and the headless CLI know about one run, from its events.

Pure Python (no textual, no torch): feed it events with :meth:`RunState.ingest` and read its
fields. Memory is bounded: series thin themselves, tables and logs keep the newest rows only.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.errors import peer_lost
from engine.events import parse_event_line
from tui.format import after_training_line, companion_line, fmt, fmt_duration, preprocess_line
from tui.model.event_text import checkpoint_where, readable_line, stage_ended, stage_started
from tui.model.records import (
    EpochRow,
    LogLine,
    NodeInfo,
    StageInfo,
    device_label,
    epoch_row,
    node_row,
)
from tui.model.run_views import EMBEDDINGS, FINAL_STATUSES, LIVE_NODE_STATUSES, PHASES, RunViews
from tui.model.series import DEFAULT_CAPACITY, Series

_NUMBER_TYPES = (int, float)


def _num(value: Any) -> float | None:
    """A float for int/float values (not bool), else None."""
    return float(value) if value.__class__ in _NUMBER_TYPES else None


@dataclass
class RunState(RunViews):
    """The state of one run, built by ingesting its events in order."""

    capacity: int = DEFAULT_CAPACITY
    """Points kept per series before it thins itself."""
    log_lines: int = 500
    """Log lines kept."""
    max_epochs_kept: int = 2_000
    """Epoch rows kept."""

    run_id: str = ""
    profile: str = ""
    world_size: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    status: str = "waiting"
    """waiting | running | ok | failed | interrupted | budget."""
    reason: str = ""
    start_t: float | None = None
    last_t: float | None = None
    end_t: float | None = None
    epoch: int = 0
    global_step: int = 0
    lr: float | None = None
    samples_per_s: float | None = None
    read_mb_s: float | None = None
    """MB/s the training ranks read from their data (all ranks; newest `step` event)."""
    disk_mb_s: float | None = None
    """MB/s of that fetched from storage, i.e. missed in the page cache (newest `step`)."""
    rank_rss_mb: dict[int, float] = field(default_factory=dict)
    """rank -> anonymous resident memory (RssAnon, MB), from `step` or `phase` events."""
    workload: str = "sentiment"
    """sentiment | embeddings (from the train `stage_start`'s `workload`)."""
    train_info: dict[str, Any] = field(default_factory=dict)
    """Embeddings runs: mode, encoder, dim, batch, vocab, workers of the train `stage_start`."""
    words_per_s: float | None = None
    """Embeddings runs: the newest words/s of a `step` event."""
    usd: float = 0.0
    """Billed so far: what stopping now would cost (with the one-minute minimum)."""
    accrued_usd: float | None = None
    """Price x seconds used so far, no minimum (None for runs recorded before it existed)."""
    usd_per_hour: float | None = None
    projected_usd: float | None = None
    shares: list[float] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    predicted_epoch_s: float | None = None
    train_plan: dict[str, Any] = field(default_factory=dict)
    """The trainer's `train_start`: epochs, steps_per_epoch, total_steps, balancer, device..."""
    threshold: dict[str, Any] | None = None
    last_checkpoint: dict[str, Any] | None = None
    recoveries: list[dict[str, Any]] = field(default_factory=list)
    """`recovery` events (lost nodes recovered from, or failed recoveries), with ``rel`` time."""
    summary: dict[str, Any] = field(default_factory=dict)
    events_seen: int = 0
    epochs_seen: int = 0
    """Epoch events ingested (the epochs deque keeps the newest max_epochs_kept)."""
    resumed_epoch: int = 0
    """Epochs done before the trainer started (`train_start` ``resumed_epoch``): a resumed
    run's first epoch event is not its first epoch."""
    resumed_from: str = ""
    """The run whose checkpoint this one resumes (`run_start` ``resumed_from``)."""
    version: int = 0
    """Bumped by every ingest call, so views can skip redraws."""

    def __post_init__(self) -> None:
        cap = self.capacity
        self.stages: dict[str, StageInfo] = {}
        self.nodes: dict[str, NodeInfo] = {}
        self._instance_nodes: dict[str, str] = {}  # EC2 instance id -> its node's row
        self.epochs: deque[EpochRow] = deque(maxlen=self.max_epochs_kept)
        self.log: deque[LogLine] = deque(maxlen=self.log_lines)
        self.errors: deque[dict[str, Any]] = deque(maxlen=50)
        self.warnings: deque[dict[str, Any]] = deque(maxlen=50)
        """`warning` events: data-quality gates, a model that does not beat the majority rate."""
        self.counts: dict[str, int] = {}
        self.train_loss = Series("train loss", cap)
        self.test_loss = Series("test loss", cap)
        self.epoch_train_loss = Series("train loss (epoch)", cap)
        self.accuracy = Series("accuracy", cap)
        self.throughput = Series("total", cap)
        self.pip_loss = Series("PIP loss", cap)
        """Embeddings runs: PIP loss per epoch (the initial value at step 0 first)."""
        self.word_throughput = Series("words/s", cap)
        """Embeddings runs: words/s of `step` events."""
        self.cost = Series("$", cap)
        """Dollars used over time (accrued_usd; billed usd for runs recorded without it)."""
        self._step_clock: list[tuple[float, int]] = []
        """(t, global_step) of `train_start` and of the newest `step` (the step rate)."""
        self.rank_throughput: dict[int, Series] = {}
        self.rank_shares: dict[int, Series] = {}
        self.phase_last: dict[int, dict[str, float]] = {}
        """rank -> phase -> seconds, for the newest epoch with phase data."""
        self.phase_epoch: int | None = None
        self.phase_totals: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        """Seconds per phase summed over ranks and epochs."""
        self.lock = threading.RLock()
        """Held while ingesting; views hold it while copying data out."""
        self._handlers: dict[str, Callable[[Mapping[str, Any], float], None]] = {
            "run_start": self._on_run_start,
            "run_end": self._on_run_end,
            "stage_start": self._on_stage_start,
            "stage_end": self._on_stage_end,
            "train_start": self._on_train_start,
            "progress": self._on_progress,
            "step": self._on_step,
            "epoch": self._on_epoch,
            "phase": self._on_phase,
            "balance": self._on_balance,
            "threshold": self._on_threshold,
            "checkpoint": self._on_checkpoint,
            "after_training": self._on_after_training,
            "node": self._on_node,
            "rank_start": self._on_rank_start,
            "cost": self._on_cost,
            "error": self._on_error,
            "warning": self._on_warning,
            "summary": self._on_summary,
            "log": self._on_log,
            "recovery": self._on_recovery,
        }

    # ----------------------------------------------------------------- ingest
    def ingest(self, event: Mapping[str, Any]) -> None:
        """Apply one event (unknown types are counted and otherwise ignored)."""
        with self.lock:
            self._ingest(event)
            self.version += 1

    def ingest_many(self, events: Iterable[Mapping[str, Any]]) -> int:
        """Apply events in order under one lock; returns how many were applied."""
        n = 0
        with self.lock:
            for event in events:
                self._ingest(event)
                n += 1
            self.version += 1
        return n

    def add_log(self, source: str, text: str, level: str = "info", t: float | None = None) -> None:
        """Add a plain log line (e.g. a node's stdout line that is not an event); a line that
        still holds an event's JSON (behind a prefix) is shown as that event's readable text."""
        text, said_level = readable_line(text.rstrip())
        with self.lock:
            rel = self._rel(t) if t is not None else self.elapsed
            self.log.append(LogLine(rel, source, text, said_level or level))
            node = self.nodes.get(source)
            if node is not None:
                node.last_line = text
            self.version += 1

    def _ingest(self, event: Mapping[str, Any]) -> None:
        type_ = event.get("type")
        if type_.__class__ is not str:
            return
        self.events_seen += 1
        counts = self.counts
        counts[type_] = counts.get(type_, 0) + 1
        t = event.get("t")
        if t.__class__ in _NUMBER_TYPES:
            if self.start_t is None:
                self.start_t = t
            if self.last_t is None or t > self.last_t:
                self.last_t = t
            rel = t - self.start_t
        else:
            rel = self.elapsed
        handler = self._handlers.get(type_)
        if handler is not None:
            handler(event, rel)

    def _rel(self, t: float | None) -> float:
        if t is None or self.start_t is None:
            return self.elapsed
        return t - self.start_t

    def _log(self, rel: float, source: str, text: str, level: str = "info") -> None:
        self.log.append(LogLine(rel, source, text, level))

    def _stage(self, name: str) -> StageInfo:
        stage = self.stages.get(name)
        if stage is None:
            stage = self.stages[name] = StageInfo(name)
        return stage

    def _on_run_start(self, ev: Mapping[str, Any], rel: float) -> None:
        self.run_id = str(ev.get("run") or self.run_id)
        self.profile = str(ev.get("profile") or self.profile)
        self.world_size = int(ev.get("world_size") or self.world_size or 0)
        cfg = ev.get("config")
        if isinstance(cfg, dict):
            self.config = cfg
        self.status = "running"
        ranks = f"{self.world_size} rank{'s' if self.world_size != 1 else ''}"
        self._log(rel, "run", f"run {self.run_id} started ({self.profile}, {ranks})")
        if isinstance(earlier := ev.get("resumed_from"), str) and earlier:  # it was never said
            self.resumed_from = earlier
            self._log(rel, "run", f"it resumes run {earlier} from that run's checkpoint")

    def _on_run_end(self, ev: Mapping[str, Any], rel: float) -> None:
        self.status = str(ev.get("status") or "ok")
        self.reason = str(ev.get("reason") or "")
        self.end_t = _num(ev.get("t")) or self.last_t
        level = "info" if self.status == "ok" else "error"
        text = f"run ended: {self.status}" + (f" ({self.reason})" if self.reason else "")
        self._log(rel, "run", text, level)
        self._close_open_parts()

    def _close_open_parts(self) -> None:
        """The run ended: a stage or node still at work ends with it (a stopped run's train
        stage reads stopped, not running at 51%; its nodes read stopped)."""
        for stage in self.stages.values():
            if stage.status == "running":
                stage.status = self.status
                if stage.seconds is None and stage.started_t is not None and self.end_t:
                    stage.seconds = max(self.end_t - stage.started_t, 0.0)
        for node in self.nodes.values():
            if node.status in LIVE_NODE_STATUSES:
                node.status = "done" if self.status == "ok" else "stopped"

    def end_feed(self, status: str, reason: str) -> None:
        """The feed stopped without a `run_end` (a recording cut short, a runner that raised):
        end the run as ``status`` so it never keeps reading running. No-op once ended."""
        with self.lock:
            if self.finished:
                return
            self.status, self.reason = status, reason
            self.end_t = self.last_t
            self._log(self.elapsed, "run", f"run ended: {status} ({reason})", "error")
            self._close_open_parts()
            self.version += 1

    def _legacy_trainer_stage(self, ev: Mapping[str, Any]) -> bool:
        """A trainer's train `stage_*` under a runner (recorded before `train_start`): no stage."""
        return (
            "rank" in ev
            and ev.get("stage") == "train"
            and ev.get("workload") != EMBEDDINGS
            and "run_start" in self.counts
        )

    def _on_stage_start(self, ev: Mapping[str, Any], rel: float) -> None:
        if self._legacy_trainer_stage(ev):
            self._on_train_start(ev, rel)
            return
        stage = self._stage(str(ev.get("stage") or "?"))
        stage.status = "running"
        stage.started_t = _num(ev.get("t"))
        if self.status == "waiting":
            self.status = "running"
        if ev.get("workload") == EMBEDDINGS:
            self._on_embeddings_start(ev, rel)
        elif stage.name == "prepare" and "run_start" not in self.counts:
            self.workload = EMBEDDINGS  # `sentitop embed`'s first stage (stopped before train?)
        self._log(rel, "run", stage_started(stage.name))

    def _on_embeddings_start(self, ev: Mapping[str, Any], rel: float) -> None:
        self.workload = EMBEDDINGS
        keys = ("mode", "encoder", "dim", "batch", "epochs", "vocab", "workers")
        self.train_info = {k: ev[k] for k in keys if k in ev}
        if not self.world_size and (world := _num(ev.get("world_size"))):
            self.world_size = int(world)
        pip0 = _num(ev.get("pip_loss"))
        if pip0 is not None:
            self.pip_loss.append(rel, pip0, float(self.global_step))

    def _on_stage_end(self, ev: Mapping[str, Any], rel: float) -> None:
        if self._legacy_trainer_stage(ev):
            return
        stage = self._stage(str(ev.get("stage") or "?"))
        stage.status = str(ev.get("status") or "ok")
        stage.seconds = _num(ev.get("seconds"))
        if stage.total is not None and stage.status == "ok":
            stage.done = stage.total
        level = "info" if stage.status == "ok" else "error"
        self._log(rel, "run", stage_ended(stage.name, stage.status, stage.seconds), level)
        last = stage.name == "train" or stage.status not in ("ok", "cached")
        if self.embeddings and last and "run_start" not in self.counts:
            # `sentitop embed` has no runner (no run_end): its train stage's end ends the run,
            # as does a prepare stage that did not end well
            self.status = stage.status if stage.status in FINAL_STATUSES else "failed"
            self.end_t = _num(ev.get("t")) or self.last_t

    def _on_train_start(self, ev: Mapping[str, Any], rel: float) -> None:
        """The trainer's plan: the train stage counts steps from here (and epochs)."""
        self.train_plan = {k: v for k, v in ev.items() if k not in ("type", "t", "run", "node")}
        self.resumed_epoch = max(self.resumed_epoch, int(_num(ev.get("resumed_epoch")) or 0))
        stage = self._stage("train")
        if stage.status == "pending":
            stage.status = "running"  # `sentitop train`: no launcher says the stage began
        total, per_epoch = _num(ev.get("total_steps")), _num(ev.get("steps_per_epoch"))
        first = (_num(ev.get("resumed_epoch")) or 0) * (per_epoch or 0)
        first += _num(ev.get("resumed_step")) or 0
        stage.total, stage.done, stage.unit = total, min(first, total or first), "steps"
        self.global_step = max(self.global_step, int(first))  # a resumed run read "step 0"
        self._step_clock = [(t, int(first))] if (t := _num(ev.get("t"))) is not None else []
        if not self.world_size and (world := _num(ev.get("world_size"))):
            self.world_size = int(world)
        if first:
            self._log(rel, "train", f"training continues from the checkpoint at step {first:,.0f}")

    @property
    def balancer_off(self) -> bool:
        """True when the trainer said it splits the data evenly (no `balance` events come)."""
        return self.train_plan.get("balancer") is False

    def _on_progress(self, ev: Mapping[str, Any], rel: float) -> None:
        stage = self._stage(str(ev.get("stage") or "?"))
        if stage.status == "pending":
            stage.status = "running"
        stage.done = _num(ev.get("done")) or 0.0
        stage.total = _num(ev.get("total"))
        stage.unit = str(ev.get("unit") or stage.unit)
        stage.rate = _num(ev.get("rate"))

    def _on_step(self, ev: Mapping[str, Any], rel: float) -> None:
        get: Callable[[str], Any] = ev.get
        gs = get("global_step")
        if gs.__class__ in _NUMBER_TYPES:
            self.global_step = int(gs)
        epoch = get("epoch")
        if epoch.__class__ in _NUMBER_TYPES:
            self.epoch = int(epoch)
        step = float(self.global_step)
        loss = get("loss")
        if loss.__class__ in _NUMBER_TYPES:
            self.train_loss.append(rel, loss, step)
        sps = get("samples_per_s")
        if sps.__class__ in _NUMBER_TYPES:
            self.samples_per_s = sps
            self.throughput.append(rel, sps, step)
        lr = get("lr")
        if lr.__class__ in _NUMBER_TYPES:
            self.lr = lr
        wps = get("words_per_s")
        if wps.__class__ in _NUMBER_TYPES:
            self.words_per_s = wps
            self.word_throughput.append(rel, wps, step)
        for name in ("read_mb_s", "disk_mb_s"):
            value = get(name)
            if value.__class__ in _NUMBER_TYPES:
                setattr(self, name, float(value))
        self._rss(get("rss_mb"))
        per_rank = get("rank_samples_per_s")
        if per_rank.__class__ is list:
            for rank, value in enumerate(per_rank):
                if (v := _num(value)) is not None:
                    self._rank_series(self.rank_throughput, rank).append(rel, v, step)
        if self.train_plan and gs.__class__ is int:
            self._advance_train(get("t"), gs, rel)

    def _advance_train(self, t: Any, global_step: int, rel: float) -> None:
        """Steps done in the train stage, the step rate, and (balancer off) the equal shares."""
        stage, gs = self.stages.get("train"), float(global_step)
        if stage is not None and stage.status == "running":
            stage.done, stage.total = gs, max(stage.total or 0.0, gs)
        if t.__class__ in _NUMBER_TYPES and self._step_clock:
            self._step_clock[1:] = [(t, global_step)]
        if self.balancer_off and self.world_size:
            for rank in range(self.world_size):
                self._rank_series(self.rank_shares, rank).append(rel, 1 / self.world_size, gs)

    def _on_epoch(self, ev: Mapping[str, Any], rel: float) -> None:
        row = epoch_row(ev)
        if row is None:  # a damaged line: not an epoch "1" of dashes
            self._log(rel, "events", f"an epoch event without an epoch number "
                      f"({ev.get('epoch')!r}) was left out", "warning")  # fmt: skip
            return
        self.epochs.append(row)
        self.epochs_seen += 1
        self.epoch = max(self.epoch, row.epoch)
        step = float(self.global_step)
        if row.test_loss is not None:
            self.test_loss.append(rel, row.test_loss, step)
        if row.train_loss is not None:
            self.epoch_train_loss.append(rel, row.train_loss, step)
        if row.accuracy is not None:
            self.accuracy.append(rel, row.accuracy, step)
        if row.pip_loss is not None:
            self.pip_loss.append(rel, row.pip_loss, step)
        total = self.total_epochs
        parts = [f"epoch {row.epoch + 1}{f'/{total}' if total else ''} done"]
        if row.accuracy is not None:
            parts.append(f"acc {row.accuracy:.3f}")
        if row.f1 is not None:
            parts.append(f"F1 {row.f1:.3f}")
        if row.pip_loss is not None:
            parts.append(f"PIP loss {row.pip_loss:.4g}")
        if row.seconds is not None:
            parts.append(fmt_duration(row.seconds))
        self._log(rel, "train", ", ".join(parts))

    def _rss(self, per_rank: Any) -> None:
        if per_rank.__class__ is list:
            for rank, value in enumerate(per_rank):
                if (v := _num(value)) is not None:
                    self.rank_rss_mb[rank] = v

    def _on_phase(self, ev: Mapping[str, Any], rel: float) -> None:
        rank = int(_num(ev.get("rank")) or 0)
        if (rss := _num(ev.get("rss_mb"))) is not None:
            self.rank_rss_mb[rank] = rss
        epoch = _num(ev.get("epoch"))
        if epoch is not None and (self.phase_epoch is None or int(epoch) > self.phase_epoch):
            self.phase_epoch = int(epoch)
            self.phase_last = {}
        values = {p: _num(ev.get(p)) or 0.0 for p in self.phase_names}
        if epoch is None or int(epoch) == self.phase_epoch:
            self.phase_last[rank] = values
        for p, v in values.items():
            self.phase_totals[p] = self.phase_totals.get(p, 0.0) + v

    def _on_balance(self, ev: Mapping[str, Any], rel: float) -> None:
        step_v = _num(ev.get("step"))
        step = float(self.global_step) if step_v is None else step_v
        shares = ev.get("shares")
        if isinstance(shares, list):
            self.shares = [_num(s) or 0.0 for s in shares]
            for rank, share in enumerate(self.shares):
                self._rank_series(self.rank_shares, rank).append(rel, share, step)
        sizes = ev.get("batch_sizes")
        if isinstance(sizes, list):
            self.batch_sizes = [int(_num(b) or 0) for b in sizes]
        sps = ev.get("sec_per_sample")
        if isinstance(sps, list) and ev.get("rank_samples_per_s") is None:
            for rank, value in enumerate(sps):
                v = _num(value)
                if v:
                    self._rank_series(self.rank_throughput, rank).append(rel, 1.0 / v, step)
        self.predicted_epoch_s = _num(ev.get("predicted_epoch_s")) or self.predicted_epoch_s

    def _on_threshold(self, ev: Mapping[str, Any], rel: float) -> None:
        self.threshold = dict(ev)
        limit, secs = _num(ev.get("threshold")), _num(ev.get("seconds"))
        loss, epoch = _num(ev.get("loss")), _num(ev.get("epoch"))
        text = f"smoothed loss {fmt(loss, '.4f')} below the threshold {fmt(limit, '.4g')}"
        text += f" after {fmt_duration(secs)}"
        self._log(
            rel, "train", text + (f", in epoch {int(epoch) + 1}" if epoch is not None else "")
        )

    def _on_checkpoint(self, ev: Mapping[str, Any], rel: float) -> None:
        self.last_checkpoint = dict(ev)
        # where a resume continues (docs/EVENTS.md "Numbering"); the newest step count too
        self.global_step = max(self.global_step, int(_num(ev.get("global_step")) or 0))
        self._log(rel, "train", f"checkpoint saved {checkpoint_where(ev)}")

    def _on_node(self, ev: Mapping[str, Any], rel: float) -> None:
        name = str(ev.get("node") or "?")
        node = node_row(self.nodes, self._instance_nodes, name, ev.get("instance"))
        node.status = str(ev.get("status") or node.status)
        if not node.devices:  # what the node's ranks said they run on wins
            node.gpu = str(ev.get("gpu") or node.gpu)
        node.detail = str(ev.get("detail") or "")
        level = "error" if node.status in ("lost", "failed", "error") else "info"
        self._log(rel, name, f"{node.status} {node.detail}".strip(), level)

    def _on_recovery(self, ev: Mapping[str, Any], rel: float) -> None:
        self.recoveries.append({**ev, "rel": rel})
        lost = ", ".join(str(n) for n in ev.get("lost") or []) or "?"
        text = (
            f"recovery {ev.get('attempt')}: lost {lost} ({ev.get('cause')}), "
            f"{ev.get('action')} -> {ev.get('world_size')} ranks, down "
            f"{float(ev.get('downtime_s') or 0):.0f} s, redone {float(ev.get('redone_s') or 0):.0f}"
            f" s, ${float(ev.get('usd') or 0):.4f}"
        )
        if ev.get("status") != "ok":
            text = f"recovery {ev.get('attempt')} FAILED (lost {lost}): {ev.get('reason')}"
        self._log(rel, "run", text, "warn" if ev.get("status") == "ok" else "error")

    def _on_rank_start(self, ev: Mapping[str, Any], rel: float) -> None:
        rank, name = ev.get("rank"), ev.get("node")
        if not isinstance(rank, int) or not isinstance(name, str):
            return  # a rank started without a launcher: no node to place it on
        node = self.nodes.get(name)
        if node is None:
            node = self.nodes[name] = NodeInfo(name, status="running")
        if rank not in node.ranks:
            node.ranks.append(rank)
            node.ranks.sort()
        device = ev.get("device_name") or ev.get("device")
        if isinstance(device, str):
            node.devices[rank] = device
            node.gpu = device_label(node.devices.values())

    def _on_cost(self, ev: Mapping[str, Any], rel: float) -> None:
        usd, accrued = _num(ev.get("usd")), _num(ev.get("accrued_usd"))
        if usd is not None:
            self.usd = usd
        if accrued is not None:
            self.accrued_usd = accrued
        used = accrued if accrued is not None else usd
        if used is not None:
            elapsed = _num(ev.get("elapsed_s"))
            self.cost.append(rel if elapsed is None else elapsed, used, float(self.global_step))
        self.usd_per_hour = _num(ev.get("usd_per_hour")) or self.usd_per_hour
        self.projected_usd = _num(ev.get("projected_usd")) or self.projected_usd

    def _on_error(self, ev: Mapping[str, Any], rel: float) -> None:
        self.errors.append(dict(ev))
        source = str(ev.get("node") or (f"rank {ev['rank']}" if "rank" in ev else "run"))
        message, lost = str(ev.get("message") or "error"), peer_lost(str(ev.get("message")))
        lost_text = "lost its connection to another node (not the cause): "  # a survivor's
        self._log(
            rel, source, lost_text + message if lost else message, "warn" if lost else "error"
        )
        tail = ev.get("tail")
        if isinstance(tail, list) and not lost:
            # the node's last output lines: its events are in the log already, in their own
            # words; show what else it printed (a traceback), events in prefixed lines readable
            said = [str(ln) for ln in tail if parse_event_line(str(ln)) is None][-5:]
            for line in said:
                self._log(rel, source, f"  {readable_line(line)[0]}", "error")

    def _on_warning(self, ev: Mapping[str, Any], rel: float) -> None:
        self.warnings.append(dict(ev))
        source = str(ev.get("node") or ev.get("stage") or "run")
        self._log(rel, source, f"warning: {ev.get('message') or ev.get('code')}", "warn")

    def _on_after_training(self, ev: Mapping[str, Any], rel: float) -> None:
        if ev.get("fits"):
            self._log(rel, "train", after_training_line(ev))

    def _on_summary(self, ev: Mapping[str, Any], rel: float) -> None:
        self.summary.update({k: v for k, v in ev.items() if k not in ("type", "t")})
        if ev.get("stage") == "preprocess":
            self._log(rel, "preprocess", preprocess_line(ev))
        if ev.get("stage") != "train" or self.embeddings:
            return
        final_rate = _num(ev.get("samples_per_s"))
        if final_rate:  # the run's own figure, as summary.json and `runs` give it
            self.samples_per_s = final_rate
        companion = ev.get("companion")
        if isinstance(companion, Mapping):
            self._log(rel, "train", f"linear companion: {companion_line(companion)}")
        if "run_start" not in self.counts:  # `sentitop train`: no runner, the summary ends it
            stage, status = self._stage("train"), str(ev.get("status") or "ok")
            stage.status, stage.seconds = status, _num(ev.get("wall_s"))
            if stage.total is not None and status == "ok":
                stage.done = stage.total
            self.status = status if status in FINAL_STATUSES else "failed"
            self.end_t = _num(ev.get("t")) or self.last_t

    def _on_log(self, ev: Mapping[str, Any], rel: float) -> None:
        source = str(ev.get("node") or ev.get("rank") or "log")
        text, said_level = readable_line(str(ev.get("line") or ev.get("message") or ""))
        self._log(rel, source, text, said_level or str(ev.get("level") or "info"))
        node = self.nodes.get(source)
        if node is not None:
            node.last_line = text

    def _rank_series(self, table: dict[int, Series], rank: int) -> Series:
        series = table.get(rank)
        if series is None:
            series = table[rank] = Series(f"rank {rank}", self.capacity)
        return series

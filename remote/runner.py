"""One run from start to finish: profile → data → preprocess → train → summary, cost-metered.

Every exit path — success, a failed node, the budget, the caller's stop, Ctrl-C — stops the
cost meter, tears the cluster down (``async with cluster``) and writes ``summary.json`` with the
status and reason. Events of every stage go to ``runs/<run-id>/events.jsonl`` and to the
caller's ``on_event`` (the dashboard or the headless progress display).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from engine.errors import DatasetError, InputError, LaunchError, SentitopError
from engine.events import Emitter, FanoutSink, JsonlFileSink
from engine.sentiment.pretrained import check_init_embeddings
from engine.sentiment.splits import check_batch_size, check_dataset
from engine.stop_rules import STOP_CHECKPOINT_S
from remote.advice import priced_advice
from remote.checkpoint_keeper import NODE_CHECKPOINT
from remote.cluster_factory import make_cluster
from remote.clusters import LineCallback
from remote.cost import CostMeter, CostTicker
from remote.datasets import prepare_dataset
from remote.pricing import PriceBook, load_catalog
from remote.profile import Profile
from remote.profile_inputs import check_input_files
from remote.recovery import RecoveryLedger
from remote.resume import keep_run_settings, refuse_other_dataset_than
from remote.run_folder import runs_root
from remote.security import copy_private, make_private_dir, write_private_file
from remote.teardown import tear_down_leftovers
from remote.train_stage import TrainContext, run_training

RunStatus = Literal["ok", "failed", "interrupted", "budget"]
EventCallback = Callable[[dict[str, Any]], None]

SUMMARY_KEYS = (
    "accuracy",
    "precision",
    "recall",
    "f1",
    "epochs",
    "samples_per_s",
    "train_s",
    "time_to_threshold_s",
    "threshold_epoch",
    "test_loss",
    "n_train",
    "n_test",
    "majority_rate",
    "companion",
)
"""Training results copied to the top level of a run's summary.json."""


CTRL_C_REASON = "interrupted by the user (Ctrl-C)"
"""What a cancelled run's summary gives as the reason unless the caller names another."""

FOLDER_CHECK_S = 2.0
"""How often a running run checks that its folder is still there (a removed one stops it)."""
_STOPPED_FOR_FOLDER = "run folder removed"
"""_supervise's reason when it stopped the run because its folder went (the summary says more)."""


def new_run_dir(root: Path, profile_name: str) -> Path:
    """A fresh private run folder named ``YYYYmmdd-HHMMSS-<profile>`` (an absolute path: node
    processes run with other working directories)."""
    try:
        root = make_private_dir(root.expanduser().resolve())
    except OSError as exc:  # a file of that name, no permission: a FileExistsError traceback
        env = os.environ.get("SENTITOP_RUNS_DIR")
        named = (  # where the user set it: the flag, or the variable when it is the same folder
            "$SENTITOP_RUNS_DIR"
            if env and Path(env).expanduser().resolve() == root.expanduser().resolve()
            else "--runs-dir"
        )
        raise InputError(
            f"{named} {root}: cannot hold run folders ({exc.strerror or exc})",
            hint="name a folder you can write (--runs-dir, else $SENTITOP_RUNS_DIR, else ./runs)",
        ) from None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for attempt in range(100):
        name = f"{stamp}-{profile_name}" + (f"-{attempt}" if attempt else "")
        path = root / name
        try:
            path.mkdir(mode=0o700)
            return path
        except FileExistsError:
            continue
    raise SentitopError(f"cannot create a new run folder under {root}")


class CallbackSink:
    """Passes events to a callback (the dashboard, the headless display)."""

    def __init__(self, callback: EventCallback | None) -> None:
        self.callback = callback

    def write(self, event: Mapping[str, Any]) -> None:
        """Hand the event over."""
        if self.callback is not None:
            self.callback(dict(event))

    def close(self) -> None:
        """Nothing to release."""


@dataclass(slots=True)
class RunOutcome:
    """How a run ended."""

    run_dir: Path
    status: RunStatus
    summary: dict[str, Any]
    error: SentitopError | None = None

    @property
    def exit_code(self) -> int:
        """0 ok, 130 interrupted, the error's code (2 bad input/profile) or 1 otherwise."""
        if self.status == "ok":
            return 0
        if self.status == "interrupted":
            return 130
        return self.error.exit_code if self.error is not None else 1


@dataclass(slots=True)
class _Progress:
    """What the runner tracks from the event stream (for ETA and the summary)."""

    epochs_total: int = 0
    epoch_seconds: list[float] = field(default_factory=list)
    train_summary: dict[str, Any] = field(default_factory=dict)
    preprocess_summary: dict[str, Any] = field(default_factory=dict)
    rank_nodes: dict[int, str] = field(default_factory=dict)
    """Training rank → the node it ran on (from each rank's ``rank_start``)."""
    warnings: list[dict[str, Any]] = field(default_factory=list)
    """``warning`` events (data quality, accuracy below the majority rate): stage, code, message."""
    steps: list[tuple[float, int]] = field(default_factory=list)
    """(t, global_step) of the trainer's `train_start` (its resumed step) and newest `step`."""
    total_steps: int = 0
    """Steps of the whole training (the trainer's `train_start`)."""
    world_sizes: list[int] = field(default_factory=list)
    """The world size of each training attempt (a recovery that shrank adds a smaller one)."""
    epochs: list[dict[str, Any]] = field(default_factory=list)
    """The trainer's `epoch` events (for the summary of a run stopped before the trainer's)."""
    threshold: dict[str, Any] = field(default_factory=dict)
    """The trainer's `threshold` event, once the smoothed loss fell below it."""

    def observe(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        size = event.get("world_size") if kind == "train_start" else None
        if isinstance(size, int) and (not self.world_sizes or self.world_sizes[-1] != size):
            self.world_sizes.append(size)
        if kind == "train_start" and isinstance(event.get("total_steps"), int):
            self.total_steps = int(event["total_steps"])
            first = int(event.get("resumed_epoch") or 0) * int(event.get("steps_per_epoch") or 0)
            self.steps = [(float(event["t"]), first + int(event.get("resumed_step") or 0))]
        elif kind == "step" and self.steps and isinstance(event.get("global_step"), int):
            self.steps[1:] = [(float(event["t"]), int(event["global_step"]))]
        elif kind == "rank_start":
            rank, node = event.get("rank"), event.get("node")
            if isinstance(rank, int) and isinstance(node, str):
                self.rank_nodes[rank] = node
        elif kind == "warning":
            warning = {k: event.get(k) for k in ("stage", "code", "message")}
            if warning not in self.warnings:  # a recovered run's next attempt says it again
                self.warnings.append(warning)
        elif kind == "epoch" and isinstance(event.get("seconds"), int | float):
            self.epoch_seconds.append(float(event["seconds"]))
            skip = ("type", "t", "run", "node", "rank")
            self.epochs.append({k: v for k, v in event.items() if k not in skip})
        elif kind == "threshold":
            self.threshold = dict(event)
        elif kind == "summary":
            if event.get("stage") == "preprocess":
                self.preprocess_summary = dict(event)
            elif event.get("stage") in (None, "train"):
                self.train_summary = dict(event)

    def partial_train(self) -> dict[str, Any]:
        """What the events tell of a training stopped before the trainer summed up (Ctrl-C, a
        budget, a failure): its finished epochs and when the loss crossed its threshold, so
        the summary says neither "no epoch" nor "threshold not reached" when both happened.
        No accuracy: the trainer picks and blends its model only at its end."""
        if not self.epochs:
            return {}
        seconds = sum(float(e["seconds"]) for e in self.epochs)
        samples = sum(float(e.get("samples_per_s") or 0.0) * float(e["seconds"])
                      for e in self.epochs)  # fmt: skip
        out: dict[str, Any] = {
            "partial": True,
            "epochs": max(int(e.get("epoch", 0)) for e in self.epochs) + 1,
            "per_epoch": self.epochs,
            "train_s": round(seconds, 3),
            "samples_per_s": samples / seconds if seconds > 0 else None,
        }
        if self.threshold:
            out["time_to_threshold_s"] = self.threshold.get("seconds")
            out["threshold_epoch"] = self.threshold.get("epoch")
            out["loss_threshold"] = self.threshold.get("threshold")
        return out

    def placed_ranks(self) -> list[str] | None:
        """Node of each rank in rank order, once ranks 0..n-1 have all reported (else None)."""
        ranks = self.rank_nodes
        if not ranks or set(ranks) != set(range(len(ranks))):
            return None
        return [ranks[r] for r in range(len(ranks))]

    def remaining_s(self) -> float | None:
        """Seconds of training left: from the step rate once steps run, else from epochs."""
        if len(self.steps) == 2 and self.total_steps:
            (t0, s0), (t1, s1) = self.steps
            if s1 > s0 and t1 > t0:
                return max(0, self.total_steps - s1) * (t1 - t0) / (s1 - s0)
        if not self.epoch_seconds or not self.epochs_total:
            return None
        left = max(0, self.epochs_total - len(self.epoch_seconds))
        return left * sum(self.epoch_seconds) / len(self.epoch_seconds)


async def execute_run(
    profile: Profile,
    *,
    runs_dir: Path | None = None,
    on_event: EventCallback | None = None,
    on_line: LineCallback | None = None,
    stop: asyncio.Event | None = None,
    interrupt_reason: Callable[[], str | None] | None = None,
    resume_from: Path | None = None,
    on_start: Callable[[Path], None] | None = None,
) -> RunOutcome:
    """Run ``profile`` end to end; never raises for run failures (see RunOutcome).

    ``on_event`` gets every event; ``on_line(node, line, event_or_None)`` every node output line.
    ``interrupt_reason`` names why a cancelled run stopped (e.g. a termination signal turned
    into the Ctrl-C path); None or no answer: the user's Ctrl-C. ``resume_from``: a stopped
    run's folder (remote.resume.resumable_run) whose checkpoint the training continues from.
    ``on_start`` gets the new run folder as soon as it exists.
    """
    preflight(profile)  # what refuses the run with nothing started makes no run folder either
    run_dir = new_run_dir(runs_dir or runs_root(), profile.name)
    if on_start is not None:
        on_start(run_dir)
    write_private_file(
        run_dir / "profile.yaml", yaml.safe_dump(profile.resolved(), sort_keys=False)
    )
    train_cfg = profile.to_train_config("", run_dir / "train")  # data_dir: set per node
    if resume_from is not None:  # where rank 0 (or the keeper, for remote nodes) resumes from,
        copy_private(resume_from / NODE_CHECKPOINT, run_dir / NODE_CHECKPOINT)
        train_cfg = keep_run_settings(train_cfg, profile, resume_from)  # order, rate
    progress = _Progress(epochs_total=train_cfg.epochs)

    def tap(event: dict[str, Any]) -> None:
        progress.observe(event)
        if on_event is not None:
            on_event(event)

    sink = FanoutSink(JsonlFileSink(run_dir / "events.jsonl"), CallbackSink(tap))
    emitter = Emitter(sink, run=run_dir.name)
    meter = CostMeter()
    loop = asyncio.get_running_loop()
    budget_hit = asyncio.Event()
    started = time.time()
    status: RunStatus = "ok"
    reason = ""
    error: SentitopError | None = None
    ticker: CostTicker | None = None
    book: PriceBook | None = None
    ledger = RecoveryLedger(profile.recovery, run_started=started)
    notes: dict[str, Any] = {}
    try:
        # bundled and user prices plus cached live ones (spot by zone included); no network:
        # spot nodes are priced live for the zone they land in once they run (node_billing)
        book = profile.price_book(live=False, catalog=load_catalog())
        rate = profile.check_launch_budget(book)
        emitter.emit(
            "run_start",
            profile=profile.name,
            provider=profile.provider,
            world_size=profile.world_size(),
            usd_per_hour=rate,
            epochs=train_cfg.epochs,
            config=profile.resolved(),
            resumed_from=None if resume_from is None else resume_from.name,
        )
        for line in profile.cost_lines(book):
            if line.stage == "all":
                meter.start(line)
        ticker = CostTicker(
            meter,
            emitter,
            max_usd=profile.budget.max_usd,
            remaining=progress.remaining_s,
            on_exceeded=lambda _why: loop.call_soon_threadsafe(budget_hit.set),
        )
        ticker.start()
        if resume_from is not None:  # machines a killed launcher left up would bill beside ours
            left = await asyncio.to_thread(tear_down_leftovers, resume_from)
            if left:
                emitter.emit("warning", stage="run", code="resumed_run_leftovers", message=left)
        ctx = TrainContext(profile, train_cfg, run_dir, emitter, sink, meter, book, on_line,
                           ledger, notes, resume=resume_from is not None,
                           resumed_from=resume_from)  # fmt: skip
        status, reason = await _supervise(ctx, stop, budget_hit)
        if status == "budget" and ticker.exceeded_reason:
            reason = ticker.exceeded_reason
    except SentitopError as exc:
        status, reason, error = "failed", exc.message, exc
    except Exception as exc:  # an internal failure: reported with its traceback file, not hidden
        trace = run_dir / "runner-error.log"
        write_private_file(trace, traceback.format_exc())
        status, reason = "failed", f"internal error {type(exc).__name__}: {exc} (see {trace})"
        error = SentitopError(reason)
    except (asyncio.CancelledError, KeyboardInterrupt):
        status = "interrupted"
        reason = (interrupt_reason() if interrupt_reason else None) or CTRL_C_REASON
        raise
    finally:
        meter.stop_all()
        if ticker is not None:
            ticker.stop()
        if not (run_dir / "profile.yaml").is_file():  # removed while the run went: the ranks
            stopped = reason == _STOPPED_FOR_FOLDER  # would write a model beside no vocab
            status, reason = (
                "failed",
                f"the run folder {run_dir} was removed while the run went: its profile, events "
                "and model files are gone, so nothing can use what it trained"
                + ("; the run was stopped when that was seen" if stopped else ""),
            )
            run_dir.mkdir(parents=True, exist_ok=True)  # for the summary that says so
        summary = _summary(profile, run_dir, status, reason, started, meter, progress, book)
        summary.update(_recovery_summary(ledger, notes))
        if isinstance(error, LaunchError) and error.leftovers:  # `runs` warns until torn down
            summary["leftovers"] = True
        if resume_from is not None:
            summary["resumed_from"] = str(resume_from)
        write_private_file(run_dir / "summary.json", json.dumps(summary, indent=2))
        emitter.emit("summary", stage="run", **{k: v for k, v in summary.items() if k != "run"})
        emitter.emit("run_end", status=status, reason=reason)
        emitter.close()
    return RunOutcome(run_dir, status, summary, error)


async def _supervise(
    ctx: TrainContext, stop: asyncio.Event | None, budget_hit: asyncio.Event
) -> tuple[RunStatus, str]:
    """Run the stages until they end, the caller stops, or the budget is hit."""
    work = asyncio.create_task(_stages(ctx))
    watchers: dict[asyncio.Task[Any], str] = {
        asyncio.create_task(budget_hit.wait()): "budget",
        asyncio.create_task(_folder_removed(ctx.run_dir)): "removed",
    }
    if stop is not None:
        watchers[asyncio.create_task(stop.wait())] = "interrupted"
    try:
        done, _ = await asyncio.wait({work, *watchers}, return_when=asyncio.FIRST_COMPLETED)
        if work in done:
            work.result()
            return "ok", ""
        why = next(name for task, name in watchers.items() if task in done)
        kept = await _checkpoint_first(ctx, work) if why == "interrupted" else ""
        if work.done() and not work.cancelled() and work.exception() is None:
            return "ok", ""  # it finished while the checkpoint was asked for
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
        if why == "budget":
            return "budget", "budget max_usd would be exceeded"
        if why == "removed":
            return "failed", _STOPPED_FOR_FOLDER
        return "interrupted", "stopped by the user" + kept
    finally:
        for task in [work, *watchers]:
            task.cancel()
        await asyncio.gather(work, *watchers, return_exceptions=True)


async def _folder_removed(run_dir: Path) -> None:
    """Returns once the run's folder (its profile.yaml) is gone: a run whose folder was removed
    kept training, and billing, to its end, though nothing could use what it wrote."""
    while (run_dir / "profile.yaml").is_file():
        await asyncio.sleep(FOLDER_CHECK_S)


async def _checkpoint_first(ctx: TrainContext, work: asyncio.Task[None]) -> str:
    """On a user's stop while ranks train: a checkpoint at the next step, stored here before
    the nodes go; what the stop kept, for its reason (work ending meanwhile ends the wait)."""
    if ctx.checkpoint_now is None or ctx.ledger.train_started is None:
        return ""  # no cluster yet, or ranks still setting up: no step to keep
    ask = asyncio.create_task(ctx.checkpoint_now(STOP_CHECKPOINT_S))
    try:
        await asyncio.wait({ask, work}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not ask.done():
            ask.cancel()
        await asyncio.gather(ask, return_exceptions=True)
    stored = None if ask.cancelled() or ask.exception() else ask.result()
    if work.done():
        return ""
    if stored is None:
        return (
            f"; no checkpoint within {STOP_CHECKPOINT_S:g} s: resuming continues from the "
            "last one written before the stop, if any"
        )
    return f"; checkpoint {stored.place()} kept: resume continues from it"


def preflight(profile: Profile) -> None:
    """Refuse (exit 2, raised before a run folder exists) a profile whose run would stop at its
    start: a missing input file, embeddings run or SSH key, a $/h over its budget, AWS
    credentials, or a default AMI that cannot be found. A
    refused EC2 profile whose key file was missing left a "failed" run in `sentitop runs` at
    every try."""
    check_input_files(profile)  # (the dashboard starts profiles through here alone)
    check_init_embeddings(profile.to_train_config("", "train").model)
    profile.check_key_files()  # before any instance bills
    profile.check_launch_budget(profile.price_book(live=False, catalog=load_catalog()))
    if profile.provider == "ec2":  # no credentials: say so before preprocessing, not after
        from remote import aws

        aws.require_credentials("start the profile's EC2 instances", profile.region)
        if not all(node.ami for node in getattr(profile, "nodes", [])):
            from remote.clusters.ec2 import default_ami

            default_ami(profile.region)  # no such AMI parameter: said before preprocessing too


async def _stages(ctx: TrainContext) -> None:
    emr_keys = []
    if ctx.profile.preprocess.runner == "emr":
        lines = [line for line in ctx.profile.cost_lines(ctx.book) if line.stage == "preprocess"]
        emr_keys = [ctx.meter.start(line) for line in lines]
    try:
        data = await prepare_dataset(ctx.profile, ctx.run_dir, ctx.emitter, ctx.sink)
    finally:
        for key in emr_keys:
            ctx.meter.stop(key)
    max_train = ctx.train.max_train_samples  # an empty or one-class split: exit 2, no machine
    try:
        await asyncio.to_thread(check_dataset, data.dataset_dir, max_train)
    except DatasetError as exc:
        synthetic = ctx.profile.data.synthetic
        if synthetic is None:
            raise
        raise DatasetError(  # the generic hint (preprocess more reviews) is not the profile's fix
            exc.message,
            hint=f"the profile's synthetic data is too small ({data.stats.get('kept', '?')} "
            "reviews kept after de-duplication): raise data.synthetic.size (1MB or more) or "
            "set data.synthetic.distinct (e.g. 0.9) for more distinct reviews per MB",
        ) from None
    await asyncio.to_thread(check_batch_size, data.dataset_dir, ctx.train)  # before machines
    if ctx.resumed_from is not None:  # inputs rewritten since it stopped: another dataset
        await asyncio.to_thread(refuse_other_dataset_than, ctx.resumed_from, data.dataset_dir,
                                ctx.train.max_train_samples)  # fmt: skip
    cluster = make_cluster(ctx.profile)
    async with cluster:
        await run_training(ctx, cluster, data)


def _recovery_summary(ledger: RecoveryLedger, notes: dict[str, Any]) -> dict[str, Any]:
    """Recoveries, downtime and $ lost at the top of summary.json; details under recovery."""
    totals = ledger.summary()
    out: dict[str, Any] = {
        "recoveries": totals["recoveries"],
        "downtime_s": totals["downtime_s"],
        "usd_lost": totals["usd_lost"],
        "recovery": totals,
    }
    if "checkpoints" in notes:
        out["checkpoints"] = notes["checkpoints"]
    return out


def _summary(
    profile: Profile,
    run_dir: Path,
    status: RunStatus,
    reason: str,
    started: float,
    meter: CostMeter,
    progress: _Progress,
    book: PriceBook | None,
) -> dict[str, Any]:
    train = {k: v for k, v in progress.train_summary.items() if k not in ("type", "t")}
    train = train or progress.partial_train()  # stopped before the trainer's own summary
    summary: dict[str, Any] = {
        "run": run_dir.name,
        "profile": profile.name,
        "provider": profile.provider,
        "status": status,
        "reason": reason,
        "world_size": (progress.world_sizes or [profile.world_size()])[-1],  # the last attempt's
        "started": started,
        "wall_s": round(time.time() - started, 3),
    }
    if len(set(progress.world_sizes)) > 1:  # its epochs ran on different numbers of ranks
        summary["world_sizes"] = progress.world_sizes
    summary.update({k: train[k] for k in SUMMARY_KEYS if k in train})
    cost = meter.summary()
    summary["usd"] = cost["usd"]
    summary["accrued_usd"] = round(meter.accrued_usd(), 6)  # without the 1-min minimum
    summary["usd_per_hour"] = round(meter.peak_usd_per_hour(), 6)  # replaced nodes not added
    summary["cost"] = cost
    summary["train"] = train
    summary["warnings"] = progress.warnings
    if book is not None:
        advice = priced_advice(profile, book, train, rank_nodes=progress.placed_ranks())
        if advice is not None:
            summary["advice"] = advice
    pre = progress.preprocess_summary
    summary["preprocess"] = {k: v for k, v in pre.items() if k not in ("type", "t")}
    return summary

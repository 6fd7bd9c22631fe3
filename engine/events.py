"""JSON-lines event protocol shared by engine processes, launchers, dashboard and reports.

Every event is one JSON object on one line with ``type`` first and a wall time ``t`` (Unix
seconds). ``rank`` and ``node`` appear where they apply. The full list of types and fields is
documented in ``docs/EVENTS.md``; :data:`EVENT_TYPES` is the machine-readable index.

This module stays free of torch/textual imports so the dashboard can load it fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Protocol

EVENT_PREFIX = '{"type":'
"""Every event line starts with this, which is how launchers tell events from log lines."""

EVENT_TYPES: dict[str, str] = {
    "run_start": "a run began: run, profile, world_size, config",
    "run_end": "a run ended: status (ok|failed|interrupted|budget), reason",
    "stage_start": "a stage began (once per stage, from the stage's owner): stage "
    "(synth|preprocess|train|review)",
    "stage_end": "a stage ended (once per stage): stage, status, seconds",
    "train_start": "the trainer's plan (rank 0): epochs, steps_per_epoch, total_steps, balancer, "
    "world_size, device, n_train, n_test, params, spec, global_batch, lr, resumed_epoch, "
    "resumed_step, threads",
    "progress": "stage progress: stage, done, total, unit, rate",
    "rank_start": "a rank's process group is up (every rank): world_size, local_rank, device, "
    "device_name (with rank and node: where each rank landed)",
    "rank_end": "a rank finished its work and met every peer at the final barrier (every rank): "
    "status",
    "step": "every k steps (rank 0): epoch, step, global_step, loss, smoothed_loss, "
    "samples_per_s, lr",
    "epoch": "end of an epoch (rank 0): epoch, train_loss, test_loss, accuracy, precision, "
    "recall, f1, seconds, samples_per_s",
    "phase": "per-rank seconds in an epoch (all emitted by rank 0): rank, epoch, data, h2d, "
    "forward, backward, allreduce_opt, eval, steps, samples",
    "balance": "load split (rank 0): epoch, step, start, steps, shares, batch_sizes, counts, "
    "sec_per_sample, predicted_epoch_s, ideal_epoch_s, enabled, rebalances",
    "threshold": "smoothed train loss first fell below threshold: loss, epoch, step, seconds, "
    "threshold",
    "checkpoint": "checkpoint written (rank 0): epoch, step, global_step, path, seconds",
    "after_training": "rank 0, after the last epoch, before the summary: fits (blend|companion), "
    "valid_samples, companion_rows",
    "node": "a node's state changed: node, status, gpu, detail",
    "cost": "running cost: usd (billed, 60 s minimum), accrued_usd (no minimum), usd_per_hour, "
    "projected_usd, elapsed_s",
    "error": "something failed: message, rank/node, tail (last log lines)",
    "warning": "a result to distrust, not a failure: stage, code (skipped_share|class_share|"
    "below_majority|path_unused), message",
    "summary": "final numbers of a stage or run (same keys as summary.json)",
    "spot_notice": "a spot node's interruption notice (engine.spot_watch on the node): action, at",
    "checkpoint_stored": "a checkpoint copied where it survives its node (launcher): epoch, "
    "step, global_step, path, source, seconds",
    "recovery": "a lost node was recovered from (runner): attempt, lost, cause, action, status, "
    "world_size, downtime_s, redone_steps, redone_s, usd",
}


def make_event(type_: str, /, **fields: Any) -> dict[str, Any]:
    """Build an event dict with ``type`` first and ``t`` set unless given."""
    event: dict[str, Any] = {"type": type_, "t": fields.pop("t", None) or time.time()}
    event.update(fields)
    return event


def encode_event(event: Mapping[str, Any]) -> str:
    """One compact JSON line (no newline) for an event; ``type`` must be the first key."""
    if next(iter(event), None) != "type":
        event = {"type": event["type"], **{k: v for k, v in event.items() if k != "type"}}
    return json.dumps(event, separators=(",", ":"), default=_json_default, allow_nan=False)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def epochs_done_by(event: Mapping[str, Any]) -> int | None:
    """Epochs an `epoch` event (its epoch + 1) or a checkpoint (where a resume continues) shows
    done; None for any other event or a malformed epoch."""
    kind, epoch = event.get("type"), event.get("epoch")
    if type(epoch) is not int:
        return None
    if kind == "epoch":
        return epoch + 1
    return epoch if kind in ("checkpoint", "checkpoint_stored") else None


def parse_event_line(line: str | bytes) -> dict[str, Any] | None:
    """The event on this line, or None when it is a plain log line."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    text = line.strip()
    if not text.startswith(EVENT_PREFIX):
        return None
    try:
        event = json.loads(text)
    except ValueError:
        return None
    return event if isinstance(event, dict) and isinstance(event.get("type"), str) else None


def read_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """Events of a recorded ``events.jsonl`` in order, skipping lines that are not events."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            event = parse_event_line(line)
            if event is not None:
                yield event


class EventSink(Protocol):
    """Where events go."""

    def write(self, event: Mapping[str, Any]) -> None:
        """Record one event."""

    def close(self) -> None:
        """Flush and release resources."""


class NullSink:
    """Drops every event."""

    def write(self, event: Mapping[str, Any]) -> None:
        """Ignore the event."""

    def close(self) -> None:
        """Nothing to release."""


class StreamSink:
    """Writes event lines to a text stream (stdout by default), flushed per line."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, event: Mapping[str, Any]) -> None:
        """Write one line and flush so a remote launcher sees it at once."""
        stream = self._stream or sys.stdout
        line = encode_event(event) + "\n"
        with self._lock:
            stream.write(line)
            stream.flush()

    def close(self) -> None:
        """Flush the stream (never closes stdout)."""
        (self._stream or sys.stdout).flush()


class JsonlFileSink:
    """Appends event lines to a file (created with user-only permissions), holding a shared
    flock on it while open, so :func:`has_live_writer` can tell a live run from a dead one."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with contextlib.suppress(OSError):  # a file system without locks: liveness unknown
            fcntl.flock(fd, fcntl.LOCK_SH)  # released on close, and by the kernel on death
        self._fh = os.fdopen(fd, "a", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()

    def write(self, event: Mapping[str, Any]) -> None:
        """Append one line."""
        line = encode_event(event) + "\n"
        with self._lock:
            self._fh.write(line)

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            if not self._fh.closed:
                self._fh.close()


def has_live_writer(path: str | Path) -> bool:
    """Whether a process still writes ``path`` through a :class:`JsonlFileSink` (it holds the
    file's shared lock): False once every writer closed it or died (killed, even by SIGKILL),
    or when the file is missing. A run whose events stop without `run_end` and have no live
    writer is over: it did not finish."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return True  # locks unsupported here: assume alive rather than call a live run dead
    finally:
        os.close(fd)  # (also drops the lock when it was taken)
    return False


class FanoutSink:
    """Sends every event to several sinks."""

    def __init__(self, *sinks: EventSink) -> None:
        self.sinks = list(sinks)

    def write(self, event: Mapping[str, Any]) -> None:
        """Write to each sink."""
        for sink in self.sinks:
            sink.write(event)

    def close(self) -> None:
        """Close each sink."""
        for sink in self.sinks:
            sink.close()


class Emitter:
    """Builds events with shared fields (run, rank, node) and writes them to a sink."""

    def __init__(self, sink: EventSink | None = None, **common: Any) -> None:
        self.sink: EventSink = sink if sink is not None else NullSink()
        self.common = {k: v for k, v in common.items() if v is not None}

    def emit(self, type_: str, /, **fields: Any) -> dict[str, Any]:
        """Write one event of ``type_`` with the common fields and ``fields``; return it."""
        event = make_event(type_, **{**self.common, **fields})
        self.sink.write(event)
        return event

    def close(self) -> None:
        """Close the sink."""
        self.sink.close()


def rank_emitter(run_dir: str, rank: int, *, events_file: bool = True) -> Emitter:
    """A rank's events: stdout on every rank, plus RUN_DIR/events.jsonl on rank 0 (if wanted)."""
    sinks: list[EventSink] = [StreamSink()]
    if rank == 0 and events_file:
        sinks.append(JsonlFileSink(os.path.join(run_dir, "events.jsonl")))
    return Emitter(FanoutSink(*sinks), rank=rank, node=os.environ.get("SENTITOP_NODE"))

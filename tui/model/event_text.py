"""Readable one-line texts of events, for log lines that hold an event's raw JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from remote.recovery import checkpoint_place
from tui.format import fmt_duration, preprocess_line

Said = tuple[str, str]
"""(text, level) of a log line; level is info | warn | error."""


def stage_started(stage: str) -> str:
    """The log text of a stage's start."""
    return f"stage {stage} started"


def stage_ended(stage: str, status: str, seconds: float | None) -> str:
    """The log text of a stage's end: "stage train ok in 30s", "stage preprocess failed"."""
    return f"stage {stage} {status}" + (
        f" in {fmt_duration(seconds)}" if seconds is not None else ""
    )


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _stage_start(ev: Mapping[str, Any]) -> Said:
    return stage_started(str(ev.get("stage") or "?")), "info"


def _stage_end(ev: Mapping[str, Any]) -> Said:
    status = str(ev.get("status") or "ok")
    text = stage_ended(str(ev.get("stage") or "?"), status, _num(ev.get("seconds")))
    return text, "info" if status == "ok" else "error"


def _error(ev: Mapping[str, Any]) -> Said:
    return f"error: {ev.get('message') or 'unknown'}", "error"


def _warning(ev: Mapping[str, Any]) -> Said:
    return f"warning: {ev.get('message') or ev.get('code') or '?'}", "warn"


def _log(ev: Mapping[str, Any]) -> Said:
    level = str(ev.get("level") or "info")
    return str(ev.get("line") or ev.get("message") or ""), level


def _run_start(ev: Mapping[str, Any]) -> Said:
    return f"run {ev.get('run') or '?'} started ({ev.get('profile') or '?'})", "info"


def _run_end(ev: Mapping[str, Any]) -> Said:
    status, reason = str(ev.get("status") or "ok"), ev.get("reason")
    return f"run ended: {status}" + (f" ({reason})" if reason else ""), (
        "info" if status == "ok" else "error"
    )


def _progress(ev: Mapping[str, Any]) -> Said:
    done, total = _num(ev.get("done")), _num(ev.get("total"))
    shown = f"{done:,.0f}" if done is not None else "?"
    if total:
        shown += f"/{total:,.0f}"
    return f"{ev.get('stage') or '?'}: {shown} {ev.get('unit') or ''}".rstrip(), "info"


def _epoch(ev: Mapping[str, Any]) -> Said:
    epoch = _num(ev.get("epoch"))
    text = f"epoch {int(epoch) + 1} done" if epoch is not None else "epoch done"
    accuracy = _num(ev.get("accuracy"))
    return text + (f", acc {accuracy:.3f}" if accuracy is not None else ""), "info"


def checkpoint_where(ev: Mapping[str, Any]) -> str:
    """Where a `checkpoint` event's resume continues, in words."""
    fields = ("epoch", "step", "position", "epoch_samples")
    return checkpoint_place(*(int(_num(ev.get(k)) or 0) for k in fields))


def _checkpoint(ev: Mapping[str, Any]) -> Said:
    return f"checkpoint saved {checkpoint_where(ev)}", "info"


def _node(ev: Mapping[str, Any]) -> Said:
    status = str(ev.get("status") or "?")
    text = f"node {ev.get('node') or '?'} {status} {ev.get('detail') or ''}".rstrip()
    return text, "error" if status in ("lost", "failed", "error") else "info"


def _step(ev: Mapping[str, Any]) -> Said:
    loss = _num(ev.get("loss"))
    text = f"step {ev.get('global_step', ev.get('step', '?'))}"
    return text + (f", loss {loss:.4f}" if loss is not None else ""), "info"


def _train_start(ev: Mapping[str, Any]) -> Said:
    return f"training: {ev.get('epochs', '?')} epochs on {ev.get('device') or '?'}", "info"


def _rank_start(ev: Mapping[str, Any]) -> Said:
    device = ev.get("device_name") or ev.get("device") or "?"
    return f"rank {ev.get('rank', '?')} up on {device}", "info"


def _summary(ev: Mapping[str, Any]) -> Said:
    if ev.get("stage") == "preprocess":
        return preprocess_line(ev), "info"
    return f"{ev.get('stage') or 'run'} summary: {ev.get('status') or 'written'}", "info"


DESCRIBERS: dict[str, Callable[[Mapping[str, Any]], Said]] = {
    "stage_start": _stage_start,
    "stage_end": _stage_end,
    "error": _error,
    "warning": _warning,
    "log": _log,
    "run_start": _run_start,
    "run_end": _run_end,
    "progress": _progress,
    "epoch": _epoch,
    "checkpoint": _checkpoint,
    "node": _node,
    "step": _step,
    "train_start": _train_start,
    "rank_start": _rank_start,
    "summary": _summary,
}
"""Event type -> its one-line description; other types stay raw."""


def describe_event(event: Mapping[str, Any]) -> Said | None:
    """(text, level) of an event of a known type, None for other types."""
    describe = DESCRIBERS.get(str(event.get("type")))
    return describe(event) if describe is not None else None


def readable_line(text: str) -> tuple[str, str | None]:
    """A line holding an event's JSON (after an optional prefix such as "[rank0]: ") as readable
    text and its level; any other line unchanged with level None."""
    start = text.find("{")
    if start < 0 or not text.rstrip().endswith("}") or '"type"' not in text:
        return text, None
    try:
        event = json.loads(text[start:])
    except ValueError:
        return text, None
    if not isinstance(event, dict):
        return text, None
    said = describe_event(event)
    if said is None:
        return text, None
    return text[:start] + said[0], said[1]


def readable_text(text: str) -> str:
    """``text`` with every line that holds a known event's JSON made readable (error dialogs
    quote a node's last lines, events among them)."""
    return "\n".join(readable_line(line)[0] for line in text.split("\n"))

"""How a command's run ended when its ranks could not say so (stopped, failed), recorded as
the events a replay and `sentitop runs` read: `error` and the stage's `stage_end`."""

from __future__ import annotations

import signal
from pathlib import Path

from engine.errors import SentitopError
from engine.events import Emitter, JsonlFileSink


def ending(exc: BaseException) -> tuple[str, str]:
    """(stage status, message) of a run that ``exc`` ended: interrupted (Ctrl-C, SIGTERM,
    SIGHUP) or failed."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", "interrupted (Ctrl-C)"
    if isinstance(exc, SystemExit) and isinstance(exc.code, int) and exc.code > 128:
        try:
            name = signal.Signals(exc.code - 128).name
        except ValueError:
            name = f"signal {exc.code - 128}"
        return "interrupted", f"terminated ({name})"
    if isinstance(exc, SentitopError):
        return "failed", exc.message
    return "failed", f"{type(exc).__name__}: {exc}"


def record_end(
    run_dir: str | Path, stage: str, status: str, message: str | None, seconds: float
) -> None:
    """Append `error` (when ``message``) and `stage_end` to RUN_DIR/events.jsonl."""
    try:
        sink = JsonlFileSink(Path(run_dir) / "events.jsonl")
    except OSError:
        return
    emitter = Emitter(sink, rank=0)
    try:
        if message is not None:
            emitter.emit("error", message=message)
        emitter.emit("stage_end", stage=stage, status=status, seconds=seconds)
    finally:
        emitter.close()

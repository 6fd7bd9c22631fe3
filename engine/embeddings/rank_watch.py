"""What the launcher of an embeddings run reads in its ranks' output: the end of training, and
the error a rank reports itself (said once, by the launcher, instead of once per rank)."""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING

from engine import errors
from engine.errors import SentitopError

if TYPE_CHECKING:
    from engine.launch import LineHandler

_BY_TITLE: dict[str, type[SentitopError]] = {
    cls.title: cls
    for cls in vars(errors).values()
    if isinstance(cls, type) and issubclass(cls, SentitopError)
}
"""Error classes by the title a rank prints them under (``SentitopError.user_message``)."""
_HINT = "  hint: "


class TrainWatch:
    """Passes rank lines on; notes whether rank 0 ended its train stage itself, and takes the
    errors ranks print as ``TITLE: message`` (+ ``  hint: ...``) off the terminal: a setting
    the ranks refused was printed by every rank and again in the launcher's LaunchError (exit
    1); :meth:`reported` hands the first to the launcher to raise as itself (exit 2). Once one
    rank reported its own error, the other ranks' stderr is what they print while they are
    stopped (in async mode, gloo tracebacks of workers whose server left) and is not shown."""

    def __init__(self, on_line: LineHandler | None) -> None:
        self.on_line = on_line
        self.ended = False
        self._errors: list[SentitopError] = []
        self._hint_due: dict[int, SentitopError] = {}
        self._ranks: set[int] = set()
        """Ranks that reported an error of their own."""
        self._lock = threading.Lock()

    def reported(self) -> SentitopError | None:
        """The first error a rank reported itself (None when none did: a crash, a kill)."""
        with self._lock:
            return self._errors[0] if self._errors else None

    def __call__(self, rank: int, stream: str, line: str) -> None:
        if stream == "stderr" and self._own_error(rank, line):
            return  # the launcher raises it, once
        if stream == "stderr" and self._after_error(rank):
            return  # a peer left waiting on the failed rank: a gloo traceback, not the cause
        if rank == 0 and stream == "stdout" and '"stage_end"' in line:
            from engine.events import parse_event_line

            event = parse_event_line(line)
            if event is not None and event["type"] == "stage_end" and event.get("stage") == "train":
                self.ended = True
        if self.on_line is not None:
            self.on_line(rank, stream, line)
        elif stream == "stdout":  # what the launcher does without a handler
            print(line, flush=True)
        else:
            print(f"[rank {rank}] {line}", file=sys.stderr, flush=True)

    def _after_error(self, rank: int) -> bool:
        """Whether another rank already reported its own error (this one is being stopped)."""
        with self._lock:
            return bool(self._ranks) and rank not in self._ranks

    def _own_error(self, rank: int, line: str) -> bool:
        """Whether stderr ``line`` of ``rank`` is part of an error it reports (kept here)."""
        with self._lock:
            pending = self._hint_due.pop(rank, None)
            if pending is not None and line.startswith(_HINT):
                pending.hint = line[len(_HINT) :]
                return True
            title, sep, message = line.partition(": ")
            kind = _BY_TITLE.get(title)
            if not sep or kind is None or not message:
                return False
            error = kind(message)
            self._errors.append(error)
            self._ranks.add(rank)
            self._hint_due[rank] = error
            return True

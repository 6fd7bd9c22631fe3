"""Ctrl-C and termination signals held while a process forks its workers or ranks, then delivered.

Python ignores an exception raised inside an at-fork hook (it only prints "Exception ignored"),
and the logging module registers one: a Ctrl-C that lands while ``os.fork`` runs those hooks
raises its KeyboardInterrupt there and is lost, so the run goes on as if the key was never
pressed. While the guard is on, the signals are only recorded; :meth:`ForkGuard.release`
restores the handlers and raises each recorded signal again, so it reaches the handler it was
meant for. The parent releases after its forks; a forked child inherits the guard and releases
first thing, so a signal that reached it mid-fork is delivered there too.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType, TracebackType
from typing import Any

HELD_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""Signals a user or a supervisor sends to stop a run."""


class ForkGuard:
    """``with ForkGuard() as guard: start processes`` holds :data:`HELD_SIGNALS` meanwhile."""

    def __init__(self) -> None:
        self.previous: dict[int, Any] = {}
        self.caught: list[tuple[int, int]] = []
        """(pid, signal) of each signal held: a forked child copies the list and delivers only
        its own."""

    def __enter__(self) -> ForkGuard:
        if threading.current_thread() is threading.main_thread():  # handlers live there only
            for signum in HELD_SIGNALS:
                if signal.getsignal(signum) is not None:  # None: set outside Python, left alone
                    self.previous[signum] = signal.signal(signum, self._hold)
        return self

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        self.caught.append((os.getpid(), signum))

    def release(self) -> None:
        """Restore the handlers, then raise each signal that arrived meanwhile (once each)."""
        previous, self.previous = self.previous, {}
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        caught, self.caught = self.caught, []
        pid = os.getpid()
        for signum in dict.fromkeys(s for by, s in caught if by == pid):
            signal.raise_signal(signum)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

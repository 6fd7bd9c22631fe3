"""SIGTERM and SIGHUP while preprocessing runs: an exception, so its clean-up runs as for Ctrl-C."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

from engine.signal_handlers import handlers_installed

TERMINATION_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""Signals a supervisor, `kill` or a closed terminal sends to stop a run."""


class Terminated(SystemExit):
    """Raised by a termination signal in the main thread of the run (and of each forked worker,
    which inherits the handler). A SystemExit with code 128 + signal: ``except Exception`` passes
    it on, and uncaught it ends the process with that code and no traceback."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"terminated ({signal.Signals(self.signum).name})"


class TerminationGuard:
    """The handler of :data:`TERMINATION_SIGNALS` while a run is inside
    :func:`termination_raises`: the first signal raises :class:`Terminated` and is remembered;
    later ones change nothing, so a stop under way (workers being stopped, scratch removed) is
    not cut short."""

    def __init__(self) -> None:
        self.received: int | None = None
        """The first termination signal received (None: none yet)."""

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler."""
        if self.received is None:
            self.received = signum
            raise Terminated(signum)

    def check(self) -> None:
        """Raise :class:`Terminated` again if a signal came: where Python drops the exception
        (raised inside a finaliser, e.g. h5py's, it only prints "Exception ignored"), the next
        check still stops the run."""
        if self.received is not None:
            raise Terminated(self.received)


@contextlib.contextmanager
def termination_raises() -> Iterator[TerminationGuard]:
    """While inside (main thread only; elsewhere the guard only never fires), the termination
    signals go to a :class:`TerminationGuard`; the previous handlers come back after. A signal
    that was ignored (``nohup``) stays ignored."""
    guard = TerminationGuard()
    with handlers_installed(TERMINATION_SIGNALS, guard.on_signal):
        yield guard

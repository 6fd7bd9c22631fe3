"""SIGTERM, SIGHUP and Ctrl-C while preprocessing runs: an exception never lost, clean-up run."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

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


STOP_ERRORS = (KeyboardInterrupt, Terminated)
"""What the guard's handler raises."""


class TerminationGuard:
    """The handler of :data:`TERMINATION_SIGNALS` and SIGINT while a run is inside
    :func:`termination_raises`: the first termination signal raises :class:`Terminated` and is
    remembered, later ones change nothing, so a stop under way (workers being stopped, scratch
    removed) is not cut short; SIGINT raises KeyboardInterrupt each time (a second Ctrl-C is a
    user insisting), the first remembered too."""

    def __init__(self) -> None:
        self.received: int | None = None
        """The first stop signal received (None: none yet)."""

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler."""
        first = self.received is None
        if first:
            self.received = signum
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        if first:
            raise Terminated(signum)

    def check(self) -> None:
        """Raise the signal's exception again if one came: where Python drops it (raised inside
        a finaliser, e.g. h5py's), the next check still stops the run."""
        if self.received == signal.SIGINT:
            raise KeyboardInterrupt
        if self.received is not None:
            raise Terminated(self.received)

    def unraisable(self, previous: Any) -> Any:
        """A ``sys.unraisablehook`` that keeps quiet about this guard's own exceptions dropped in
        a finaliser (they printed "Exception ignored in: … Traceback … KeyboardInterrupt" on the
        user's terminal; :meth:`check` raises them again) and passes the rest to ``previous``."""

        def hook(info: Any) -> None:
            if not (self.received is not None and isinstance(info.exc_value, STOP_ERRORS)):
                previous(info)

        return hook


@contextlib.contextmanager
def termination_raises() -> Iterator[TerminationGuard]:
    """While inside (main thread only; elsewhere the guard only never fires), the termination
    signals and SIGINT go to a :class:`TerminationGuard`, and their exceptions dropped in a
    finaliser are not printed; the previous handlers and hook come back after. A signal that
    was ignored (``nohup``) stays ignored."""
    guard = TerminationGuard()
    previous = sys.unraisablehook
    with handlers_installed((*TERMINATION_SIGNALS, signal.SIGINT), guard.on_signal) as mine:
        if mine:
            sys.unraisablehook = guard.unraisable(previous)
        try:
            yield guard
        finally:
            if mine:
                sys.unraisablehook = previous

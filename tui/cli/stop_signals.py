"""Ctrl-C and SIGTERM as exceptions that clean-up runs through and Python cannot lose."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

from engine.signal_handlers import handlers_installed

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Signals that stop a command: Ctrl-C (exit 130) and a supervisor's or `kill`'s SIGTERM (143)."""


class Terminated(BaseException):
    """Raised in the main thread by SIGTERM, so clean-up runs as for Ctrl-C's KeyboardInterrupt."""


class StopGuard:
    """SIGINT raises KeyboardInterrupt and SIGTERM raises :class:`Terminated`, and the signal is
    remembered: where Python drops the exception (raised inside a weakref callback or a
    destructor, e.g. h5py's or matplotlib's object finalisation, it only prints "Exception
    ignored" and carries on), the next :meth:`check` raises it again, so a stop is never lost."""

    def __init__(self) -> None:
        self.received: int | None = None
        """The first stop signal received (None: none yet)."""

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler: remember ``signum``, then raise its exception."""
        if self.received is None:
            self.received = signum
        self.check()

    def check(self) -> None:
        """Raise the exception of the signal received, if any (call it between steps of work,
        and once more before the output is put in place)."""
        if self.received == signal.SIGINT:
            raise KeyboardInterrupt
        if self.received is not None:
            raise Terminated


def ending(exc: KeyboardInterrupt | Terminated) -> tuple[int, str]:
    """(exit code, words for the message) of a command stopped by ``exc``."""
    if isinstance(exc, KeyboardInterrupt):
        return 128 + signal.SIGINT, "interrupted (Ctrl-C)"
    return 128 + signal.SIGTERM, "terminated (SIGTERM)"


@contextlib.contextmanager
def stop_signals() -> Iterator[StopGuard]:
    """While inside (main thread only), :data:`STOP_SIGNALS` go to a :class:`StopGuard`. A signal
    that was ignored (a background job of a script ignores SIGINT) stays ignored."""
    guard = StopGuard()
    with handlers_installed(STOP_SIGNALS, guard.on_signal) as installed:
        if not installed:
            yield guard
            return
        with _stops_not_printed_when_dropped():
            yield guard


@contextlib.contextmanager
def _stops_not_printed_when_dropped() -> Iterator[None]:
    """While inside, a stop dropped in a finaliser prints nothing (the guard raises it again)."""
    earlier_hook = sys.unraisablehook

    def quiet_stops(unraisable: Any) -> None:
        """A stop dropped in a finaliser is raised again by the guard: no "Exception ignored"
        traceback before the command's own one-line message."""
        if not isinstance(unraisable.exc_value, KeyboardInterrupt | Terminated):
            earlier_hook(unraisable)

    sys.unraisablehook = quiet_stops
    try:
        yield
    finally:
        sys.unraisablehook = earlier_hook

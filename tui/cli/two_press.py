"""A headless run's Ctrl-C: the first press stops after a checkpoint, the second stops at once."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import TypeVar

from engine.stop_rules import STOP_CHECKPOINT_S
from tui.cli.console import reader_may_leave

T = TypeVar("T")

FIRST_PRESS = (
    "stopping: if training is under way, rank 0 first writes a checkpoint at its next step (up "
    f"to {STOP_CHECKPOINT_S:g} s); then every process and machine is stopped. Ctrl-C again to "
    "stop at once"
)
SECOND_PRESS = "stopping at once, without waiting any longer for a checkpoint: tearing down"
LATER_PRESS = (
    "still tearing down (machines are being stopped so they do not keep billing): please wait"
)


class StoppedAtOnce(Exception):
    """The run was cancelled by a second Ctrl-C or a termination signal (its summary is written)."""


async def run_with_two_press_stop(
    start: Callable[[asyncio.Event], Awaitable[T]],
    say: Callable[[str], None],
    at_once: Callable[[], bool],
) -> T:
    """Await ``start(stop)`` with SIGINT handled by the loop: the first press sets ``stop`` (the
    runner asks for a checkpoint, then stops), the second cancels the run (its clean-up still
    runs), later ones only say that clean-up is under way. ``at_once()`` true (a termination
    signal was forwarded as SIGINT) cancels on the first press. ``say`` prints one line.

    Raises :class:`StoppedAtOnce` when the run was cancelled by a press."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    stop = asyncio.Event()
    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses == 1 and not at_once():
            stop.set()  # before anything is said: a reader that left must not keep it unset
            tell(FIRST_PRESS)
        elif not main.cancelling():
            main.cancel()
            if not at_once():
                tell(SECOND_PRESS)
        else:
            tell(LATER_PRESS)

    def tell(line: str) -> None:
        with reader_may_leave():
            say(line)

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        return await start(stop)
    except asyncio.CancelledError:
        if main.cancelling():
            raise StoppedAtOnce from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)

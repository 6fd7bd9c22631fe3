"""engine.signal_handlers: handlers for a block, earlier ones back after, ignored ones kept."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

import pytest

from engine.signal_handlers import handlers_installed


class Caught(Exception):
    pass


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Caught(signum)


def test_installed_for_the_block_and_restored_after() -> None:
    before = signal.getsignal(signal.SIGUSR1)
    with handlers_installed([signal.SIGUSR1], _raise) as installed:
        assert installed
        with pytest.raises(Caught):
            os.kill(os.getpid(), signal.SIGUSR1)
    assert signal.getsignal(signal.SIGUSR1) is before


def test_an_ignored_signal_stays_ignored() -> None:
    earlier = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        with handlers_installed([signal.SIGUSR2], _raise):
            assert signal.getsignal(signal.SIGUSR2) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGUSR2)  # ignored: nothing raised
        assert signal.getsignal(signal.SIGUSR2) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR2, earlier)


def test_outside_the_main_thread_nothing_changes() -> None:
    seen: list[bool] = []

    def other() -> None:
        with handlers_installed([signal.SIGUSR1], _raise) as installed:
            seen.append(installed)
            seen.append(signal.getsignal(signal.SIGUSR1) is _raise)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen == [False, False]

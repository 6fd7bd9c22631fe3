"""The headless run's Ctrl-C: first press a stop with a checkpoint, second at once, then wait."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from tui.cli.two_press import (
    FIRST_PRESS,
    LATER_PRESS,
    SECOND_PRESS,
    StoppedAtOnce,
    run_with_two_press_stop,
)


def _press() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_one_press_sets_stop_and_the_run_ends_itself() -> None:
    said: list[str] = []

    async def run(stop: asyncio.Event) -> str:
        asyncio.get_running_loop().call_later(0.05, _press)
        await asyncio.wait_for(stop.wait(), 10)
        await asyncio.sleep(0.05)  # the checkpoint's wait: not cut short
        return "stopped after a checkpoint"

    result = asyncio.run(run_with_two_press_stop(run, said.append, at_once=lambda: False))
    assert result == "stopped after a checkpoint" and said == [FIRST_PRESS]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler given back


def test_second_press_cancels_and_later_presses_do_not_cut_the_clean_up() -> None:
    said: list[str] = []
    cleaned: list[str] = []

    async def run(stop: asyncio.Event) -> str:
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, _press)
        await asyncio.wait_for(stop.wait(), 10)
        loop.call_later(0.05, _press)
        try:
            await asyncio.sleep(30)  # the checkpoint never comes
        finally:
            loop.call_later(0.05, _press)  # a third press while machines are torn down
            await asyncio.sleep(0.3)
            cleaned.append("torn down")
        return "never"

    with pytest.raises(StoppedAtOnce):
        asyncio.run(run_with_two_press_stop(run, said.append, at_once=lambda: False))
    assert cleaned == ["torn down"] and said == [FIRST_PRESS, SECOND_PRESS, LATER_PRESS]


def test_a_forwarded_termination_signal_cancels_on_the_first_press() -> None:
    said: list[str] = []

    async def run(stop: asyncio.Event) -> str:
        asyncio.get_running_loop().call_later(0.05, _press)
        await asyncio.sleep(30)
        return "never"

    with pytest.raises(StoppedAtOnce):
        asyncio.run(run_with_two_press_stop(run, said.append, at_once=lambda: True))
    assert said == []

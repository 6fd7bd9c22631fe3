"""SIGTERM, SIGHUP and an outside SIGINT end the dashboard as quitting does: a live run stopped
and torn down first, then exit 128 + the signal."""

from __future__ import annotations

import signal

import pytest

from tests.tui.fakes import FakeRunner, build_app
from tests.tui.scenes import SIZE, settle, start_cloud_run


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
async def test_a_stop_signal_stops_the_live_run_then_exits_with_its_code(signum: int) -> None:
    """The dashboard died at SIGTERM or SIGHUP (its terminal closed) with the run's cloud
    nodes still up: nothing tore them down."""
    runner = FakeRunner()
    app = build_app(runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        await start_cloud_run(pilot, app, runner)
        app.stop_signal(signum)  # what the handler run_dashboard installs calls
        app.stop_signal(signal.SIGTERM)  # a second signal changes nothing
        await settle(pilot)
    assert runner.stopped and app.return_code == 128 + signum


async def test_a_stop_signal_with_nothing_running_exits_at_once() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.stop_signal(signal.SIGHUP)
        await pilot.pause()
    assert app.return_code == 128 + signal.SIGHUP


@pytest.mark.parametrize("key", ["q", "ctrl+q"])
async def test_quit_during_a_live_local_run_asks_then_stops_it_first(key: str) -> None:
    """`q` (and Textual's own ctrl+q) quit at once during a live local run: the training was
    killed with no word and its reason recorded as a Ctrl-C."""
    from tests.tui.scenes import settle
    from tui.screens.modals import ConfirmScreen

    runner = FakeRunner()  # holds after a few events, as a training does, until stopped
    app = build_app(runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")  # local-cpu is first
        await runner.holding.wait()
        assert app.run_screen.live and app.run_screen.cloud_resources_up() == 0
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and not runner.stopped
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running and not runner.stopped
        await pilot.press(key)
        await pilot.pause()
        await pilot.press("y")
        await settle(pilot)
    assert runner.stopped and app.return_code == 0

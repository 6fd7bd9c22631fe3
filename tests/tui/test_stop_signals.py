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

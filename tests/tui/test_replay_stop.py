"""Stopping a replay with `s`: the screen says the replay stopped, not that the run runs on."""

from __future__ import annotations

from tests.tui.fakes import FIXTURE_RUN, build_app
from tests.tui.scenes import SIZE, settle
from tui.screens.run import RunScreen
from tui.widgets.nav import NavBar


async def test_a_stopped_replay_is_not_left_running() -> None:
    """It stayed on "replay ended (running)", "● running" and an ETA, and the footer still
    offered Stop and Tear down for a recording."""
    app = build_app(start="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("3")
        screen = app.screen
        assert isinstance(screen, RunScreen)
        screen.start_replay(FIXTURE_RUN, speed=1.0)  # nearly 5 minutes of recording
        await pilot.pause(1.0)
        assert screen.state.status == "running"
        assert screen.check_action("stop", ()) and not screen.check_action("teardown", ())
        await pilot.press("s")
        await settle(pilot)
        assert screen.state.status == "replay stopped"
        assert "replay ended (replay stopped)" in str(screen.query_one(NavBar).render())
        assert "running" not in str(screen.query_one("#run-status").render())
        assert not screen.check_action("stop", ()) and not screen.check_action("resume", ())

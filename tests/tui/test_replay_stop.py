"""Stopping a replay with `s`: the screen says the replay stopped, not that the run runs on; a
replay asked for while a run is live asks first; a recording with no event is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.tui.fakes import FIXTURE_RUN, FakeRunner, build_app
from tests.tui.scenes import SIZE, settle, start_cloud_run
from tui.screens.modals import ConfirmScreen, ErrorScreen
from tui.screens.run import RunScreen
from tui.screens.runs import RunsScreen
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


async def test_a_replay_asked_for_while_a_run_is_live_asks_before_stopping_it() -> None:
    """`p` on the Runs screen stopped the live run without a word (its summary then read
    "interrupted by the user"): it now asks, as starting another run does."""
    runner = FakeRunner()
    app = build_app(runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        screen = await start_cloud_run(pilot, app, runner)
        await pilot.press("4")
        for _ in range(50):  # the live run's worker holds: poll, not settle
            if isinstance(app.screen, RunsScreen) and app.screen.current() is not None:
                break
            await pilot.pause(0.1)
        assert isinstance(app.screen, RunsScreen)
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        assert screen.live and not runner.stopped
        await pilot.press("p")
        await pilot.pause()
        await pilot.press("y")
        for _ in range(100):
            if screen.state.run_id != "" and not screen.live and app.screen is screen:
                break
            await pilot.pause(0.1)
        assert runner.stopped and app.screen is screen and not screen.live
        assert screen.source.startswith("replay ")


async def test_replaying_a_folder_whose_events_are_garbage_says_so(tmp_path: Path) -> None:
    """The CLI refuses a recording with no event; the dashboard opened an empty Run screen
    "waiting for events" that never came."""
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURE_RUN, runs / "garbage")
    (runs / "garbage" / "events.jsonl").write_bytes(bytes(range(256)) * 40)
    app = build_app(runs_dir=runs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen)
        assert "no sentitop event" in str(app.screen.query_one("#dialog-body").render())

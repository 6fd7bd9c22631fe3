"""The Run screen offers `t` (tear down) only while a run's cloud machines can be up."""

from __future__ import annotations

from tests.tui.fakes import FakeRunner, build_app
from tests.tui.scenes import SIZE, settle, start_cloud_run
from tui.screens.run import RunScreen


async def test_a_live_local_run_offers_no_teardown() -> None:
    """A local run's footer read "t Tear down", and `t` only said no cloud resources were up."""
    runner = FakeRunner()
    app = build_app(runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")  # local-cpu is first
        await runner.holding.wait()
        await pilot.pause(0.1)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.live
        assert not screen.check_action("teardown", ())
        assert "t" not in {k for k, b in screen.active_bindings.items() if b.enabled}


async def test_a_live_cloud_run_offers_it_until_it_ends() -> None:
    runner = FakeRunner()
    app = build_app(runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        screen = await start_cloud_run(pilot, app, runner)
        assert screen.check_action("teardown", ())
        await screen.stop_and_wait(timeout=30)
        await settle(pilot)
        assert not screen.check_action("teardown", ())

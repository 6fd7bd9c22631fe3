"""The error dialog: q and the number keys work there too (testers took it for a hang)."""

from __future__ import annotations

import pytest

from tests.tui.fakes import build_app, failing_profiles
from tests.tui.scenes import SIZE, settle
from tui.screens.modals import ERROR_HINT, ErrorScreen
from tui.screens.prices import PricesScreen
from tui.screens.profiles import ProfilesScreen
from tui.screens.run import RunScreen
from tui.screens.runs import RunsScreen


async def test_q_on_the_error_dialog_closes_it_and_quits() -> None:
    app = build_app(load_profiles=failing_profiles)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ErrorScreen)
        await pilot.press("q")
        await settle(pilot)
        assert not app.is_running
    assert app.return_code == 0


@pytest.mark.parametrize(
    ("key", "expected"),
    [("1", ProfilesScreen), ("2", PricesScreen), ("3", RunScreen), ("4", RunsScreen)],
)
async def test_number_keys_close_the_error_dialog_and_switch(key: str, expected: type) -> None:
    app = build_app(load_profiles=failing_profiles)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ErrorScreen)
        await pilot.press(key)
        await settle(pilot)
        assert isinstance(app.screen, expected)
        assert not any(isinstance(s, ErrorScreen) for s in app.screen_stack)
        await pilot.press("1")  # the dialog is gone from the first screen's stack too
        await settle(pilot)
        assert isinstance(app.screen, ProfilesScreen)


async def test_error_dialog_says_which_keys_work() -> None:
    app = build_app(load_profiles=failing_profiles)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        hint = str(app.screen.query_one("#dialog-hint").render())
        assert hint == ERROR_HINT
        assert all(key in hint for key in ("enter", "esc", "q quit", "1-4"))

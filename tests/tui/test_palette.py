"""The command palette (ctrl+p) holds sentitop's screens and the keys of the screen under it."""

from __future__ import annotations

from textual.command import CommandPalette

from tests.tui.fakes import build_app
from tests.tui.scenes import SIZE, settle
from tui.screens.runs import RunsScreen


async def test_the_palette_offers_the_screens_and_the_screens_keys() -> None:
    """It listed only Textual's own commands (Keys, Maximize, Quit, Screenshot, Theme): "run"
    or "loss" found nothing, though the footer advertised it."""
    app = build_app(start="runs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert titles[:4] == ["Profiles", "Prices", "Run", "Runs"]
        assert {"Select", "X-axis", "$ vs h", "Replay", "Help", "Theme"} <= set(titles)
        await pilot.press("ctrl+p")
        await settle(pilot)
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"prices", "enter")
        await settle(pilot)
        assert app.current_mode == "prices"
        await pilot.press("4", "ctrl+p")
        await settle(pilot)
        await pilot.press(*"$ vs h", "enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen) and screen.view == "cost"

"""Named dashboard scenes (app + key presses) shared by snapshot tests and the PNG screenshots."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from textual.pilot import Pilot

from tests.tui.fakes import FIXTURE_RUN, SINGLE_RUN, FakeRunner, build_app
from tui.app import SentitopApp
from tui.screens.run import RunScreen

SIZE = (120, 40)
"""Terminal size of snapshots and screenshots."""


async def settle(pilot: Pilot[int]) -> None:
    """Wait until workers (some start after the first frame) finish and the screen redrew."""
    for _ in range(3):
        await pilot.pause(0.05)
        await pilot.app.workers.wait_for_complete()
    await pilot.pause(0.05)


async def _runs_overlay(pilot: Pilot[int]) -> None:
    await settle(pilot)
    await pilot.press("space", "down", "space", "x")
    await settle(pilot)


async def _profiles_invalid(pilot: Pilot[int]) -> None:
    await settle(pilot)
    await pilot.press("down", "down")
    await settle(pilot)


async def _help(pilot: Pilot[int]) -> None:
    await settle(pilot)
    await pilot.press("question_mark")
    await settle(pilot)


@dataclass
class Scene:
    """An app, and what to do before the picture."""

    make: Callable[[], SentitopApp]
    run_before: Callable[[Pilot[int]], Awaitable[None]] = settle


SCENES: dict[str, Scene] = {
    "profiles": Scene(lambda: build_app(start="profiles"), _profiles_invalid),
    "prices": Scene(
        lambda: build_app(start="prices", selected_profile=Path("profiles/two-t4-nodes.yaml"))
    ),
    "run": Scene(lambda: build_app(replay=FIXTURE_RUN)),
    "run-single": Scene(lambda: build_app(replay=SINGLE_RUN)),
    "runs": Scene(lambda: build_app(start="runs"), _runs_overlay),
    "help": Scene(lambda: build_app(start="profiles"), _help),
}
"""Scene name -> scene (also the PNG file name under docs/screenshots/)."""


async def start_cloud_run(pilot, app: SentitopApp, runner: FakeRunner) -> RunScreen:  # type: ignore[no-untyped-def]
    """Start the fake cloud profile (second row) and wait until its run holds, live."""
    await settle(pilot)
    await pilot.press("down", "r")
    await pilot.pause()
    await pilot.press("y")  # start paid machines? (a cloud profile asks first)
    await runner.holding.wait()
    await pilot.pause(0.1)
    screen = app.screen
    assert isinstance(screen, RunScreen)
    return screen

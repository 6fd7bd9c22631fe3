"""Warnings (data-quality gates, a model below the majority rate) reach the log and the status."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.tui.fakes import build_app
from tests.tui.scenes import SIZE, settle
from tui.model import RunState
from tui.screens.run import RunScreen
from tui.widgets.log_pane import LogPane

BELOW = "accuracy 0.80 does not beat the majority rate 0.82 [/x] of the test split"


def test_warning_events_are_kept_and_logged_as_warnings() -> None:
    state = RunState()
    state.ingest({"type": "run_start", "t": 1.0, "run": "r", "profile": "p"})
    state.ingest(
        {"type": "warning", "t": 2.0, "stage": "train", "code": "below_majority", "message": BELOW}
    )
    assert [w["code"] for w in state.warnings] == ["below_majority"]
    line = state.log[-1]
    assert line.level == "warn" and line.text == f"warning: {BELOW}" and line.source == "train"


async def test_the_run_status_says_the_model_did_not_beat_the_majority_rate() -> None:
    async def runner(profile: Any, on_event: Any, stop: asyncio.Event, on_log: Any = None) -> str:
        on_event({"type": "run_start", "t": 1.0, "run": "r1", "profile": "p", "world_size": 2})
        on_event(
            {"type": "warning", "t": 2.0, "stage": "train", "code": "below_majority",
             "message": BELOW}
        )  # fmt: skip
        on_event({"type": "run_end", "t": 3.0, "status": "ok"})
        return "ok"

    app = build_app(runner=runner)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        screen = app.run_screen
        for _ in range(100):
            await pilot.pause(0.05)
            if not screen.live and screen.state.finished:
                break
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        status = str(app.screen.query_one("#run-status").render())
        assert "ok" in status and "⚠ below the majority rate" in status
        shown = [line.text for line in app.screen.query_one(LogPane).visible_lines()]
        assert f"warning: {BELOW}" in shown

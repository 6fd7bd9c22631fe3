"""A live local run in the dashboard: train progress, the running $ and the cost plot move
between two frames taken seconds apart (real processes, a tiny profile)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import yaml

from tests.tui.scenes import SIZE, settle
from tui.app import make_app
from tui.screens.run import RunScreen

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _tiny_profile(folder: Path) -> None:
    profile = yaml.safe_load((ROOT / "profiles" / "local.yaml").read_text())
    profile["name"] = "tiny"
    profile["data"]["synthetic"]["size"] = "8MB"
    profile["train"].update(epochs=3, log_every=2, warmup_steps=2)
    profile["train"].pop("batch", None)
    profile["train"]["batch_size"] = 64
    folder.mkdir()
    (folder / "tiny.yaml").write_text(yaml.safe_dump(profile))


def _frame(screen: RunScreen) -> tuple[str, str, str]:
    """What a person reads: the stages line, the status lines, the cost plot."""
    stages = str(screen.query_one("#run-stages").render())
    status = str(screen.query_one("#run-status").render())
    cost = str(screen.query_one("#plot-cost").render())
    return stages, status, cost


def _cost(status: str) -> str:
    return status.split("cost ", 1)[1].split()[0]


@pytest.mark.timeout(600)
async def test_live_run_moves_progress_cost_and_plot(tmp_path: Path) -> None:
    _tiny_profile(tmp_path / "profiles")
    app = make_app(profiles_dir=tmp_path / "profiles", runs_dir=tmp_path / "runs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        screen = app.run_screen
        deadline = time.monotonic() + 300
        first = None
        while first is None and time.monotonic() < deadline and screen.live:
            await pilot.pause(0.2)
            train = screen.state.stages.get("train")
            if train is not None and train.total and 0 < train.done < train.total:
                first = _frame(screen)
        assert first is not None, ("no train progress seen", screen.state.status, _frame(screen))
        assert "steps · epoch" in first[0] and "0/0" not in first[0]
        later = first
        while time.monotonic() < deadline and screen.live:
            await pilot.pause(0.5)
            later = _frame(screen)
            if all(a != b for a, b in zip(first, later, strict=True)) and (
                _cost(first[1]) != _cost(later[1])
            ):
                break
        assert later[0] != first[0], "train progress did not move"
        assert _cost(later[1]) != _cost(first[1]), ("running $ did not move", first[1], later[1])
        assert later[2] != first[2], "cost plot did not move"
        while screen.live and time.monotonic() < deadline:
            await pilot.pause(0.5)
        assert screen.state.status == "ok", (screen.state.status, screen.state.reason)
        ends = [ln.text for ln in screen.state.log if ln.text.startswith("stage train ")]
        assert len([t for t in ends if "ok" in t]) == 1  # one stage_end per stage
    shutil.rmtree(tmp_path / "runs", ignore_errors=True)

"""The real thing: `r` on the local profile runs remote.runner end to end inside the dashboard."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.tui.scenes import SIZE, settle
from tui.app import make_app
from tui.screens.profiles import ProfilesScreen
from tui.screens.run import RunScreen

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.mark.timeout(900)
async def test_local_profile_runs_live_in_the_dashboard(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    shutil.copy(ROOT / "profiles" / "local.yaml", profiles / "local.yaml")
    torch_before = "torch" in sys.modules  # other tests in this process may have loaded it
    app = make_app(profiles_dir=profiles, runs_dir=tmp_path / "runs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ProfilesScreen)
        assert [r.name for r in app.screen.rows] == ["local"]
        await pilot.press("r")
        await pilot.pause(0.5)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.live
        while screen.live:
            await pilot.pause(1.0)
        state = screen.state
        assert state.status == "ok", (state.status, state.reason, [e for e in state.errors])
        assert state.epochs_seen >= 1 and len(state.train_loss) > 0
        assert {"preprocess", "train"} <= set(state.stages)
        assert state.usd > 0  # the local profile is priced as an m5.large
        assert len(list((tmp_path / "runs").glob("*/events.jsonl"))) == 1
    assert torch_before or "torch" not in sys.modules  # training ran in child processes

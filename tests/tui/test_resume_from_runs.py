"""The Runs screen's `c` resumes a stopped run from its checkpoint with the real runner."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable
from textual.widgets._toast import Toast

from tests.run.test_resume_run import PROFILE, stopped_at_checkpoint
from tests.tui.fakes import build_app
from tests.tui.scenes import SIZE, settle
from tui.services import runner_for


async def _until(pilot: Any, done: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.1)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_c_on_a_stopped_run_resumes_it_in_a_new_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "resume-local.yaml"
    path.write_text(PROFILE)
    runs = tmp_path / "runs"
    first, _ = await stopped_at_checkpoint(path, runs)
    app = build_app(start="runs", runs_dir=runs, runner=runner_for(runs))  # type: ignore[arg-type]
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await _until(pilot, lambda: len(app.runs_screen.rows) == 1, 30)
        await pilot.press("c")
        await _until(pilot, lambda: len(list(runs.iterdir())) == 2, 60)
        (second,) = [p for p in runs.iterdir() if p != first.run_dir]
        await _until(pilot, lambda: (second / "summary.json").is_file(), 300)
        summary = json.loads((second / "summary.json").read_text())
        assert summary["status"] == "ok" and summary["resumed_from"] == str(first.run_dir)
        await _until(pilot, lambda: app.run_screen.state.status == "ok", 30)
        # the finished run is not resumable: the screen says why, nothing starts
        await pilot.press("4")
        await settle(pilot)
        rows = app.runs_screen.rows
        index = next(i for i, r in enumerate(rows) if r.path == str(second))
        app.runs_screen.query_one("#runs-table", DataTable).move_cursor(row=index)
        await pilot.press("c")
        await _until(pilot, lambda: bool(app.screen.query(Toast)), 30)
        toasts = " ".join(str(t.render()) for t in app.screen.query(Toast))
        assert "finished ok" in toasts
        assert len(list(runs.iterdir())) == 2

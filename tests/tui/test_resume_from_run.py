"""Resume chains in the dashboard: `c` on the Run screen of a stopped run, Σ on the Runs screen."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from textual.widgets import DataTable
from textual.widgets._toast import Toast

from engine.events import encode_event
from remote.checkpoint_keeper import NODE_CHECKPOINT
from remote.profile import load_profile
from tests.bad_inputs import torch_like_zip
from tests.review.conftest import TINY
from tests.tui.fakes import build_app
from tests.tui.scenes import SIZE, settle
from tests.tui.test_runs_screen import T0, write_summary
from tui.model.rows import load_run_rows


def stopped_run(folder: Path, *, usd: float, resumed_from: Path | None = None) -> Path:
    """A run folder as the runner leaves a run stopped after a checkpoint (profile, events up to
    `run_end` interrupted, summary, the checkpoint)."""
    folder.mkdir(parents=True)
    (folder / "profile.yaml").write_text(yaml.safe_dump(load_profile(TINY).resolved()))
    events = [
        {"type": "run_start", "t": T0, "run": folder.name, "profile": "tiny", "world_size": 1},
        {"type": "train_start", "t": T0 + 1, "rank": 0, "epochs": 2, "device": "cpu"},
        {"type": "checkpoint", "t": T0 + 30, "epoch": 1, "step": 0},
        {"type": "run_end", "t": T0 + 40, "status": "interrupted", "reason": "stopped"},
    ]
    (folder / "events.jsonl").write_text("".join(encode_event(e) + "\n" for e in events))
    write_summary(folder)
    summary = json.loads((folder / "summary.json").read_text())
    summary |= {"profile": "tiny", "usd": usd, "world_size": 1}
    summary |= {"resumed_from": str(resumed_from)} if resumed_from else {}
    (folder / "summary.json").write_text(json.dumps(summary))
    torch_like_zip(folder / NODE_CHECKPOINT)
    return folder


class Recorder:
    """A run starter that records what it was asked to resume and ends at once."""

    def __init__(self) -> None:
        self.resumed: list[Path | None] = []

    async def __call__(
        self, profile: Any, on_event: Any, stop: asyncio.Event, on_log: Any = None, **more: Any
    ) -> str:
        self.resumed.append(more.get("resume_from"))
        return "ok"


def footer_keys(app: Any) -> set[str]:
    """Keys the Run screen's footer offers now."""
    return {key for key, active in app.run_screen.active_bindings.items() if active.enabled}


async def test_c_on_the_run_screen_of_a_stopped_run_resumes_it(tmp_path: Path) -> None:
    """The Run screen of a stopped run had no way on: only the Runs screen's `c` resumed it."""
    first = stopped_run(tmp_path / "20261127-100000-tiny", usd=0.5)
    runner = Recorder()
    app = build_app(replay=first, runs_dir=tmp_path, runner=runner)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.run_screen.state.status == "interrupted"
        assert app.run_screen.check_action("resume", ()) and "c" in footer_keys(app)
        await pilot.press("c")
        deadline = time.monotonic() + 30
        while not runner.resumed:
            assert time.monotonic() < deadline, "the resume never started"
            await pilot.pause(0.1)
        assert runner.resumed == [first.absolute()]
        await settle(pilot)
        assert "c" not in footer_keys(app)  # the new run did not stop


async def test_the_replay_of_a_run_resumed_since_says_so_and_offers_no_c(tmp_path: Path) -> None:
    """Its recorded reason still said "resume continues from it", and `c` was offered for a
    run whose resume the runner refuses ("already resumed by …")."""
    first = stopped_run(tmp_path / "20261127-100000-tiny", usd=0.5)
    stopped_run(tmp_path / "20261127-110000-tiny", usd=0.3, resumed_from=first)
    app = build_app(replay=first, runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.run_screen.state.status == "interrupted"
        assert not app.run_screen.check_action("resume", ()) and "c" not in footer_keys(app)
        assert "resumed since by 20261127-110000-tiny" in app.run_screen.source


async def test_the_later_leg_is_looked_up_off_the_ui_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lookup reads every run's summary: with many runs it froze the dashboard."""
    import remote.resume_chain as chain

    first = stopped_run(tmp_path / "20261127-100000-tiny", usd=0.5)
    stopped_run(tmp_path / "20261127-110000-tiny", usd=0.3, resumed_from=first)
    threads: list[str] = []
    real = chain.continued_by

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(chain, "continued_by", recording)
    app = build_app(replay=first, runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "resumed since by 20261127-110000-tiny" in app.run_screen.source
    assert threads and threading.main_thread().name not in threads


def test_runs_rows_show_a_chain_total_and_which_run_continued(tmp_path: Path) -> None:
    """The Runs screen showed each run's own $: $0.30 for a training that cost $0.80."""
    first = stopped_run(tmp_path / "20261127-100000-tiny", usd=0.5)
    stopped_run(tmp_path / "20261127-110000-tiny", usd=0.3, resumed_from=first)
    old, new = load_run_rows(tmp_path)
    assert (old.status, old.resumed_by) == ("interrupted", new.run)
    assert new.usd == pytest.approx(0.3) and new.chain_usd == pytest.approx(0.8)
    assert new.chain_hours == pytest.approx(1.0) and new.chain_runs == 2


async def test_runs_screen_marks_the_chain(tmp_path: Path) -> None:
    first = stopped_run(tmp_path / "20261127-100000-tiny", usd=0.5)
    stopped_run(tmp_path / "20261127-110000-tiny", usd=0.3, resumed_from=first)
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        table = app.runs_screen.query_one("#runs-table", DataTable)
        cells = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        # how it ended, as `sentitop runs` says it ("continued" before), marked as resumed
        assert cells[0][-1] == "interrupted ↪" and cells[1][5:7] == ["Σ1.00", "Σ$0.800"]
        table.move_cursor(row=1)
        await settle(pilot)
        note = str(app.runs_screen.query_one("NavBar").note)  # type: ignore[attr-defined]
        assert "resumes 20261127-100000-tiny · Σ over 2 runs: $0.800, 1.00 h" in note
        table.move_cursor(row=0)
        await pilot.press("c")  # resuming it again would pay for its epochs twice
        await settle(pilot)
        toasts = " ".join(str(t.render()) for t in app.screen.query(Toast))
        assert "already resumed by run 20261127-110000-tiny" in toasts
        assert "bad input" not in toasts and "cannot resume" in toasts  # a key, not an input
        assert app.run_screen.live_row is None


async def test_a_chain_of_seconds_shows_its_hours_whole(tmp_path: Path) -> None:
    """A local run stopped and resumed (28 s in all) read "Σ0.00": "Σ0.008" is six characters
    and the hours column held five. The column says which hours it is: wall time (the $-vs-hours
    pane plots training hours)."""
    first = stopped_run(tmp_path / "20261127-100000-tiny", usd=0.5)
    second = stopped_run(tmp_path / "20261127-110000-tiny", usd=0.3, resumed_from=first)
    for folder, wall_s in ((first, 12.0), (second, 16.1)):
        summary = json.loads((folder / "summary.json").read_text())
        (folder / "summary.json").write_text(json.dumps(summary | {"wall_s": wall_s}))
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.runs_screen.query_one("#runs-table", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        at = labels.index("wall h")
        width = list(table.columns.values())[at].width
        cells = [str(table.get_row_at(i)[at]) for i in range(table.row_count)]
        assert cells[1] == "Σ0.008" and all(len(cell) <= width for cell in cells)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_c_on_the_run_screen_resumes_with_the_real_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.run.test_resume_run import PROFILE, stopped_at_checkpoint
    from tests.tui.test_resume_from_runs import _until
    from tui.services import runner_for

    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "resume-local.yaml"
    path.write_text(PROFILE)
    runs = tmp_path / "runs"
    first, _ = await stopped_at_checkpoint(path, runs)
    app = build_app(replay=first.run_dir, runs_dir=runs, runner=runner_for(runs))  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: "c" in footer_keys(app), 30)
        await pilot.press("c")
        await _until(pilot, lambda: len(list(runs.iterdir())) == 2, 60)
        (second,) = [p for p in runs.iterdir() if p != first.run_dir]
        await _until(pilot, lambda: (second / "summary.json").is_file(), 300)
        summary = json.loads((second / "summary.json").read_text())
        assert summary["status"] == "ok" and summary["resumed_from"] == str(first.run_dir)
        await _until(pilot, lambda: app.run_screen.state.status == "ok", 30)
        assert "c" not in footer_keys(app)


async def test_the_runs_note_counts_what_the_filter_shows(tmp_path: Path) -> None:
    """With / narrowing the table to one row, the note still said "2 runs"."""
    stopped_run(tmp_path / "20261127-100000-tiny", usd=0.5)
    stopped_run(tmp_path / "20261127-110000-other", usd=0.3)
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        note = app.runs_screen.query_one("NavBar")
        assert str(note.note).startswith("2 runs · ")  # type: ignore[attr-defined]
        await pilot.press("slash", *"other")
        await settle(pilot)
        assert [r.run for r in app.runs_screen.shown] == ["20261127-110000-other"]
        assert str(note.note).startswith("1 of 2 runs match 'other' · ")  # type: ignore[attr-defined]
        await pilot.press("escape")
        await settle(pilot)
        assert str(note.note).startswith("2 runs · ")  # type: ignore[attr-defined]

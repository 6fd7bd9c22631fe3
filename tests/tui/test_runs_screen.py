"""Runs screen: the list follows runs started here and new folders; ranks, epochs of a stop."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.events import JsonlFileSink, encode_event
from tests.tui.fakes import SINGLE_RUN, build_app
from tests.tui.scenes import SIZE, settle
from tests.tui.test_app import as_text, notes
from tui.model.rows import load_run_rows
from tui.screens import runs
from tui.screens.runs import RunsScreen

T0 = 1_763_900_000.0


def stopped_cpu_run(folder: Path, *, epoch_events: int = 1, checkpoint_epoch: int = 2) -> Path:
    """A local CPU run stopped in its third epoch: events up to a checkpoint after epoch 2, and
    the runner's summary.json without training results (the trainer never wrote its summary)."""
    folder.mkdir(parents=True)
    events = [
        {"type": "run_start", "t": T0, "run": folder.name, "profile": "local-cpu", "world_size": 2},
        {"type": "train_start", "t": T0 + 1, "rank": 0, "epochs": 5, "device": "cpu"},
        *(
            {"type": "epoch", "t": T0 + 10 + e, "epoch": e, "accuracy": 0.7}
            for e in range(epoch_events)
        ),
        {"type": "checkpoint", "t": T0 + 30, "epoch": checkpoint_epoch, "step": 0},
        {"type": "step", "t": T0 + 31, "epoch": 2, "global_step": 99, "loss": 0.4},
    ]
    lines = [encode_event(e) for e in events]
    (folder / "events.jsonl").write_text("\n".join([*lines, "a plain log line", ""]))
    return folder


def write_summary(folder: Path, status: str = "interrupted") -> None:
    summary = {
        "run": folder.name,
        "profile": "local-cpu",
        "status": status,
        "world_size": 2,
        "wall_s": 1800.0,
        "usd": 0.0,
        "train": {},
    }
    (folder / "summary.json").write_text(json.dumps(summary))


def test_a_stopped_run_shows_the_epochs_it_completed_and_its_cpu_ranks(tmp_path: Path) -> None:
    write_summary(stopped_cpu_run(tmp_path / "20261122-090000-local-cpu"))
    write_summary(stopped_cpu_run(tmp_path / "20261122-100000-local-cpu", epoch_events=0))
    write_summary(stopped_cpu_run(tmp_path / "20261122-110000-local-cpu", epoch_events=3))
    rows = load_run_rows(tmp_path)
    assert [(r.epochs, r.gpus, r.device, r.status) for r in rows] == [
        (2, 2, "CPU", "interrupted"),  # the checkpoint after epoch 2 (epoch events: only 1)
        (2, 2, "CPU", "interrupted"),  # no epoch events at all
        (3, 2, "CPU", "interrupted"),  # epoch events beyond the checkpoint
    ]
    assert rows[0].hours == pytest.approx(0.5)  # summary.json has wall_s, not hours


def test_run_rows_are_read_again_only_when_their_folder_changed(tmp_path: Path) -> None:
    shutil.copytree(SINGLE_RUN, tmp_path / "a")
    folder = stopped_cpu_run(tmp_path / "b")
    cache: dict[str, Any] = {}
    first = load_run_rows(tmp_path, cache)
    again = load_run_rows(tmp_path, cache)
    assert [r.status for r in first] == ["ok", "unfinished"]  # events, no run_end, no writer
    assert all(x is y for x, y in zip(first, again, strict=True))  # nothing re-read
    write_summary(folder, "failed")
    third = load_run_rows(tmp_path, cache)
    assert third[0] is first[0] and third[1].status == "failed"
    shutil.rmtree(tmp_path / "a")
    assert [r.run for r in load_run_rows(tmp_path, cache)] == ["b"] and len(cache) == 1


async def test_runs_table_header_and_cells_say_ranks_and_device(tmp_path: Path) -> None:
    shutil.copytree(SINGLE_RUN, tmp_path / "20261120-single")
    write_summary(stopped_cpu_run(tmp_path / "20261122-090000-local-cpu"))
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#runs-table")
        labels = [str(c.label) for c in table.columns.values()]  # type: ignore[attr-defined]
        assert "GPUs" not in labels and "ranks" in labels
        cells = [table.get_row_at(i) for i in range(2)]  # type: ignore[attr-defined]
        ranks, epochs = labels.index("ranks"), labels.index("epochs")
        assert [(row[ranks], row[epochs]) for row in cells] == [("1 GPU", "3"), ("2 CPU", "2")]


async def test_a_run_of_seconds_does_not_read_zero_hours(tmp_path: Path) -> None:
    """The demo profile's 15-second run read "0.00" hours on the Runs screen."""
    for name, wall_s in (("20261122-090000-local-cpu", 15.2), ("20261122-100000-local-cpu", 1800)):
        folder = stopped_cpu_run(tmp_path / name)
        write_summary(folder, status="ok")
        summary = json.loads((folder / "summary.json").read_text())
        (folder / "summary.json").write_text(json.dumps(summary | {"wall_s": wall_s}))
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#runs-table")
        labels = [str(c.label) for c in table.columns.values()]  # type: ignore[attr-defined]
        hours = labels.index("wall h")
        cells = [table.get_row_at(i)[hours] for i in range(2)]  # type: ignore[attr-defined]
        assert cells == ["0.004", "0.50"]


@pytest.mark.parametrize(
    ("size", "said"), [(SIZE, "below majority"), ((200, 40), "ok, below majority 0.800")]
)
async def test_a_model_below_the_majority_rate_is_not_listed_as_plain_ok(
    tmp_path: Path, size: tuple[int, int], said: str
) -> None:
    """The Runs screen showed "ok" for a run whose summary warns that its accuracy (0.221)
    does not beat the majority rate (0.800); `sentitop runs` already said so. Where the
    whole phrase does not fit the column, its words do (it read "ok, below m"). A run whose
    summary warns of something else was a plain "ok" too (the end-of-run table said so)."""
    warned = [{"code": "path_unused", "message": "the LSTM got weight 0"}] * 2
    for name, accuracy, warnings in (
        ("20261122-090000-local-cpu", 0.221, [{"code": "below_majority", "message": "none"}]),
        ("20261122-100000-local-cpu", 0.9, []),
        ("20261122-110000-local-cpu", 0.9, warned),
    ):
        folder = stopped_cpu_run(tmp_path / name)
        write_summary(folder, status="ok")
        summary = json.loads((folder / "summary.json").read_text())
        summary |= {"accuracy": accuracy, "majority_rate": 0.8, "warnings": warnings}
        (folder / "summary.json").write_text(json.dumps(summary))
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#runs-table")
        labels = [str(c.label) for c in table.columns.values()]  # type: ignore[attr-defined]
        cells = [table.get_row_at(i) for i in range(3)]  # type: ignore[attr-defined]
        status = labels.index("status")
        assert [str(row[status]) for row in cells] == [said, "ok", "ok, 2 warnings"]
        assert [row[status].style for row in cells] == ["bold yellow", "", "yellow"]
        assert len(said) <= table.width_of("status")  # type: ignore[attr-defined]


async def test_replaying_a_run_without_events_says_so_and_stays_on_the_runs_screen(
    tmp_path: Path,
) -> None:
    """`p` on a run whose events.jsonl is gone switched to a Run screen left at "waiting for
    events" behind the error."""
    from tui.screens.modals import ErrorScreen

    folder = stopped_cpu_run(tmp_path / "20261122-090000-local-cpu")
    write_summary(folder, status="ok")
    (folder / "events.jsonl").unlink()
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        assert isinstance(app.screen, ErrorScreen)
        assert f"{folder}: no events.jsonl here" in app.screen.message
        assert "nothing to replay" in app.screen.message
        assert "pass a run folder" not in app.screen.message  # the CLI's hint: it picked one
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, RunsScreen)


async def test_the_epochs_table_of_a_replay_ends_on_its_last_epoch(tmp_path: Path) -> None:
    """With 30 epochs the table showed the first rows while the run was at its last epoch:
    the latest ones needed scrolling by hand."""
    from textual.widgets import DataTable

    folder = stopped_cpu_run(tmp_path / "20261122-090000-local-cpu", epoch_events=30)
    write_summary(folder, status="interrupted")
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        table = app.screen.query_one("#epochs", DataTable)
        await until(pilot, lambda: table.row_count == 30)
        await settle(pilot)
        assert table.cursor_row == 29 and table.scroll_y > 0  # the last epoch is in view
        assert str(table.get_row_at(29)[0]) == "30"


async def until(pilot: Any, done: Any, seconds: float = 5.0) -> None:
    """Pause until ``done()`` (a live run holds its worker: `settle` would wait for ever)."""
    for _ in range(int(seconds / 0.05)):
        if done():
            return
        await pilot.pause(0.05)


class FolderRunner:
    """A runner that, like remote.runner, makes its run folder, holds its events file open
    while it runs (until stopped) and writes summary.json at the end."""

    def __init__(self, runs_dir: Path) -> None:
        self.folder = runs_dir / "20261122-120000-local-cpu"
        self.started = asyncio.Event()

    async def __call__(
        self, profile: Any, on_event: Any, stop: asyncio.Event, on_log: Any = None
    ) -> str:
        stopped_cpu_run(self.folder)
        sink = JsonlFileSink(self.folder / "events.jsonl")  # held while the run lives
        on_event({"type": "run_start", "t": T0, "run": self.folder.name, "profile": "local-cpu"})
        self.started.set()
        await stop.wait()
        write_summary(self.folder)
        sink.close()
        on_event({"type": "run_end", "t": T0 + 40, "status": "interrupted"})
        return "interrupted"


async def test_runs_list_follows_a_run_started_and_ended_from_the_dashboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs, "POLL_S", 3600.0)  # no periodic look: the dashboard's own news
    shutil.copytree(SINGLE_RUN, tmp_path / "20261120-single")
    runner = FolderRunner(tmp_path)
    app = build_app(runner=runner, runs_dir=tmp_path)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")  # the Runs screen: one run
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen) and len(screen.rows) == 1
        await pilot.press("1", "r")  # start local-cpu; the Run screen shows
        await runner.started.wait()
        await pilot.press("4")  # back on Runs: the new run is listed without `u`
        await until(pilot, lambda: len(screen.rows) == 2)
        assert [(r.run, r.status) for r in screen.rows] == [
            ("20261120-single", "ok"),
            ("20261122-120000-local-cpu", "running"),
        ]
        await app.run_screen.stop_and_wait()  # the run ends while the Runs screen shows
        await until(pilot, lambda: screen.rows[1].status != "running")
        assert app.screen is app.runs_screen
        assert [(r.status, r.epochs) for r in screen.rows] == [("ok", 3), ("interrupted", 2)]


async def test_runs_list_notices_new_run_folders_by_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs, "POLL_S", 0.1)
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen) and screen.rows == []
        shutil.copytree(SINGLE_RUN, tmp_path / "20261120-single")  # e.g. `sentitop run` elsewhere
        await until(pilot, lambda: bool(screen.rows))
        assert [r.run for r in screen.rows] == ["20261120-single"]


async def test_runs_list_looks_again_when_the_screen_shows_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs, "POLL_S", 3600.0)
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen) and screen.rows == []
        await pilot.press("1")
        shutil.copytree(SINGLE_RUN, tmp_path / "20261120-single")
        await pilot.press("4")
        await settle(pilot)
        assert [r.run for r in screen.rows] == ["20261120-single"]


def test_long_run_ids_keep_their_time_and_their_distinguishing_end() -> None:
    from tui.screens.runs import RUN_WIDTH, fit_run_id

    short = "20261127-235049-small"
    assert fit_run_id(short) == short
    twins = ["20261127-235049-ssh-loopback", "20261127-235049-ssh-loopback-2"]
    cut = [fit_run_id(r) for r in twins]
    assert all(len(c) == RUN_WIDTH and c.startswith("20261127-235049…") for c in cut)
    assert cut[0] != cut[1] and cut[1].endswith("back-2")


async def test_the_loss_plot_says_how_to_fill_it(tmp_path: Path) -> None:
    """It said "waiting for data…" with nothing selected, as if something were loading."""
    from tui.widgets.line_plot import LinePlot

    shutil.copytree(SINGLE_RUN, tmp_path / "20261120-single")
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        plot = app.screen.query_one("#overlay", LinePlot)
        assert "select runs with space" in plot.render().plain
        await pilot.press("space")
        await settle(pilot)
        assert plot.lines and "select runs" not in plot.render().plain


async def test_v_shows_cost_vs_speed_of_the_selected_runs(tmp_path: Path) -> None:
    """The review's $ vs hours, frontier and efficiency were only in `sentitop report`: the
    dashboard's view of them existed but no screen showed it."""
    from tests.review.conftest import write_run
    from tui.widgets.cost_speed import CostSpeedView

    write_run(tmp_path, "one", nproc=1, epoch_s=[50.0, 50.0], sync_s=0.0)
    write_run(tmp_path, "two", nproc=2, epoch_s=[10.0, 10.0], sync_s=0.5)
    stopped_cpu_run(tmp_path / "20261122-090000-local-cpu")  # events only: no summary yet
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen) and len(screen.rows) == 3
        view = screen.query_one("#cost-speed", CostSpeedView)
        assert not view.display
        await pilot.press("v")
        await settle(pilot)
        assert view.display and not screen.query_one("#overlay").display
        assert view.data is not None and not view.data.points  # nothing selected yet
        for _ in range(3):
            await pilot.press("space", "down")
        await settle(pilot)
        await until(pilot, lambda: view.data is not None and len(view.data.points) == 2)
        assert {p.workers: p.untrusted for p in view.data.points} == {1: False, 2: True}
        assert any("20261122-090000-local-cpu" in n for n in notes(app))  # left out, said
        assert "⚠ 2.50" in as_text(view.render())  # the untrusted mark
        assert "◆ frontier)" in as_text(view.render())  # no ★: no deadline is set here
        await pilot.press("v")
        await settle(pilot)
        assert not view.display and screen.query_one("#overlay").display


def offered(screen: Any) -> set[str]:
    """Keys the screen's footer offers now (enabled bindings)."""
    return {key for key, active in screen.active_bindings.items() if active.enabled}


async def test_x_is_offered_only_while_the_loss_curves_show() -> None:
    """`x` cycles the loss overlay's x-axis; in the $-vs-hours pane it was offered and did
    nothing visible (that plot's axes are fixed)."""
    app = build_app(start="runs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert "x" in offered(screen)
        await pilot.press("v")
        await settle(pilot)
        assert "x" not in offered(screen) and not screen.check_action("cycle_x", ())
        before = screen.x_axis
        await pilot.press("x")
        await settle(pilot)
        assert screen.x_axis == before  # not changed behind the hidden plot
        await pilot.press("v")
        await settle(pilot)
        assert "x" in offered(screen)


async def test_cost_view_of_runs_without_a_summary_says_why_it_is_empty() -> None:
    """Both fixture runs finished 3 epochs (events only, no summary.json), and the view said
    "select runs that finished at least one epoch"."""
    from tui.widgets.cost_speed import CostSpeedView

    app = build_app(start="runs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("v", "space", "down", "space")
        await settle(pilot)
        view = app.screen.query_one("#cost-speed", CostSpeedView)
        assert view.data is not None and not view.data.points
        assert "2 selected run(s) left out: no summary.json" in view.data.message
        assert "finished at least one epoch" not in as_text(view.render())


def test_a_stopped_runs_note_fits_the_nav_bar_at_80_columns() -> None:
    """The note "interrupted: acc is epoch 5's; the run stopped before it picked and blended its
    model" lost its end at 120 columns and all but "acc is epoch 5's;" at 80."""
    from dataclasses import replace

    from tests.tui.fakes import RUNS_DIR
    from tui.screens.runs import stopped_note

    row = replace(load_run_rows(RUNS_DIR)[0], status="interrupted", accuracy_epoch=5)
    note = stopped_note(row)
    assert note == "interrupted: acc of epoch 5, not a final model" and len(note) <= 48
    assert stopped_note(replace(row, accuracy_epoch=None)) == ""


async def test_the_runs_note_and_keys_say_what_they_do(tmp_path: Path) -> None:
    """The note kept "x changes the x-axis" beside $ vs hours (where `x` is not offered), a
    filter of one backslash read "match '\\\\'" (Python's repr), and `p` on an empty list did
    nothing while `c` and `t` said why."""
    app = build_app(start="runs")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        screen = app.screen
        nav = lambda: str(screen.query_one("NavBar").note)  # type: ignore[attr-defined]  # noqa: E731
        assert "x changes the x-axis" in nav()
        await pilot.press("v")
        await settle(pilot)
        assert "x changes" not in nav() and "v: the loss curves" in nav()
        await pilot.press("v")
        await settle(pilot)
        assert "x changes the x-axis" in nav()
        screen.apply_filter("\\")
        await settle(pilot)
        assert "0 of 2 runs match '\\'" in nav()
    empty = build_app(start="runs", runs_dir=tmp_path)
    async with empty.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        assert "no run highlighted" in notes(empty)  # type: ignore[arg-type]


async def test_a_run_whose_summary_cannot_be_read_says_why(tmp_path: Path) -> None:
    """A garbage summary.json: the status read "bad summary.js" (cut), hours "0.00" for no
    figure at all, and highlighting it never showed the error `sentitop runs` names."""
    folder = tmp_path / "20261122-090000-garbage"
    folder.mkdir()
    (folder / "summary.json").write_text("{not json")
    good = stopped_cpu_run(tmp_path / "20261122-100000-local-cpu")
    write_summary(good, status="ok")
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#runs-table")
        labels = [str(c.label) for c in table.columns.values()]  # type: ignore[attr-defined]
        row = [str(c) for c in table.get_row_at(0)]  # type: ignore[attr-defined]
        width = table.width_of("status")  # type: ignore[attr-defined]
        status = row[labels.index("status")]
        assert status.startswith("bad summary") and len(status) <= width
        assert row[labels.index("wall h")] == "—"
        table.move_cursor(row=0)  # type: ignore[attr-defined]
        await settle(pilot)
        note = str(app.screen.query_one("NavBar").note)  # type: ignore[attr-defined]
        assert note.startswith("summary.json: invalid JSON at line 1")  # its folder is the row's

"""What a first-time user met in the dashboard: foreign names shown as written, the newest log
line in view, and a run that stopped, failed or was cut short never reading as running or ok."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from textual.widgets import DataTable
from textual.widgets._toast import Toast

from engine.errors import LaunchError
from tests.tui.fakes import FIXTURE_RUN, RUNS_DIR, build_app
from tests.tui.scenes import SIZE, settle
from tui.app import SentitopApp
from tui.model import RunState
from tui.model.rows import ProfileRow
from tui.screens.help import KEYS
from tui.screens.run import RunScreen
from tui.screens.runs import RunsScreen
from tui.widgets.log_pane import LogPane
from tui.widgets.run_status import stages_text

MARKUP_DIR = "[bold red]runs[/]"
"""A folder name Rich would read as markup (and drop) if it were not escaped."""


def screen_rows(app: SentitopApp) -> list[str]:
    """The terminal's rows as the user sees them."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def widget_rows(app: SentitopApp, widget: Any) -> list[str]:
    """The rows of the screen that ``widget`` covers, cut to its columns."""
    region = widget.region
    rows = screen_rows(app)[region.y : region.bottom]
    return [row[region.x : region.right] for row in rows]


async def test_runs_folder_with_markup_in_its_name_is_shown_as_written(tmp_path: Path) -> None:
    runs = tmp_path / MARKUP_DIR  # "[bold red]runs[" / "]": two real folders
    runs.mkdir(parents=True)
    shutil.copytree(RUNS_DIR / "20261120-single", runs / "20261120-single")
    app = build_app(start="runs", runs_dir=runs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RunsScreen)
        title_row = widget_rows(app, app.screen.query_one(DataTable))[0]
        assert MARKUP_DIR in title_row, title_row


async def test_profiles_folder_with_markup_in_its_name_is_shown_as_written(
    tmp_path: Path,
) -> None:
    folder = tmp_path / MARKUP_DIR
    folder.mkdir(parents=True)
    app = build_app(start="profiles", profiles_dir=folder)
    app.services.profiles_dir = folder
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        title_row = widget_rows(app, app.screen.query_one(DataTable))[0]
        assert MARKUP_DIR in title_row, title_row


async def test_running_an_invalid_profile_names_it_as_written() -> None:
    name = "[bold red]mine[@click=app.quit]x"

    def rows(folder: Path | None) -> list[ProfileRow]:
        return [
            ProfileRow(
                name=name,
                path=f"/p/{name}.yaml",
                errors=["line 4: not valid YAML: expected ']' [here]"],
            )
        ]

    app = build_app(start="profiles", load_profiles=rows)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        toast = app.screen.query_one(Toast)
        shown = "\n".join(widget_rows(app, toast))
        assert "[bold red]mine[@click=app.quit]x does not validate" in shown, shown
        assert app.is_running  # the name's [@click=app.quit] is text, not an action


async def test_a_filter_holding_brackets_is_shown_as_typed() -> None:
    app = build_app(replay=FIXTURE_RUN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"[b]x", "enter")
        await settle(pilot)
        rows = widget_rows(app, app.screen.query_one(LogPane))
        assert "filter: [b]x" in rows[-1], rows[-1]


async def test_a_long_log_line_does_not_push_the_newest_line_out_of_view() -> None:
    app = build_app(start="run")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        state = app.run_screen.state
        for i in range(8):
            state.add_log("train", f"line {i} " + "many words " * (40 if i == 6 else 1))
        app.run_screen.refresh_views(force=True)
        await settle(pilot)
        rows = widget_rows(app, app.screen.query_one(LogPane))
        assert "line 7" in "\n".join(rows), rows
        assert "line 6" in rows[-3] and rows[-3].rstrip(" │").endswith("…"), rows


def _stopped_run(status: str) -> RunState:
    state = RunState()
    state.ingest_many(
        [
            {"type": "run_start", "t": 1.0, "run": "r1", "profile": "local", "world_size": 2},
            {"type": "stage_start", "t": 1.0, "stage": "preprocess"},
            {"type": "stage_end", "t": 2.0, "stage": "preprocess", "status": "ok", "seconds": 1},
            {"type": "stage_start", "t": 2.0, "stage": "train"},
            {"type": "node", "t": 2.0, "node": "local", "status": "running"},
            {"type": "train_start", "t": 3.0, "total_steps": 100, "steps_per_epoch": 50},
            {"type": "step", "t": 5.0, "rank": 0, "global_step": 40, "loss": 0.3},
            {"type": "run_end", "t": 9.0, "status": status, "reason": "stopped by the user"},
        ]
    )
    return state


def test_a_stopped_run_does_not_show_its_train_stage_or_nodes_still_running() -> None:
    state = _stopped_run("interrupted")
    train = state.stages["train"]
    assert train.status == "interrupted" and train.seconds == 7.0
    assert state.stages["preprocess"].status == "ok"
    assert state.nodes["local"].status == "stopped"
    rows = [(s.name, s.status, s.seconds, s.done, s.total, s.unit) for s in state.stages.values()]
    shown = stages_text(rows, (0, 2)).plain
    assert "▶" not in shown and "train ✗ interrupted 7s" in shown, shown


def test_a_finished_run_leaves_its_nodes_done() -> None:
    state = _stopped_run("ok")
    assert state.nodes["local"].status == "done"
    assert state.stages["train"].status == "ok"


async def test_replaying_a_recording_cut_short_does_not_read_running(tmp_path: Path) -> None:
    lines = (FIXTURE_RUN / "events.jsonl").read_text().splitlines()
    cut = tmp_path / "cut" / "events.jsonl"
    cut.parent.mkdir()
    cut.write_text("\n".join(lines[: len(lines) // 2]) + '\n{"type": "st\n\x00garbage\n')
    app = build_app(replay=cut.parent)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        assert screen.state.status == "unfinished", screen.state.status
        assert "no run_end" in screen.state.reason
        shown = "\n".join(screen_rows(app))
        assert "● running" not in shown and "▶" not in shown
        assert "replay ended (unfinished)" in shown


async def test_a_live_run_whose_runner_raises_reads_failed_not_running() -> None:
    async def failing_runner(profile, on_event, stop, on_log=None):  # type: ignore[no-untyped-def]
        on_event({"type": "run_start", "t": 1.0, "run": "r1", "profile": profile.name})
        on_event({"type": "stage_start", "t": 1.0, "stage": "preprocess"})
        raise LaunchError("gpu-b: ssh connection refused")

    app = build_app(runner=failing_runner)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        state = app.run_screen.state
        assert state.status == "failed" and "ssh connection refused" in state.reason
        assert state.stages["preprocess"].status == "failed"
        assert not any("run ended: running" in n.message for n in app._notifications)


def test_help_lists_every_key_the_runs_footer_shows() -> None:
    keys = {(screen, key) for screen, key, _ in KEYS}
    for binding in RunsScreen.BINDINGS:
        key = binding.key if hasattr(binding, "key") else binding[0]  # type: ignore[index]
        shown = getattr(binding, "show", True)
        if shown and key not in ("slash", "escape", "space"):
            assert ("Runs", key) in keys, key


async def test_run_screen_at_80x24_keeps_status_and_nodes_in_view() -> None:
    app = build_app(replay=FIXTURE_RUN)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        rows = screen_rows(app)
        assert any("● ok" in row for row in rows), rows  # not scrolled out of view
        assert any("epoch 3/3" in row for row in rows), rows
        nodes = screen.query_one("#nodes", DataTable)
        assert nodes.region.right <= 80 and nodes.region.bottom <= 23, nodes.region
        assert rows[nodes.region.y][nodes.region.right - 1] == "╮"  # its whole border shows
        assert screen.max_scroll_y == 0


async def test_copies_of_one_profile_are_told_apart_by_their_file(tmp_path: Path) -> None:
    """Copies of local.yaml under other file names all read "local" in the Profiles table."""
    import shutil

    folder = tmp_path / "profiles"
    folder.mkdir()
    for name in ("local.yaml", "mine.yaml"):
        shutil.copy(Path(__file__).resolve().parents[2] / "profiles" / "local.yaml", folder / name)
    from tui.model.rows import load_profile_rows

    app = build_app(start="profiles", load_profiles=load_profile_rows)
    app.services.profiles_dir = folder
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = "\n".join(widget_rows(app, app.screen.query_one(DataTable)))
        assert "local (mine.yaml)" in text, text
        assert "local (local.yaml)" not in text  # the name says it already

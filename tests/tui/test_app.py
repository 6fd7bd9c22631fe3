"""Pilot tests: every screen and key path of the dashboard, driven through Textual's pilot."""

from __future__ import annotations

import io
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from textual.widgets import DataTable, Input

from engine.errors import LaunchError
from tests.tui.fakes import (
    FIXTURE_RUN,
    RUNS_DIR,
    FakeProfile,
    FakeRunner,
    Teardowns,
    build_app,
    failing_profiles,
    fake_epoch_costs,
    fake_profile_rows,
)
from tests.tui.scenes import SIZE, settle, start_cloud_run
from tui.app import SentitopApp
from tui.model.rows import EpochCosts, ProfileRow
from tui.screens.help import HelpScreen
from tui.screens.modals import ConfirmScreen, ErrorScreen
from tui.screens.prices import COLUMNS, PricesScreen
from tui.screens.profiles import ProfilesScreen
from tui.screens.run import RunScreen
from tui.screens.runs import RunsScreen
from tui.widgets.line_plot import LinePlot
from tui.widgets.log_pane import LogPane
from tui.widgets.nav import NavBar


def as_text(renderable: object) -> str:
    """What a rich renderable prints, as plain text."""
    console = Console(width=100, file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text()


def notes(app: SentitopApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_replay_fills_the_run_screen() -> None:
    app = build_app(replay=FIXTURE_RUN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        assert screen.state.status == "ok"
        assert screen.query_one("#epochs", DataTable).row_count == 3
        assert screen.query_one("#nodes", DataTable).row_count == 2
        shares = screen.query_one("#plot-shares", LinePlot)
        assert [ln.label for ln in shares.lines] == ["r0", "r1", "r2", "r3"]
        loss = screen.query_one("#plot-loss", LinePlot)
        assert [ln.x.size > 0 for ln in loss.lines] == [True, True]
        status = str(screen.query_one("#run-status").render())
        assert "20261121-fixture" in status and "ok" in status and "$0.499" in status
        assert "replay ended (ok)" in str(screen.query_one(NavBar).render())


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (["2"], PricesScreen),
        (["3"], RunScreen),
        (["4"], RunsScreen),
        (["4", "1"], ProfilesScreen),
        (["tab"], PricesScreen),
        (["tab", "tab", "tab", "tab"], ProfilesScreen),
        (["shift+tab"], RunsScreen),
    ],
)
async def test_number_keys_and_tab_switch_screens(keys: list[str], expected: type) -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press(*keys)
        await settle(pilot)
        assert isinstance(app.screen, expected)


async def test_nav_bar_click_switches_screen() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        nav = app.screen.query_one(NavBar)
        plain = str(nav.render())
        assert await pilot.click(NavBar, offset=(plain.index("Runs"), 0))
        await settle(pilot)
        assert isinstance(app.screen, RunsScreen)


async def test_help_opens_and_closes() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ProfilesScreen)


async def test_log_filter_and_x_axis_on_run_screen() -> None:
    app = build_app(replay=FIXTURE_RUN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        log = screen.query_one(LogPane)
        assert {ln.source for ln in log.visible_lines()} > {"gpu-a"}
        await pilot.press("slash", *"gpu-a", "enter")
        await pilot.pause()
        assert log.visible_lines() and all(ln.source == "gpu-a" for ln in log.visible_lines())
        await pilot.press("escape")
        await pilot.pause()
        assert screen.filter_text == "" and len(log.visible_lines()) > 5
        loss = screen.query_one("#plot-loss", LinePlot)
        steps_max = loss.lines[0].x.max()
        await pilot.press("x")
        assert screen.x_axis == "time"
        await pilot.press("x")
        await pilot.pause()
        assert screen.x_axis == "dollars"
        dollars = loss.lines[0].x
        assert steps_max == 360 and 0 < dollars.max() <= screen.state.usd + 1e-9
        assert np.all(np.diff(dollars) >= 0)


async def test_profiles_detail_and_invalid_profile_does_not_run() -> None:
    runner = FakeRunner()
    app = build_app(runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProfilesScreen)
        assert screen.query_one(DataTable).row_count == 3
        await pilot.press("down", "down")
        detail = str(screen.query_one("#profile-detail").render())
        assert "does not validate" in detail and "nodes[0].gpus" in detail
        await pilot.press("r")
        await pilot.pause()
        assert runner.calls == [] and isinstance(app.screen, ProfilesScreen)
        assert any("does not validate" in n for n in notes(app))


async def test_slash_typed_in_the_filter_box_is_a_character_on_every_screen() -> None:
    app = build_app(replay=FIXTURE_RUN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for mode in ("run", "profiles"):
            await app.switch_mode(mode)
            await pilot.pause()
            await pilot.press("slash", *"a/b")
            await pilot.pause()
            box = app.screen.query_one("#filter", Input)
            assert box.value == "a/b" and app.screen.focused is box
            await pilot.press("escape")
            await pilot.pause()
            assert box.value == "" and app.screen.focused is not box


async def test_profile_filter() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"t4")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProfilesScreen)
        assert [r.name for r in screen.shown] == ["two-t4-nodes"]
        await pilot.press("escape")
        assert len(screen.shown) == 3


async def test_run_stop_asks_then_stops() -> None:
    runner = FakeRunner()
    app = build_app(runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        screen = await start_cloud_run(pilot, app, runner)
        assert runner.calls and runner.calls[0].name == "two-t4-nodes"
        assert screen.live and screen.cloud_resources_up() == 2
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        assert screen.live and not runner.stopped
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("y")
        await settle(pilot)
        assert runner.stopped and not screen.live
        assert screen.state.status == "interrupted"
        await pilot.press("q")  # nothing up any more: quits without asking
        await pilot.pause()
    assert app.return_code == 0


async def test_starting_another_run_asks_before_stopping_the_live_one() -> None:
    runner = FakeRunner()
    app = build_app(runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        screen = await start_cloud_run(pilot, app, runner)
        await pilot.press("1", "r")  # Profiles, run the selected profile again
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        assert screen.live and not runner.stopped and len(runner.calls) == 1
        assert any("keeps going" in n for n in notes(app))
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("y")
        for _ in range(100):  # the new run holds (the fake waits to be stopped): poll, not settle
            if len(runner.calls) == 2:
                break
            await pilot.pause(0.1)
        assert runner.stopped and len(runner.calls) == 2  # stopped first, then started
        assert screen.live


async def test_quit_asks_while_cloud_nodes_are_up() -> None:
    runner = FakeRunner()
    app = build_app(runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        await start_cloud_run(pilot, app, runner)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running and not runner.stopped
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("y")
        await settle(pilot)
    assert runner.stopped and app.return_code == 0


async def test_teardown_asks_then_calls_teardown() -> None:
    runner, teardowns = FakeRunner(), Teardowns()
    app = build_app(runner=runner, teardown=teardowns)
    async with app.run_test(size=SIZE) as pilot:
        await start_cloud_run(pilot, app, runner)
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        assert teardowns == ["20261121-fixture"] and runner.stopped


async def test_stop_and_teardown_with_nothing_running() -> None:
    app = build_app(start="run")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("s", "t")
        await pilot.pause()
        assert isinstance(
            app.screen, RunScreen
        )  # `s`, `t` not offered: nothing to stop or tear down
        assert not app.screen.check_action("stop", ()) and not app.screen.check_action(
            "teardown", ()
        )


async def test_local_run_quits_without_asking() -> None:
    runner = FakeRunner(hold_after=None)
    app = build_app(runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")  # local-cpu is first
        await settle(pilot)
        assert runner.calls and runner.calls[0].name == "local-cpu"
        logged = [(line.source, line.text) for line in app.run_screen.state.log]
        assert ("gpu-a", "a plain log line from a node") in logged  # node output reaches the log
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_prices_sort_filter_refresh() -> None:
    app = build_app(start="prices")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PricesScreen)
        prices = [r.on_demand_usd for r in screen.visible_rows()]
        assert prices == sorted(prices) and len(prices) == 7
        await pilot.press("o", "o", "o")  # on-demand -> spot -> $/epoch -> source
        assert [r.source for r in screen.visible_rows()] == sorted(r.source for r in screen.rows)
        await pilot.click(DataTable, offset=(3, 1))  # header "instance" (inside the border)
        await pilot.pause()
        names = [r.instance for r in screen.visible_rows()]
        assert screen.sort_column == 0 and names == sorted(names)
        await pilot.click(DataTable, offset=(3, 1))
        await pilot.pause()
        assert [r.instance for r in screen.visible_rows()] == sorted(names, reverse=True)
        await pilot.press("slash", *"a10g")
        await pilot.pause()
        assert {r.gpu_model for r in screen.visible_rows()} == {"A10G"}
        assert screen.query_one(DataTable).row_count == 2
        await pilot.press("escape", "u")
        await settle(pilot)
        assert {r.source for r in screen.rows} == {"live"}


async def test_prices_show_dollars_per_epoch_of_the_highlighted_profile() -> None:
    asked: list[Path] = []

    def costs(profile: Path, runs_dir: Path) -> Any:
        asked.append(profile)
        return fake_epoch_costs(profile, runs_dir)

    app = build_app(epoch_costs=costs)  # starts on Profiles: local-cpu highlighted
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "2")  # two-t4-nodes, then the Prices screen
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PricesScreen)
        assert [p.name for p in asked] == ["two-t4-nodes.yaml"]
        per_epoch = {r.instance: r.usd_per_epoch for r in screen.rows}
        assert per_epoch["g4dn.xlarge"] == 0.081 and per_epoch["c5.4xlarge"] is None
        table = screen.query_one(DataTable)
        assert "two-t4-nodes" in str(table.border_title) and "×2.2" in str(table.border_title)
        await pilot.press("o", "o")  # on-demand -> spot -> $/epoch
        cheapest = screen.visible_rows()[0]
        assert COLUMNS[screen.sort_column][0] == "$/epoch" and cheapest.instance == "g4dn.xlarge"
        await pilot.press("1", "2")  # same selection: not asked again
        await settle(pilot)
        assert len(asked) == 1


async def test_runs_overlay_axis_and_replay() -> None:
    app = build_app(start="runs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        assert [r.run for r in screen.shown] == ["20261120-single", "20261121-fixture"]
        await pilot.press("space", "down", "space")
        await settle(pilot)
        overlay = screen.query_one("#overlay", LinePlot)
        assert [ln.label for ln in overlay.lines] == ["20261120-single", "20261121-fixture"]
        await pilot.press("x", "x")
        await pilot.pause()
        assert screen.x_axis == "dollars"
        assert overlay.lines[1].x.max() == pytest.approx(
            screen.curves[screen.selected[1]].usd, rel=0.2
        )
        await pilot.press("space")  # unselect the fixture run
        await pilot.pause()
        assert [ln.label for ln in overlay.lines] == ["20261120-single"]
        await pilot.press("p")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        assert app.run_screen.state.run_id == "20261121-fixture"


async def test_runs_teardown_asks_then_tears_down_the_highlighted_run() -> None:
    asked: list[Path] = []

    def teardown_recorded(path: Path) -> str:
        asked.append(path)
        return f"terminated 2 EC2 instance(s) and 0 EMR cluster(s) of run {path.name}"

    app = build_app(start="runs", teardown_recorded=teardown_recorded)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        await pilot.press("down", "t")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert "20261121-fixture" in str(app.screen.query_one("#dialog-body").render())
        await pilot.press("n")  # cancelled: nothing is torn down
        await settle(pilot)
        assert app.screen is screen and asked == []
        await pilot.press("t", "y")
        await app.workers.wait_for_complete()
        await settle(pilot)
        assert asked == [Path(screen.shown[1].path)]
        said = notes(app)
        assert said[-1] == (
            "terminated 2 EC2 instance(s) and 0 EMR cluster(s) of run 20261121-fixture"
        )


async def test_runs_teardown_of_a_local_run_says_there_is_nothing_to_do(tmp_path: Path) -> None:
    run = tmp_path / "20261121-101500-local"
    shutil.copytree(RUNS_DIR / "20261120-single", run)
    (run / "profile.yaml").write_text("name: local\nprovider: local\nregion: us-east-1\n")
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("t")  # no question about EC2 instances first
        await settle(pilot)
        assert isinstance(app.screen, RunsScreen)
        said = notes(app)
        assert said[-1] == (
            "run 20261121-101500-local used no cloud machines (provider local): "
            "nothing to tear down"
        )


async def test_runs_click_selects() -> None:
    app = build_app(start="runs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        # border, header, then rows: the first click highlights the row, the second selects it
        await pilot.click(DataTable, offset=(10, 3))
        await settle(pilot)
        assert screen.selected == [] and screen.current() == screen.shown[1]
        await pilot.click(DataTable, offset=(10, 3))
        await settle(pilot)
        assert screen.selected == [screen.shown[1].path]


async def test_worker_failure_opens_error_modal() -> None:
    app = build_app(load_profiles=failing_profiles)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ErrorScreen)
        body = str(app.screen.query_one("#dialog-body").render())
        assert "cannot read" in body and "hint: check the file permissions" in body
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ProfilesScreen)


async def test_failed_run_opens_error_modal() -> None:
    async def failing_runner(profile, on_event, stop, on_log=None):  # type: ignore[no-untyped-def]
        on_event({"type": "run_start", "t": 1.0, "run": "r1", "profile": profile.name})
        raise LaunchError("gpu-b: ssh connection refused", hint="check the node is up")

    app = build_app(runner=failing_runner)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await pilot.pause(0.3)
        assert isinstance(app.screen, ErrorScreen)
        body = str(app.screen.query_one("#dialog-body").render())
        assert "ssh connection refused" in body and "check the node is up" in body
        assert app.run_screen.state.run_id == "r1"


async def test_epoch_table_stays_bounded() -> None:
    from tui.screens.run import EPOCH_ROWS

    app = build_app(start="run")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        for batch in range(3):
            screen.state.ingest_many(
                {"type": "epoch", "t": float(i), "epoch": i, "accuracy": 0.5, "seconds": 1.0}
                for i in range(batch * 300, (batch + 1) * 300)
            )
            screen.refresh_views()
            await pilot.pause()
        table = screen.query_one("#epochs", DataTable)
        assert table.row_count == EPOCH_ROWS
        assert table.get_row_at(table.row_count - 1)[0] == "900"  # the newest (epoch 899) is kept


async def test_unchanged_panes_are_not_redrawn_but_changes_show() -> None:
    """Nodes, phases and log repaint only when what they show changed (10^6-point redraws)."""
    app = build_app(start="run")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        node = {"type": "node", "t": 1.0, "node": "n0", "status": "running", "gpu": "T4"}
        phase = {"type": "phase", "t": 1.0, "rank": 0, "epoch": 0, "forward": 1.0, "steps": 1}
        screen.state.ingest_many([node, phase, {"type": "log", "t": 1.0, "line": "hello"}])
        screen.refresh_views()
        await pilot.pause()
        nodes = screen.query_one("#nodes", DataTable)
        phases = screen.query_one("#phases")
        drawn = (nodes.get_row_at(0), phases.content, screen.query_one(LogPane)._lines)
        step = {"type": "step", "t": 2.0, "epoch": 0, "step": 1, "global_step": 1, "loss": 0.5}
        screen.state.ingest(step)
        screen.refresh_views()
        await pilot.pause()
        # same objects: nothing was rebuilt for an event that changed none of them
        assert screen.query_one(LogPane)._lines is drawn[2]
        assert nodes.get_row_at(0) == drawn[0] and phases.content is drawn[1]
        screen.state.ingest_many(
            [
                {**node, "t": 3.0, "status": "lost"},
                {**phase, "t": 3.0, "forward": 7.5},
                {"type": "log", "t": 3.0, "line": "bye"},
            ]
        )
        screen.refresh_views()
        await pilot.pause()
        assert str(nodes.get_row_at(0)[2]) == "lost"
        assert phases.content is not drawn[1] and "7.5" in as_text(phases.content)
        assert [ln.text for ln in screen.query_one(LogPane)._lines][-1] == "bye"


async def test_profiles_folder_shown_is_the_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SENTITOP_PROFILES_DIR", str(tmp_path / "mine"))
    app = build_app(load_profiles=lambda folder: [])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProfilesScreen)
        assert str(tmp_path / "mine") in str(screen.query_one(DataTable).border_title)
        detail = str(screen.query_one("#profile-detail").render())
        assert f"put YAML files in {tmp_path / 'mine'}" in detail and "None" not in detail


async def test_unpriced_local_instance_type_is_not_shown_free() -> None:
    def rows(folder: Path | None) -> list[ProfileRow]:
        local, _, _ = fake_profile_rows(folder)
        unpriced = FakeProfile("unpriced", "local", 1, 0)
        unpriced.instance_type = "zz9.huge"  # type: ignore[attr-defined]
        return [local, replace(local, name="unpriced", profile=unpriced)]

    app = build_app(load_profiles=rows)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        assert [str(table.get_row_at(i)[5]) for i in range(2)] == ["free", "—"]


async def test_tiny_dollars_per_epoch_are_not_shown_as_zero() -> None:
    def costs(profile: Path, runs_dir: Path) -> EpochCosts:
        return EpochCosts(profile.stem, "tiny", {"g4dn.xlarge": 0.000012, "g5.xlarge": 0.094}, 2.0)

    app = build_app(epoch_costs=costs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "2")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PricesScreen)
        table = screen.query_one(DataTable)
        cells = {
            str(table.get_row_at(i)[0]): str(table.get_row_at(i)[8]) for i in range(table.row_count)
        }
        assert cells["g4dn.xlarge"] == "0.000012" and cells["g5.xlarge"] == "0.094"


async def test_a_profile_with_warnings_does_not_read_plain_valid() -> None:
    """`sentitop profiles` says "1 warning(s)"; the table said "✓ valid" (the details had it)."""

    def rows(folder: Path | None) -> list[ProfileRow]:
        local, _, _ = fake_profile_rows(folder)
        return [local, replace(local, name="warned", warnings=1)]

    app = build_app(load_profiles=rows)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        assert [str(table.get_row_at(i)[6]) for i in range(2)] == ["✓ valid", "⚠ 1 warning(s)"]


@pytest.mark.parametrize(("width", "whole"), [(110, False), (220, True)])
async def test_profile_details_use_the_width_they_have(width: int, whole: bool) -> None:
    """Each settings line was cut at 96 characters whatever the terminal's width: at 160 or
    250 columns `lr`, `pos_weight` and `blend_paths` of a long train section were hidden."""
    settings = {f"setting_{i}": i for i in range(12)}  # "setting_0 0 · setting_1 1 · …"
    long = FakeProfile("long", "local", 1, 0, {"train": {**settings, "blend_paths": False}})

    def rows(folder: Path | None) -> list[ProfileRow]:
        local, _, _ = fake_profile_rows(folder)
        return [replace(local, name="long", profile=long)]

    app = build_app(load_profiles=rows)
    async with app.run_test(size=(width, 40)) as pilot:
        await settle(pilot)
        detail = str(app.screen.query_one("#profile-detail").render())
        train = next(line for line in detail.splitlines() if line.startswith("train"))
        assert ("blend_paths false" in train) is whole
        assert train.endswith("…") is not whole and len(train) <= width

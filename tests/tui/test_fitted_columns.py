"""The Runs and Profiles tables follow the terminal's width: whole run ids and messages on a wide
one, every important column on screen on a narrow one, the highlighted row kept."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.tui.fakes import RUNS_DIR, build_app
from tests.tui.scenes import settle
from tui.model.columns import CELL_PADDING, Col, fit_columns
from tui.screens import profiles, runs
from tui.widgets.fitted_table import FittedTable

COLS = (
    Col("a", 4),
    Col("name", 10, least=6, most=20),
    Col("b", 5, drop=2),
    Col("c", 5, drop=1),
    Col("msg", 8, least=4, most=12),
)


def cost(widths: list[int]) -> int:
    return sum(w + 2 * CELL_PADDING for w in widths if w)


def test_the_design_width_gives_the_declared_widths() -> None:
    design = cost([c.width for c in COLS])
    assert fit_columns(COLS, design) == [4, 10, 5, 5, 8]
    assert fit_columns(runs.COLUMNS, 118) == [c.width for c in runs.COLUMNS]


def test_flexible_columns_grow_in_turn_up_to_their_most() -> None:
    design = cost([c.width for c in COLS])
    assert fit_columns(COLS, design + 3) == [4, 12, 5, 5, 9]
    assert fit_columns(COLS, design + 100) == [4, 20, 5, 5, 12]  # no further: the rest is empty


def test_narrow_tables_shrink_flexible_columns_then_leave_out_the_least_needed() -> None:
    design = cost([c.width for c in COLS])
    assert fit_columns(COLS, design - 4) == [4, 8, 5, 5, 6]  # the roomiest gives, in turn
    least = cost([4, 6, 5, 5, 4])
    assert fit_columns(COLS, least) == [4, 6, 5, 5, 4]
    narrower = fit_columns(COLS, least - 1)
    assert narrower[3] == 0 and narrower[2] == 5  # drop 1 goes before drop 2
    assert cost(narrower) <= least - 1
    tiny = fit_columns(COLS, 5)
    assert tiny == [4, 6, 0, 0, 4]  # nothing else to leave out: least widths, it scrolls


def _key(table: FittedTable) -> str | None:
    """The highlighted row's key."""
    return table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value


def _fits(table: FittedTable) -> bool:
    return cost(table.widths) <= table.scrollable_content_region.width


async def test_runs_table_follows_the_terminal_and_keeps_the_cursor(tmp_path: Path) -> None:
    long_id = "20261127-235049-long-profile-name-np2-2"  # 39 characters
    for source in sorted(RUNS_DIR.iterdir()):
        shutil.copytree(source, tmp_path / source.name)
    shutil.copytree(sorted(RUNS_DIR.iterdir())[0], tmp_path / long_id)
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(FittedTable)
        assert _fits(table)  # the run column takes the longest id: F1 goes before it is cut
        cells = {str(table.get_row_at(i)[1]) for i in range(table.row_count)}
        assert long_id in cells and not any("…" in c for c in cells)
        assert "F1" not in [str(c.label) for c in table.ordered_columns]
        table.move_cursor(row=table.row_count - 1)
        highlighted = _key(table)

        await pilot.resize_terminal(200, 30)
        await settle(pilot)
        assert table.width_of("run") == 40 and _fits(table)
        cells = {str(table.get_row_at(i)[1]) for i in range(table.row_count)}
        assert long_id in cells  # whole, where 120 columns cut it
        assert _key(table) == highlighted

        await pilot.resize_terminal(80, 30)
        await settle(pilot)
        labels = [str(c.label) for c in table.ordered_columns]
        assert _fits(table) and "status" in labels and "acc" in labels and "$" in labels
        assert "F1" not in labels and "samples/s" not in labels
        assert len(table.get_row_at(0)) == len(labels)
        cut = {str(table.get_row_at(i)[1]) for i in range(table.row_count)} - {long_id}
        assert table.width_of("run") == 26 and f"{long_id[:15]}…" in " ".join(cut)


async def test_profiles_status_gets_the_width_of_a_wide_terminal() -> None:
    app = build_app(start="profiles")
    async with app.run_test(size=(80, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(FittedTable)
        assert _fits(table) and [str(c.label) for c in table.ordered_columns][-1] == "status"
        error = next(
            str(r[-1]) for r in map(table.get_row_at, range(table.row_count)) if "✗" in str(r[-1])
        )
        assert error.endswith("…") and len(error) <= table.width_of("status")
        await pilot.resize_terminal(220, 30)
        await settle(pilot)
        assert _fits(table) and table.width_of("status") > profiles.COLUMNS[-1].width
        error = next(
            str(r[-1]) for r in map(table.get_row_at, range(table.row_count)) if "✗" in str(r[-1])
        )
        assert error.endswith("expected an integer >= 0")  # the whole message


async def test_home_and_end_go_to_the_first_and_last_run() -> None:
    app = build_app(start="runs")
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(FittedTable)
        assert table.row_count >= 2 and table.cursor_row == 0
        table.focus()
        await pilot.press("end")
        assert table.cursor_row == table.row_count - 1
        await pilot.press("home")
        assert table.cursor_row == 0

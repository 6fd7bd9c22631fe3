"""Plots stay inside their borders in a small terminal (60x15), whatever their labels."""

from __future__ import annotations

import numpy as np
import pytest
from rich.cells import cell_len

from tests.tui.fakes import FIXTURE_RUN, build_app
from tests.tui.scenes import settle
from tui.app import SentitopApp
from tui.format import format_seconds, format_usd, nice_number
from tui.screens.run import SHARES_EMPTY, RunScreen
from tui.widgets.braille import PlotLine, render_plot
from tui.widgets.line_plot import LinePlot

SMALL = (60, 15)
RNG = np.random.default_rng(7)
DATA = {
    "huge dollars": [PlotLine("$", np.arange(100.0) * 3600, RNG.random(100) * 1e9)],
    "negative": [PlotLine("a", np.arange(50.0), -RNG.random(50) * 12345.678)],
    "one point": [PlotLine("total", np.array([5.0]), np.array([3.0]))],
    "many lines": [PlotLine(f"rank {i}", np.arange(20.0), RNG.random(20) * 900) for i in range(8)],
    "empty": [],
}


def fits(text: str, width: int, height: int) -> bool:
    rows = text.split("\n")
    return len(rows) <= height and all(cell_len(row) <= width for row in rows)


@pytest.mark.parametrize("data", DATA)
def test_render_plot_never_draws_outside_its_box(data: str) -> None:
    for width in range(1, 40, 3):
        for height in range(1, 10):
            for y_format in (nice_number, format_usd):
                text = render_plot(
                    DATA[data],
                    width,
                    height,
                    x_format=format_seconds,
                    y_format=y_format,
                    empty=SHARES_EMPTY,
                ).plain
                assert fits(text, width, height), (data, width, height, text)


def test_long_empty_message_wraps_inside_the_plot() -> None:
    text = render_plot([], 25, 4, empty=SHARES_EMPTY).plain
    assert fits(text, 25, 4) and "no load shares yet" in text and "step)" in text


async def test_run_screen_plots_keep_their_borders_at_60x15() -> None:
    app = build_app(replay=FIXTURE_RUN)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        screen.state.ingest(
            {"type": "cost", "t": 1_763_710_000.0, "usd": 4.2e9, "accrued_usd": 4.2e9}
        )
        await pilot.press("x", "x")  # x in dollars: the longest x labels
        screen.scroll_home(animate=False)
        await pilot.pause(0.1)
        strips = [strip.text for strip in screen._compositor.render_strips()]
        plots = list(screen.query(LinePlot))
        assert {p.id for p in plots} >= {"plot-throughput", "plot-cost"}
        for plot in plots:
            size, region = plot.content_size, plot.region
            assert fits(plot.render().plain, size.width, size.height), plot.id
            right = region.right - 1  # the right border's column
            for y in range(max(region.y, 0), min(region.bottom, len(strips) - 1)):
                assert strips[y][right] in "╮│╯", (plot.id, y, strips[y])


async def test_the_runs_list_keeps_rows_in_a_tiny_terminal() -> None:
    """At 40x12 the loss plot took the screen and the Runs list showed no row."""
    from textual.widgets import DataTable

    app = build_app(start="runs")
    async with app.run_test(size=(40, 12)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        assert table.row_count == 2 and table.region.height >= 5  # border, header, two rows


def footer_line(app: SentitopApp) -> str:
    """The footer row as drawn."""
    return "".join(seg.text for seg in app.screen._compositor.render_strips()[-1])


@pytest.mark.parametrize(("size", "all_keys"), [((80, 24), False), ((120, 40), True)])
async def test_the_runs_footer_keeps_help_and_quit_on_screen(
    size: tuple[int, int], all_keys: bool
) -> None:
    """At 80 columns the Runs screen's keys ran off the right edge: "… c Resume  u R"."""
    app = build_app(start="runs")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        line = footer_line(app)
        assert "? Help" in line and "q Quit" in line and "space Select" in line
        assert ("t Tear down" in line) is all_keys and ("^p palette" in line) is all_keys
        assert cell_len(line.rstrip()) <= size[0]
        await pilot.resize_terminal(120, 40)
        await settle(pilot)
        assert "t Tear down" in footer_line(app) and "? Help" in footer_line(app)


async def test_plot_titles_are_whole_at_80_columns() -> None:
    """Four plots side by side read "loss  (x: st…", "load share p…" and "cost $0.499 (…"."""
    app = build_app(replay=FIXTURE_RUN)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        rows = ["".join(seg.text for seg in s) for s in app.screen._compositor.render_strips()]
        tops = next(row for row in rows if "─ loss " in row)
        assert "…" not in tops
        assert all(title in tops for title in ("samples/s", "load shares", "cost $0.499"))
        assert any(row.count("x: steps") == 3 and "x: time" in row for row in rows)


async def test_prices_at_80_columns_keep_dollars_per_epoch_and_sort_by_the_clicked_header() -> None:
    """At 80 columns $/epoch, the column the screen is for, was off-screen to the right."""
    from pathlib import Path

    from tui.screens.prices import PricesScreen
    from tui.widgets.fitted_table import FittedTable

    app = build_app(start="prices", selected_profile=Path("profiles/two-t4-nodes.yaml"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PricesScreen)
        table = screen.query_one(FittedTable)
        labels = [str(c.label) for c in table.ordered_columns]
        assert "$/epoch" in labels and "age" not in labels and table.row_count == 7
        x = 1 + sum(
            c.get_render_width(table) for c in table.ordered_columns[: labels.index("$/epoch")]
        )
        await pilot.click(FittedTable, offset=(x + 2, 1))  # its header: not the 7th of all columns
        await pilot.pause()
        costs = [r.usd_per_epoch for r in screen.visible_rows()]
        known = [c for c in costs if c is not None]
        assert known == sorted(known) and costs[: len(known)] == known


async def test_profiles_table_keeps_rows_at_60x15() -> None:
    from textual.widgets import DataTable

    app = build_app()
    async with app.run_test(size=(60, 15)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        assert table.size.height >= 4  # header + rows, not squeezed out by the details


async def test_profile_names_stay_whole_at_80_columns() -> None:
    """The shipped "aws-mixed-g4dn-g5" read "aws-mixed-g4d" while nodes and ranks kept their
    columns; now nodes goes first."""
    from tui.model.rows import load_profile_rows

    app = build_app(start="profiles", load_profiles=load_profile_rows)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        rows = ["".join(seg.text for seg in s) for s in app.screen._compositor.render_strips()]
        assert any("aws-mixed-g4dn-g5 " in row and "A10G + 2× T4" in row for row in rows)
        header = next(row for row in rows if "profile" in row and "cluster" in row)
        assert "nodes" not in header and "status" in header


async def test_prices_sort_key_cycles_through_the_columns_shown() -> None:
    """At 80 columns `o` sorted by hidden columns: "sorted by mem GiB ▲" with no such column."""
    from pathlib import Path

    from tui.screens.prices import COLUMNS, PricesScreen
    from tui.widgets.fitted_table import FittedTable

    app = build_app(start="prices", selected_profile=Path("profiles/two-t4-nodes.yaml"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PricesScreen)
        table = screen.query_one(FittedTable)
        shown = {str(c.label) for c in table.ordered_columns}
        seen = []
        for _ in range(len(COLUMNS)):
            await pilot.press("o")
            seen.append(COLUMNS[screen.sort_column][0])
        assert set(seen) == shown and "age" not in seen


async def test_the_prices_filter_is_shown_as_typed() -> None:
    """The border read "GPU filter 'm5'" (it matches instance names too) and took the typed text
    as markup: "[b]" vanished."""
    from tui.screens.prices import PricesScreen
    from tui.widgets.fitted_table import FittedTable

    app = build_app(start="prices")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"[b]", "enter")
        await settle(pilot)
        assert isinstance(app.screen, PricesScreen)
        assert app.screen.query_one(FittedTable).row_count == 0  # nothing matches "[b]"
        rows = ["".join(seg.text for seg in s) for s in app.screen._compositor.render_strips()]
        shown = next(row for row in rows if "sorted by" in row)
        assert "filter '[b]'" in shown and "GPU filter" not in shown

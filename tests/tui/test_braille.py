"""Braille plots: min/max decimation and exact output size."""

from __future__ import annotations

import numpy as np
import pytest
from rich.cells import cell_len

from tui.format import format_seconds, nice_number
from tui.widgets.braille import PlotLine, decimate, render_plot


def brute_minmax(x: np.ndarray, y: np.ndarray, cols: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.full(cols, np.nan), np.full(cols, np.nan)
    x0, x1 = x.min(), x.max()
    for xi, yi in zip(x, y, strict=True):
        c = min(int((xi - x0) * cols / (x1 - x0)), cols - 1)
        lo[c] = yi if np.isnan(lo[c]) else min(lo[c], yi)
        hi[c] = yi if np.isnan(hi[c]) else max(hi[c], yi)
    return lo, hi


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decimate_keeps_every_bins_extremes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 100, 5000))
    y = rng.normal(size=x.size)
    lo, hi = decimate(x, y, x.min(), x.max(), 40)
    blo, bhi = brute_minmax(x, y, 40)
    # decimate also stretches each bin to its left neighbour's end (continuity), so its range
    # contains the true range and never goes beyond the data
    assert np.all(lo <= blo + 1e-12) and np.all(hi >= bhi - 1e-12)
    assert lo.min() == pytest.approx(y.min()) and hi.max() == pytest.approx(y.max())


def test_decimate_unsorted_and_nan_input() -> None:
    x = np.array([3.0, 1.0, 2.0, np.nan, 4.0])
    y = np.array([30.0, 10.0, 20.0, 99.0, np.nan])
    lo, hi = decimate(x, y, 1.0, 3.0, 3)
    assert np.nanmax(hi) == 30.0 and np.nanmin(lo) == 10.0  # NaN rows dropped


def test_sparse_points_are_joined() -> None:
    x = np.array([0.0, 100.0])
    lo, hi = decimate(x, np.array([0.0, 10.0]), 0.0, 100.0, 11)
    assert not np.isnan(lo).any()  # gaps filled by interpolation
    assert np.all(np.diff(hi) >= 0)


@pytest.mark.parametrize(("w", "h"), [(40, 8), (100, 20), (13, 4)])
def test_render_is_exactly_the_requested_size(w: int, h: int) -> None:
    x = np.arange(1000.0)
    text = render_plot([PlotLine("a", x, np.sin(x / 30)), PlotLine("b", x, np.cos(x / 50))], w, h)
    lines = text.plain.split("\n")
    assert len(lines) == h
    assert all(cell_len(line) <= w for line in lines)
    assert any(cell_len(line) == w for line in lines[1:-1])
    assert any("\u2800" < ch <= "\u28ff" for ch in text.plain)


def test_render_without_data_says_so() -> None:
    text = render_plot([PlotLine("a", np.array([]), np.array([]))], 40, 8)
    assert "waiting for data" in text.plain
    assert "too small" in render_plot([], 11, 2).plain
    tiny = render_plot([], 5, 2).plain.split("\n")  # cut to the box, never wider or taller
    assert len(tiny) <= 2 and all(len(row) <= 5 for row in tiny) and tiny[0] == "(too"


def test_flat_series_and_labels() -> None:
    x = np.arange(10.0)
    text = render_plot([PlotLine("flat", x, np.full(10, 2.0))], 40, 8, x_format=format_seconds)
    assert "flat" in text.plain and "0:00" in text.plain and "0:09" in text.plain
    assert nice_number(999_999) == "1M" and nice_number(12_345) == "12.3k"
    assert nice_number(0.01234) == "0.0123"


@pytest.mark.parametrize("width", [12, 14, 16, 20, 40])
def test_the_x_labels_never_run_together(width: int) -> None:
    """In a narrow plot (80x24 splits the Run screen) "2:05" and "14:10" were printed
    side by side as "2:0514:10": the end label is dropped when there is no room for both."""
    x = np.linspace(125.0, 850.0, 50)
    text = render_plot(
        [PlotLine("loss", x, np.cos(x))], width, 6, x_format=format_seconds, legend=False
    ).plain
    axis = text.splitlines()[-1].strip()
    left, right = format_seconds(125.0), format_seconds(850.0)
    assert axis.startswith(left)
    assert axis == left or (axis.endswith(right) and axis[len(left)] == " ")
    assert cell_len(text.splitlines()[-1]) <= width


@pytest.mark.parametrize(("width", "height"), [(30, 6), (80, 12)])
def test_a_floor_keeps_a_loss_axis_from_going_negative(width: int, height: int) -> None:
    """A loss falling to near 0 was labelled down to "-0.0307": the padding below the data
    went under 0. With floor=0 the lowest label is 0; without a floor the padding stays."""
    x = np.arange(40.0)
    loss = np.linspace(0.7, 0.01, 40)

    def lowest(**floor: float) -> float:
        text = render_plot([PlotLine("loss", x, loss)], width, height, legend=False, **floor)
        rows = text.plain.splitlines()[: height - 1]  # the x labels are the last line
        labels = [row.split("┤")[0].strip() for row in rows if "┤" in row]
        return min(float(label) for label in labels if label)

    assert lowest() < 0
    assert lowest(floor=0.0) == 0.0


def test_a_flat_series_at_its_floor_does_not_go_below_it() -> None:
    """A resumed run's cost plot, all $0 at first, read "$1.00 … $0.00 … $-1.00"."""
    from tui.format import format_usd

    x = np.arange(10.0)
    text = render_plot([PlotLine("$", x, np.zeros(10))], 40, 8, y_format=format_usd, y_min=0)
    assert "-" not in text.plain and "$0.00" in text.plain
    free = render_plot([PlotLine("v", x, np.full(10, 5.0))], 40, 8)  # no floor: padded both ways
    assert "4.5" in free.plain and "5.5" in free.plain


def test_narrow_dollar_labels_stay_distinct() -> None:
    """A cost plot at 80 columns cut its ticks to "$0.000…" and "$0.000…": two different values
    read alike, so the chart had no scale."""
    from tui.format import format_usd

    x = np.arange(20, dtype=float)
    for width in (14, 16, 20):
        text = render_plot([PlotLine("$", x, x * 1.5e-5)], width, 8, y_format=format_usd, y_min=0)
        labels = [line.split("┤")[0].strip() for line in text.plain.splitlines() if "┤" in line]
        shown = [label for label in labels if label]
        assert len(shown) == 3 and len(set(shown)) == 3, (width, shown)
        assert not any("…" in label for label in shown), (width, shown)
        assert all(label.startswith("$") for label in shown), (width, shown)

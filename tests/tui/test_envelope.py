"""SeriesEnvelope: the points a plot needs, kept incrementally, equal to a fresh summary."""

from __future__ import annotations

import math
from array import array

import numpy as np
import pytest

from tui.model.envelope import SeriesEnvelope
from tui.model.series import Series
from tui.widgets.braille import PlotLine, render_plot


def filled(y: np.ndarray) -> Series:
    """A series holding ``y`` at t = step = 0, 1, 2, …"""
    series = Series("s", capacity=2 * y.size + 16)
    t = np.arange(y.size, dtype=np.float64)
    series.t, series.step = array("d", t.tobytes()), array("d", t.tobytes())
    series.y = array("d", y.astype(np.float64).tobytes())
    series.version += 1
    return series


def assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    for name in ("t", "step", "y"):
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_short_series_are_kept_whole() -> None:
    y = np.random.default_rng(0).normal(size=100)
    columns = SeriesEnvelope(max_blocks=64).sync(filled(y))
    np.testing.assert_array_equal(columns["y"], y)
    np.testing.assert_array_equal(columns["t"], np.arange(100.0))


def test_incremental_sync_equals_a_fresh_envelope() -> None:
    """Appends, rewrites of the newest point, thinning and NaNs: always what a fresh sync gives."""
    rng = np.random.default_rng(7)
    series = Series("s", capacity=3000)  # thins itself (a new generation) several times
    live = SeriesEnvelope(max_blocks=8)
    t = 0.0
    blocks_seen = set()
    for _ in range(300):
        for _ in range(int(rng.integers(1, 60))):
            t += 1.0
            value = math.nan if rng.random() < 0.02 else float(rng.normal())
            series.append(t, value, step=t)
        assert_same(live.sync(series), SeriesEnvelope(max_blocks=8).sync(series))
        blocks_seen.add(live.block)
    assert series.generation >= 2
    assert len(blocks_seen) >= 4  # blocks doubled by merging, not only from fresh starts


def test_kept_points_are_real_points_in_order_with_every_extreme() -> None:
    rng = np.random.default_rng(3)
    y = np.cumsum(rng.normal(size=200_000))
    y[12_345] = 1e6  # a spike must survive
    y[150_000] = math.nan
    envelope = SeriesEnvelope(max_blocks=256)
    columns = envelope.sync(filled(y))
    index = columns["t"].astype(np.int64)
    assert np.all(np.diff(index) > 0)
    np.testing.assert_array_equal(columns["y"], y[index])
    assert index[0] == 0 and index[-1] == y.size - 1
    assert {int(np.nanargmin(y)), int(np.nanargmax(y)), 12_345} <= set(index.tolist())
    assert columns["y"].size <= 4 * (2 * 256) + 4
    assert envelope.block == 512  # the shortest block that leaves <= 512 complete blocks


def test_sync_releases_the_buffers_so_the_series_can_grow() -> None:
    series = filled(np.arange(10_000, dtype=np.float64))
    SeriesEnvelope().sync(series)
    series.append(10_000.0, 1.0, 10_000.0)  # BufferError if a numpy view were still alive
    assert len(series) == 10_001


def test_unchanged_series_returns_the_same_arrays() -> None:
    series = filled(np.arange(50.0))
    envelope = SeriesEnvelope()
    first = envelope.sync(series)
    assert envelope.sync(series) is first


@pytest.mark.parametrize("n", [100_000, 1_000_000])
def test_plot_of_the_envelope_matches_the_plot_of_every_point(n: int) -> None:
    """A block spans well under a pixel column, so at most 1 % of the cells differ."""
    rng = np.random.default_rng(1)
    y = 0.5 + 0.3 * np.exp(-np.arange(n) / (n / 5)) + rng.normal(0, 0.02, n)
    y[rng.integers(0, n, 5)] += 0.5
    columns = SeriesEnvelope().sync(filled(y))
    assert columns["y"].size < n / 6
    for width, height in ((60, 12), (237, 30)):
        every = render_plot([PlotLine("l", np.arange(n, dtype=float), y)], width, height).plain
        kept = render_plot([PlotLine("l", columns["t"], columns["y"])], width, height).plain
        assert len(every) == len(kept)
        differ = sum(a != b for a, b in zip(every, kept, strict=True))
        assert differ <= 0.01 * len(every), (width, differ)

"""The report's plots stay readable: dollar ticks never run into each other, and a marker of one
speedup series never hides the other's at the same value."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from remote.review import plots
from remote.review.metrics import series_metrics
from remote.runs_store import resolve_runs
from tests.review.conftest import write_run


@pytest.fixture()
def figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Figures the plot functions save (captured before they are closed)."""
    saved: list[Any] = []

    def keep(fig: Any, path: Path) -> Path:
        fig.tight_layout()
        fig.canvas.draw()
        saved.append(fig)
        return path

    monkeypatch.setattr(plots, "_save", keep)
    return saved


def _series(tmp_path: Path, usd_per_hour: float) -> Any:
    root = tmp_path / "runs"
    root.mkdir()
    for name, n, s in (("a", 1, 5.0), ("b", 2, 2.75), ("c", 4, 1.5)):
        write_run(root, name, nproc=n, epoch_s=[s, s], sync_s=0.05, sweep="sw", tts=s * 1.5,
                  usd_per_hour=usd_per_hour)  # fmt: skip
    return series_metrics(resolve_runs(["sw"], root))


@pytest.mark.parametrize("usd_per_hour", [0.0123, 0.096, 3.06, 98.0])
def test_dollar_ticks_are_few_short_and_apart(
    usd_per_hour: float, tmp_path: Path, figures: list[Any]
) -> None:
    plots.loss_plot(_series(tmp_path, usd_per_hour), tmp_path / "loss.png")
    cost_axis = figures[0].axes[1]
    labels = [t for t in cost_axis.get_xticklabels() if t.get_text()]
    texts = [t.get_text() for t in labels]
    assert 3 <= len(labels) <= 7, texts
    assert all(t.startswith("$") and "e" not in t for t in texts), texts
    assert len(set(texts)) == len(texts), texts
    boxes = sorted((t.get_window_extent() for t in labels), key=lambda b: b.x0)
    for left, right in itertools.pairwise(boxes):
        assert left.x1 <= right.x0 or left.y1 <= right.y0, texts  # no two labels overlap


def test_usd_tick() -> None:
    values = (0, 0.00025, 0.000008, 0.012, 0.25, 1.5, 1234.5)
    expected = ["$0", "$0.00025", "$0.000008", "$0.012", "$0.25", "$1.50", "$1,234.50"]
    assert [plots.usd_tick(v) for v in values] == expected


def test_coinciding_speedup_markers_both_show(tmp_path: Path, figures: list[Any]) -> None:
    plots.speedup_plot(_series(tmp_path, 0.096), tmp_path / "speedup.png")
    for ax in figures[0].axes:
        by_label = {line.get_label(): line for line in ax.get_lines()}
        dots, squares = by_label["by epoch time"], by_label["by time to threshold"]
        assert squares.get_markerfacecolor() == "none"  # hollow: what lies under it shows
        assert dots.get_zorder() > squares.get_zorder()  # drawn on top
        assert dots.get_markersize() < squares.get_markersize()  # and fits inside

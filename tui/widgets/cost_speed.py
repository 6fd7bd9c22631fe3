"""CostSpeedView: $ vs hours of the selected runs' configurations, Pareto frontier, efficiency."""

from __future__ import annotations

import numpy as np
from rich.console import Group
from rich.text import Text
from textual.widget import Widget

from remote.review.metrics import UNTRUSTED, UNTRUSTED_MARK
from remote.review.views import CostSpeedData
from tui.format import format_usd, nice_number
from tui.widgets.braille import PlotLine, render_plot

BAR = 24
"""Cells of a full (efficiency 1.0) bar."""


def render_cost_speed(data: CostSpeedData, width: int, height: int) -> Group | Text:
    """The scatter (frontier as a line, one dot per configuration) above efficiency bars."""
    if not data.points:
        return Text(data.message or "no runs", style="dim")
    bars = len(data.points) + 1
    lines = [
        PlotLine(
            "frontier",
            np.array([p[0] for p in data.front]),
            np.array([p[1] for p in data.front]),
            color="#ffaf5f",
        )
    ]
    tick = max(p.hours for p in data.points) * 0.01 or 0.01  # of the x range: 0 to the slowest
    for p in data.points:  # a short dash, so a single point shows as a dot
        mark = "★ " if p.is_pick else ("◆ " if p.on_front else "")
        lines.append(
            PlotLine(
                mark + p.label, np.array([p.hours - tick, p.hours + tick]), np.array([p.usd, p.usd])
            )
        )
    chart = render_plot(
        lines, width, max(4, height - bars), x_format=nice_number, y_format=format_usd,
        x_min=0.0, y_min=0.0,  # from zero both: one configuration is a dot, not a whole line
    )  # fmt: skip
    rows = [
        Text(
            f"efficiency vs {data.baseline} ({data.mode}, {data.epochs} epochs; ◆ frontier"
            + (", ★ cheapest within the deadline)" if data.deadline_h is not None else ")"),
            style="bold",
        )
    ]
    for p in data.points:
        filled = round(max(0.0, min(1.2, p.efficiency)) * BAR)
        row = Text(f"{p.label[:18]:<18} ")
        colour = "red" if p.untrusted else ("green" if p.efficiency >= 0.7 else "yellow")
        row.append("█" * filled, style=colour)
        mark = f" {UNTRUSTED_MARK}" if p.untrusted else ""
        row.append(f"{mark} {p.efficiency:.2f}  ×{p.speedup:.2f}", style="red" if mark else "")
        row.append(f"  {p.hours:.3g} h  ${p.usd:.4g}")
        rows.append(row)
    if any(p.untrusted for p in data.points):
        rows.append(
            Text(
                f"{UNTRUSTED_MARK} not trustworthy: super-linear by far (efficiency above "
                f"{UNTRUSTED:g}); a run was slowed or the runs did not do the same work",
                style="red",
            )
        )
    return Group(chart, *rows)


class CostSpeedView(Widget):
    """Cost/speed view of some runs; call :meth:`set_data` with remote.review.views data."""

    DEFAULT_CSS = """
    CostSpeedView {
        height: 1fr;
        min-height: 10;
        border: round $primary 40%;
        border-title-color: $text;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = "$ vs hours"
        self.data: CostSpeedData | None = None
        """What is drawn now (None: nothing selected)."""

    def set_data(self, data: CostSpeedData) -> None:
        """Replace the data and redraw."""
        self.data = data
        self.border_title = f"$ vs hours for {data.epochs} epochs" if data.points else "$ vs hours"
        self.refresh()

    def render(self) -> Group | Text:
        """Draw at the widget's current size."""
        if self.data is None:
            return Text("select runs to compare their cost and speed", style="dim")
        return render_cost_speed(self.data, self.size.width, self.size.height)

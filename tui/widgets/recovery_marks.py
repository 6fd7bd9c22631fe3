"""How the Run screen marks recoveries on its time/$ plot: one segment per recovery."""

from __future__ import annotations

import numpy as np

from tui.widgets.braille import PlotLine


def recovery_marks(
    recoveries: list[tuple[float, float]], cost_t: np.ndarray, cost_usd: np.ndarray
) -> list[PlotLine]:
    """One magenta segment per recovery (resumed at, downtime s) on the time/$ plot: from the
    loss to the resume, at the dollars spent by then (where the downtime's money went)."""
    marks = []
    for n, (resumed, downtime) in enumerate(recoveries, 1):
        x = np.array([resumed - downtime, resumed])
        y = np.interp(x, cost_t, cost_usd) if cost_t.size else np.zeros(2)
        marks.append(PlotLine(f"⟳{n}", x, y, color="magenta", presorted=True))
    return marks

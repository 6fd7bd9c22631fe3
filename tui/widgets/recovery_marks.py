"""How the Run screen marks recoveries: a status-line summary and segments on the time/$ plot."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.text import Text

from tui.format import fmt_duration, fmt_usd
from tui.widgets.braille import PlotLine


def recovery_summary(recoveries: list[dict[str, Any]]) -> Text:
    """``  ⟳ 2 recoveries, 41s down, $0.03 lost`` (empty without recoveries)."""
    if not recoveries:
        return Text()
    down = sum(float(r.get("downtime_s") or 0) for r in recoveries)
    usd = sum(float(r.get("usd") or 0) for r in recoveries)
    failed = sum(r.get("status") != "ok" for r in recoveries)
    label = f"  ⟳ {len(recoveries)} recover{'y' if len(recoveries) == 1 else 'ies'}"
    return Text.assemble(
        (label, "bold magenta"),
        (f" ({failed} failed)" if failed else "", "red"),
        (f", {fmt_duration(down)} down, {fmt_usd(usd)} lost", "magenta"),
    )


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

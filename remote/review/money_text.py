"""How the review writes dollar amounts (to the cent, small ones to 2 significant digits) and
predicted durations."""

from __future__ import annotations


def money(value: float) -> str:
    """$12.34; below 10 cents with 2 significant digits ($0.0016, $1.2e-05): a local run's
    $0.0016 is not $0.00."""
    if value >= 0.1 or value == 0:
        return f"${value:,.2f}"
    return f"${value:.2g}"


def duration_text(seconds: float, unit_of: float | None = None) -> str:
    """Seconds as "1.25 h" from 6 minutes up (of ``unit_of`` when given: a band's upper end or
    the longer of two times, so the figures compared read in one unit), else "69 s"."""
    if (seconds if unit_of is None else unit_of) >= 360:
        return f"{seconds / 3600:,.2f} h"
    return f"{seconds:,.0f} s"

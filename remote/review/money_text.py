"""How the review writes dollar amounts: to the cent, small ones to 2 significant digits."""

from __future__ import annotations


def money(value: float) -> str:
    """$12.34; below 10 cents with 2 significant digits ($0.0016, $1.2e-05): a local run's
    $0.0016 is not $0.00."""
    if value >= 0.1 or value == 0:
        return f"${value:,.2f}"
    return f"${value:.2g}"

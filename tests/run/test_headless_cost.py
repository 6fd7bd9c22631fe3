"""The finished run's cost line says when the one-minute minimum, not the seconds used, set it."""

from __future__ import annotations

import io

from rich.console import Console

from tui.cli.headless import summary_table
from tui.format import fmt_billed


def _render(summary: dict[str, object]) -> str:
    console = Console(file=io.StringIO(), width=200)
    console.print(summary_table(summary))
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def test_minimum_charge_is_named_with_the_dollars_used() -> None:
    out = _render(
        {"run": "r", "status": "ok", "usd": 0.0016, "accrued_usd": 0.00087, "usd_per_hour": 0.096}
    )
    assert "$0.0016 billed (1-min minimum; $0.00087 used) at $0.096/h" in out


def test_no_minimum_note_past_the_first_minute() -> None:
    assert fmt_billed(0.00197, 0.00196, 0.096) == "$0.0020"  # whole-second rounding only
    assert fmt_billed(0.5, 0.5, 2.0) == "$0.500"
    assert fmt_billed(0.0016, None, 0.096) == "$0.0016"  # older summaries: no accrued figure
    assert fmt_billed(None, None, None) == "—"

"""Numbers and one-line facts for people, shared by the dashboard and the headless output."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def fmt(value: object, spec: str = ".3f", empty: str = "—") -> str:
    """A number formatted with ``spec``; None as ``empty``; anything else as its text."""
    if value is None:
        return empty
    if isinstance(value, int | float) and not isinstance(value, bool) and spec:
        return format(value, spec)
    return str(value)


def nice_number(value: float) -> str:
    """Short axis label: 1.2k, 0.123, 45, 3.4M."""
    if not math.isfinite(value):
        return "?"
    a = abs(value)
    if a >= 999_500:
        return f"{value / 1e6:.3g}M"
    if a >= 1e4:
        return f"{value / 1e3:.0f}k" if a >= 99_950 else f"{value / 1e3:.3g}k"
    if a >= 100 or a == 0:
        return f"{value:.0f}"
    return f"{value:.3g}"


def format_seconds(value: float) -> str:
    """Elapsed-time axis label (m:ss or h:mm)."""
    if not math.isfinite(value):
        return "?"
    s = int(max(value, 0))
    return f"{s // 3600}h{s % 3600 // 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def format_usd(value: float) -> str:
    """Dollar axis label: $12.34, or three significant digits under a dollar ($0.00171)."""
    if not math.isfinite(value):
        return "?"
    if abs(value) >= 1 or value == 0:
        return f"${value:.2f}"
    return f"${value:.2g}" if abs(value) < 0.01 else f"${value:.3f}"


def fmt_usd(value: float | None, empty: str = "—") -> str:
    """Dollars with cents: three decimals under $1, two significant digits under a cent
    ($0.00098), so a small running cost visibly moves."""
    if value is None:
        return empty
    if 0 < abs(value) < 0.01:
        return f"${value:.{1 - math.floor(math.log10(abs(value)))}f}"
    return f"${value:,.3f}" if abs(value) < 1 else f"${value:,.2f}"


def fmt_hours(hours: float) -> str:
    """Hours with two decimals, three under 0.01 h (a 15-second run reads 0.004, not 0.00)."""
    return f"{hours:.3f}" if 0 < hours < 0.01 else f"{hours:.2f}"


def minimum_charged(billed: float, used: float | None, usd_per_hour: float | None) -> bool:
    """True when the one-minute minimum charge, not the seconds used, set the bill: billed
    tops used by more than whole-second rounding and the two differ once formatted."""
    if used is None:
        return False
    rounding = (usd_per_hour or 0.0) * 1.01 / 3600.0
    return billed - used > rounding and fmt_usd(billed) != fmt_usd(used)


def fmt_billed(billed: float | None, used: float | None, usd_per_hour: float | None) -> str:
    """A finished run's cost: `$0.0016 billed (1-min minimum; $0.00087 used)` when the
    minimum set the bill, else `$0.0020`."""
    if billed is None:
        return fmt_usd(None)
    if minimum_charged(billed, used, usd_per_hour):
        return f"{fmt_usd(billed)} billed (1-min minimum; {fmt_usd(used)} used)"
    return fmt_usd(billed)


def fmt_duration(seconds: float | None, empty: str = "—") -> str:
    """1h02m, 4m05s or 12s."""
    if seconds is None:
        return empty
    s = round(max(seconds, 0))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def fmt_age(seconds: float | None, empty: str = "?") -> str:
    """Age of a price: 5m, 3h, 12d."""
    if seconds is None:
        return empty
    s = max(seconds, 0)
    if s < 3600:
        return f"{s / 60:.0f}m"
    if s < 86400 * 2:
        return f"{s / 3600:.0f}h"
    return f"{s / 86400:.0f}d"


def fmt_ranks(ranks: Sequence[int], empty: str = "—") -> str:
    """Ranks as short ranges: [0, 1, 2, 5] → "0-2,5"."""
    if not ranks:
        return empty
    parts, start, prev = [], ranks[0], ranks[0]
    for rank in [*ranks[1:], None]:
        if rank is not None and rank == prev + 1:
            prev = rank
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if rank is not None:
            start = prev = rank
    return ",".join(parts)


def companion_line(facts: Mapping[str, Any]) -> str:
    """What became of the run's linear companion (plain text)."""
    if not facts.get("applied"):
        return str(facts.get("reason") or "not kept")
    return (
        f"kept: {fmt(facts.get('features'), ',')} features from {fmt(facts.get('rows'), ',')} "
        f"rows, C {facts.get('c')}, its own validation accuracy "
        f"{fmt(facts.get('valid_accuracy'), '.4f')}"
    )


def after_training_line(event: Mapping[str, Any]) -> str:
    """What rank 0 fits after the last epoch (an `after_training` event; plain text)."""
    fits = [str(name) for name in event.get("fits") or []]
    what = "the paths' blend" + (" and the linear companion" if "companion" in fits else "")
    rows = event.get("companion_rows")
    extra = f" (companion on {fmt(rows, ',')} training rows)" if "companion" in fits else ""
    valid = fmt(event.get("valid_samples"), ",")
    return f"after training: fitting {what} on {valid} validation samples{extra}"


SKIPS_SHOWN = 3
"""Skip reasons named in the preprocess line (the largest; the rest are in stats.json)."""


def preprocess_line(stats: Mapping[str, Any]) -> str:
    """What preprocessing kept, in one line (a `summary` event of the preprocess stage; plain
    text): lines read → reviews kept, duplicates and skips by reason, the split, the positive
    share and the vocabulary."""
    read, kept = stats.get("read"), stats.get("kept")
    head = "preprocess (cached)" if stats.get("cached") else "preprocess"
    dropped = []
    if isinstance(stats.get("duplicates"), int):
        dropped.append(f"{stats['duplicates']:,} duplicates")
    skipped = stats.get("skipped_total")
    if isinstance(skipped, int) and skipped:
        reasons = stats.get("skipped") or {}
        met = [(r, n) for r, n in reasons.items() if isinstance(n, int) and n]
        top = sorted(met, key=lambda item: -item[1])  # ties in the stats' own order
        named = ", ".join(f"{n:,} {str(r).replace('_', ' ')}" for r, n in top[:SKIPS_SHOWN])
        more = ", …" if len(top) > SKIPS_SHOWN else ""
        dropped.append(f"{skipped:,} skipped" + (f": {named}{more}" if named else ""))
    line = f"{head}: {fmt(read, ',')} lines read → {fmt(kept, ',')} reviews kept"
    if dropped:
        line += f" ({', '.join(dropped)})"
    line += f"; {fmt(stats.get('train'), ',')} train / {fmt(stats.get('test'), ',')} test"
    pos, neg = stats.get("positive"), stats.get("negative")
    if isinstance(pos, int) and isinstance(neg, int) and pos + neg:
        line += f", {100 * pos / (pos + neg):.1f} % positive"
    if stats.get("vocab_size") is not None:
        line += f", vocabulary {fmt(stats.get('vocab_size'), ',')}"
    return line

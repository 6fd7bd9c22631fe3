"""Table helpers: cell formatting, epoch rows and the per-phase time breakdown renderable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.table import Table
from rich.text import Text

from tui.format import fmt, fmt_duration, nice_number
from tui.model.records import EpochRow

PHASE_LABELS = {
    "data": "data",
    "h2d": "h2d",
    "forward": "fwd",
    "backward": "bwd",
    "allreduce_opt": "allred+opt",
    "eval": "eval",
}
"""Display names of the `phase` event fields."""


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of ``width`` cells filled to ``fraction`` (eighth-cell resolution)."""
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")).ljust(width, "·")[:width]


def epoch_cells(row: EpochRow, *, embeddings: bool) -> tuple[str, ...]:
    """One epochs-table row: SGNS loss, PIP loss and words/s for an embeddings run, else train
    and test loss, accuracy and F1; epochs counted from 1 (events count them from 0)."""
    if embeddings:
        rate = nice_number(row.words_per_s) if row.words_per_s is not None else "—"
        return (
            str(row.epoch + 1),
            fmt(row.train_loss, ".3f"),
            fmt(row.pip_loss, ".4g"),
            rate,
            fmt_duration(row.seconds),
        )
    return (
        str(row.epoch + 1),
        fmt(row.train_loss, ".3f"),
        fmt(row.test_loss, ".3f"),
        fmt(row.accuracy, ".3f"),
        fmt(row.f1, ".3f"),
        fmt_duration(row.seconds),
    )


def phase_table(phases: Mapping[int, Mapping[str, float]], order: Sequence[str]) -> Table | Text:
    """Seconds per phase (rows) and rank (columns, or mean/max past 4 ranks) with a share bar."""
    if not phases:
        return Text("no phase data yet", style="dim")
    ranks = sorted(phases)
    table = Table(box=None, pad_edge=False, expand=True, header_style="bold")
    table.add_column("phase", no_wrap=True)
    per_rank = len(ranks) <= 4
    if per_rank:
        for rank in ranks:
            table.add_column(f"r{rank}", justify="right", no_wrap=True)
    else:
        table.add_column("mean", justify="right")
        table.add_column("max", justify="right")
    table.add_column("share", no_wrap=True)
    means = {p: sum(phases[r].get(p, 0.0) for r in ranks) / len(ranks) for p in order}
    total = sum(means.values()) or 1.0
    for p in order:
        values = [phases[r].get(p, 0.0) for r in ranks]
        slowest = max(values)
        cells = (
            [
                Text(
                    _secs(v),
                    style="bold yellow" if v == slowest and v > 1.05 * min(values) else "",
                )
                for v in values
            ]
            if per_rank
            else [Text(_secs(means[p])), Text(_secs(slowest))]
        )
        share = means[p] / total
        table.add_row(
            PHASE_LABELS.get(p, p), *cells, Text(f"{bar(share, 4)}{share:4.0%}", style="cyan")
        )
    return table


def _secs(value: float) -> str:
    """Seconds in at most 4 characters: 0.8, 9.5, 21, 1234."""
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"

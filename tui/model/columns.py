"""Table column widths that follow the terminal: fixed columns keep theirs, flexible ones give
or take the difference within their bounds, and the least needed go when even that is too wide."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CELL_PADDING = 1
"""Cells DataTable pads each column with on either side (its default ``cell_padding``)."""


@dataclass(frozen=True, slots=True)
class Col:
    """A column: its label and width at a 120-column terminal, how far it may shrink or grow
    (both equal to ``width``: a fixed column), and when it is left out of a narrow table
    (``drop``: 0 never, else the lower the sooner)."""

    label: str
    width: int
    least: int | None = None
    most: int | None = None
    drop: int = 0
    floor: int | None = None
    """Narrower than ``least`` only when the table does not fit even without the droppable
    columns (a run id is worth more than F1, but a cut one beats scrolling sideways)."""

    @property
    def low(self) -> int:
        """Narrowest width."""
        return self.width if self.least is None else self.least

    @property
    def high(self) -> int:
        """Widest width."""
        return self.width if self.most is None else self.most


def fit_columns(cols: Sequence[Col], available: int) -> list[int]:
    """Widths that fill ``available`` cells (the table's content width), padding included; 0 for
    a column left out. When the columns at their least widths do not fit, the droppable ones go,
    lowest ``drop`` first, until they do. Then the flexible columns grow one cell at a time in
    turn up to their ``most``, or shrink down to their ``least``, the one with most room first.
    Still too wide: the least widths (the table scrolls sideways)."""
    shown = [True] * len(cols)
    lows = [c.low for c in cols]

    def cost(widths: Sequence[int]) -> int:
        return sum(w + 2 * CELL_PADDING for w, on in zip(widths, shown, strict=True) if on)

    for i in sorted((i for i, c in enumerate(cols) if c.drop), key=lambda i: cols[i].drop):
        if cost(lows) <= available:
            break
        shown[i] = False
    if cost(lows) > available:
        lows = [
            lo if c.floor is None else min(lo, c.floor) for c, lo in zip(cols, lows, strict=True)
        ]
    widths = [c.width if on else 0 for c, on in zip(cols, shown, strict=True)]
    spare = available - cost(widths)
    while spare > 0:
        growable = [i for i, c in enumerate(cols) if shown[i] and widths[i] < c.high]
        if not growable:
            break
        for i in growable[:spare]:
            widths[i] += 1
        spare -= min(spare, len(growable))
    while spare < 0:
        shrinkable = [i for i in range(len(cols)) if shown[i] and widths[i] > lows[i]]
        if not shrinkable:
            break
        roomiest = max(shrinkable, key=lambda i: widths[i] - lows[i])
        widths[roomiest] -= 1
        spare += 1
    return widths

"""Braille line charts drawn with rich: min/max decimation to the visible width, numpy only."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from rich.style import Style
from rich.text import Text

from tui.format import nice_number

PALETTE = ("#5fafff", "#ffaf5f", "#87d787", "#ff5f87", "#d7afff", "#ffd75f", "#5fd7d7", "#af8787")
"""Series colours, in order."""
_WEIGHTS = np.array([[0x01, 0x08], [0x02, 0x10], [0x04, 0x20], [0x40, 0x80]], dtype=np.uint16)


@dataclass(slots=True)
class PlotLine:
    """One series to draw."""

    label: str
    """Legend text."""
    x: np.ndarray
    """X values (any order; usually increasing)."""
    y: np.ndarray
    """Y values, same length as x."""
    color: str = ""
    """Rich colour; empty picks from the palette by position."""
    presorted: bool = False
    """x is known to be ascending without NaN (skips a check over all points)."""


def sorted_finite(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x ascending without NaN (y alongside); already-sorted input is returned as is."""
    if x.size < 2 or bool(np.all(x[1:] >= x[:-1])):  # False when x holds NaN
        return (x, y) if x.size != 1 or np.isfinite(x[0]) else (x[:0], y[:0])
    keep = np.isfinite(x)
    x, y = x[keep], y[keep]
    order = np.argsort(x, kind="stable")
    return x[order], y[order]


def decimate(
    x: np.ndarray, y: np.ndarray, x0: float, x1: float, cols: int, *, presorted: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Min and max of y in each of ``cols`` equal x-bins over [x0, x1] (NaN where no point).

    Bin edges are found by binary search in the sorted x, and two ``reduceat`` passes take the
    extremes, so 10^6 points cost about two passes over y. Gaps between bins that hold points
    are filled by linear interpolation, and each bin's range is stretched to meet its left
    neighbour's last value so the drawn line is continuous. NaN values of y are skipped.
    """
    lo = np.full(cols, np.nan)
    hi = np.full(cols, np.nan)
    if not presorted:
        x, y = sorted_finite(x, y)
    n = x.size
    if n == 0 or cols <= 0:
        return lo, hi
    span = x1 - x0 if x1 > x0 else 1.0
    edges = x0 + np.arange(1, cols) * (span / cols)
    starts = np.empty(cols, dtype=np.int64)
    starts[0] = 0
    starts[1:] = np.searchsorted(x, edges, side="left")
    ends = np.empty(cols, dtype=np.int64)
    ends[:-1] = starts[1:]
    ends[-1] = n
    used = np.flatnonzero(starts < ends)
    if used.size == 0:
        return lo, hi
    with np.errstate(invalid="ignore"):
        lo[used] = np.fmin.reduceat(y, starts[used])
        hi[used] = np.fmax.reduceat(y, starts[used])
    last = y[ends[used] - 1]
    mid = (lo[used] + hi[used]) / 2
    last = np.where(np.isnan(last), mid, last)
    have = used[~np.isnan(mid)]
    if have.size > 1:
        inner = np.arange(have[0], have[-1] + 1)
        gaps = inner[np.isnan(lo[inner])]
        if gaps.size:
            fill = np.interp(gaps, have, (lo[have] + hi[have]) / 2)
            lo[gaps] = hi[gaps] = fill
        prev_end = np.full(cols, np.nan)
        prev_end[used] = last
        prev_end[gaps] = lo[gaps]
        shifted = np.empty(cols)
        shifted[0] = np.nan
        shifted[1:] = prev_end[:-1]
        join = ~np.isnan(shifted) & ~np.isnan(lo)
        lo[join] = np.minimum(lo[join], shifted[join])
        hi[join] = np.maximum(hi[join], shifted[join])
    return lo, hi


def _fit_label(label: str, value: float, room: int) -> str:
    """``label`` in at most ``room`` characters: as it is, else its value in powers of ten
    ("$1.5e-4" for "$0.00015", keeping a leading "$"), else cut with "…" (cut alone, two small
    dollar ticks both read "$0.000…")."""
    if len(label) <= room:
        return label
    unit = "$" if label.startswith("$") else ""
    for digits in (1, 0):
        mantissa, _, power = f"{value:.{digits}e}".partition("e")
        short = f"{unit}{mantissa}e{int(power)}"
        if len(short) <= room and math.isfinite(value):
            return short
    return label[: max(room - 1, 0)] + "…"


def render_plot(
    lines: Sequence[PlotLine],
    width: int,
    height: int,
    *,
    x_format: Callable[[float], str] = nice_number,
    y_format: Callable[[float], str] = nice_number,
    x_min: float | None = None,
    y_min: float | None = None,
    y_max: float | None = None,
    floor: float | None = None,
    legend: bool = True,
    empty: str = "waiting for data…",
) -> Text:
    """A chart of ``lines`` in at most ``width`` x ``height`` cells (legend, plot, x labels):
    nothing is wider or taller, so a small widget never wraps or spills its chart. ``x_min``,
    ``y_min`` / ``y_max``: values the x and y ranges include; ``floor``: a value it never goes
    below (the padding around the data stops there: 0 for a loss)."""
    width, height = max(width, 1), max(height, 1)
    if height < 4 or width < 12:
        return _message("(too small)", width, height, centred=False)
    prepared = [
        (ln, ln.x, ln.y) if ln.presorted else (ln, *sorted_finite(ln.x, ln.y)) for ln in lines
    ]
    present = [(ln, x, y) for ln, x, y in prepared if x.size]
    if not present:
        return _message(empty, width, height)
    xs_min = min(float(x[0]) for _, x, _ in present)
    xs_max = max(float(x[-1]) for _, x, _ in present)
    if x_min is not None:
        xs_min = min(x_min, xs_min)
    # decimate first (the bins depend on x only), then take the y range from the bins
    gutter_guess = 7  # y labels are at most 6 characters, almost always
    px_w_guess = max(width - gutter_guess, 2) * 2
    binned = [decimate(x, y, xs_min, xs_max, px_w_guess, presorted=True) for _, x, y in present]
    finite = [b for pair in binned for b in pair if not np.isnan(b).all()]
    lo_y = min(float(np.nanmin(b)) for b in finite) if finite else 0.0
    hi_y = max(float(np.nanmax(b)) for b in finite) if finite else 1.0
    if y_min is not None:
        lo_y = min(y_min, lo_y)
    if y_max is not None:
        hi_y = max(y_max, hi_y)
    if hi_y - lo_y < 1e-12:
        pad = abs(hi_y) * 0.1 or 1.0
        at_least = y_min is not None and lo_y <= y_min  # all $0 read "$1.00 … $-1.00"
        lo_y, hi_y = (lo_y if at_least else lo_y - pad), hi_y + pad
    else:
        pad = (hi_y - lo_y) * 0.05
        hi_y += pad
        if y_min is None:
            lo_y -= pad
    if floor is not None and lo_y < floor <= hi_y - 1e-12:  # a loss or a rate is never below 0
        lo_y = floor
    ticks = (hi_y, (hi_y + lo_y) / 2, lo_y)
    labels = [y_format(v) for v in ticks]
    gutter = max(max(len(s) for s in labels) + 1, gutter_guess)
    if gutter > width // 2:  # huge labels: shorten them rather than the plot or the border
        gutter = width // 2
        labels = [_fit_label(s, v, gutter - 1) for s, v in zip(labels, ticks, strict=True)]
    plot_w = max(width - gutter, 2)
    plot_h = max(height - (2 if legend else 1), 1)
    px_w, px_h = plot_w * 2, plot_h * 4
    codes = np.zeros((plot_h, plot_w), dtype=np.uint16)
    owner = np.full((plot_h, plot_w), -1, dtype=np.int16)
    rows = np.arange(px_h)[:, None]
    scale = (px_h - 1) / (hi_y - lo_y)
    for index, (_, x, y) in enumerate(present):
        lo, hi = binned[index]
        if lo.size != px_w:  # the y labels took another width than guessed
            lo, hi = decimate(x, y, xs_min, xs_max, px_w, presorted=True)
        valid = ~np.isnan(lo)
        if not valid.any():
            continue
        top = np.where(valid, np.rint((hi_y - hi) * scale), px_h).astype(np.int64)
        bottom = np.where(valid, np.rint((hi_y - lo) * scale), -1).astype(np.int64)
        grid = (rows >= top[None, :]) & (rows <= bottom[None, :])
        cell = grid.reshape(plot_h, 4, plot_w, 2).transpose(0, 2, 1, 3)
        line_codes = (cell * _WEIGHTS).sum(axis=(2, 3)).astype(np.uint16)
        codes |= line_codes
        owner[line_codes > 0] = index
    colors = [ln.color or PALETTE[i % len(PALETTE)] for i, (ln, _, _) in enumerate(present)]
    styles = [Style(color=c) for c in colors]
    out = Text(no_wrap=True, overflow="crop")
    if legend:
        legend_text = Text(" " * gutter)
        for (line, _, _), color in zip(present, colors, strict=True):
            legend_text.append("━ ", style=color).append(line.label + "  ")
        legend_text.truncate(width)
        out.append_text(legend_text)
        out.append("\n")
    label_rows = {0: labels[0], plot_h // 2: labels[1], plot_h - 1: labels[2]}
    axis_style = Style(dim=True)
    for r in range(plot_h):
        out.append(label_rows.get(r, "").rjust(gutter - 1) + "┤", style=axis_style)
        row_codes, row_owner = codes[r], owner[r]
        start = 0
        for c in range(1, plot_w + 1):
            if c == plot_w or row_owner[c] != row_owner[start]:
                chunk = "".join(chr(0x2800 + int(v)) for v in row_codes[start:c])
                o = int(row_owner[start])
                out.append(chunk, style=styles[o] if o >= 0 else None)
                start = c
        out.append("\n")
    left, right = x_format(xs_min), x_format(xs_max)
    room = plot_w - len(left) - len(right)  # two labels run together read as one number
    axis = " " * gutter + (left + " " * room + right if room >= 1 else left)
    out.append(axis[:width], style=axis_style)
    return out


def _message(text: str, width: int, height: int, *, centred: bool = True) -> Text:
    """``text`` (dim) wrapped to ``width``, cut to ``height`` lines, centred when asked."""
    wrapped = [row.strip() for row in textwrap.wrap(text, width)] or [""]
    rows = wrapped[:height]
    if len(wrapped) > height:
        rows[-1] = rows[-1][: width - 1] + "…"
    if centred:
        rows = [""] * ((height - len(rows)) // 2) + [r.center(width) for r in rows]
    return Text("\n".join(rows), style="dim", no_wrap=True, overflow="crop")

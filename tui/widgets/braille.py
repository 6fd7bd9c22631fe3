"""Braille line charts drawn with rich: min/max decimation to the visible width, numpy only."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from rich.style import Style
from rich.text import Text

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


def decimate(
    x: np.ndarray, y: np.ndarray, x0: float, x1: float, cols: int
) -> tuple[np.ndarray, np.ndarray]:
    """Min and max of y in each of ``cols`` equal x-bins over [x0, x1] (NaN where no point).

    O(n) with numpy reductions, so 10^6 points take a few milliseconds. Gaps between bins
    that hold points are filled by linear interpolation, and each bin's range is stretched to
    meet its left neighbour so the drawn line is continuous.
    """
    lo = np.full(cols, np.nan)
    hi = np.full(cols, np.nan)
    ok = np.isfinite(x) & np.isfinite(y)
    if not ok.all():
        x, y = x[ok], y[ok]
    if x.size == 0 or cols <= 0:
        return lo, hi
    if x.size > 1 and np.any(x[1:] < x[:-1]):
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    span = x1 - x0 if x1 > x0 else 1.0
    col = ((x - x0) * (cols / span)).astype(np.int64)
    np.clip(col, 0, cols - 1, out=col)
    starts = np.flatnonzero(np.r_[True, col[1:] != col[:-1]])
    used = col[starts]
    ends = np.r_[starts[1:], col.size]
    lo[used] = np.minimum.reduceat(y, starts)
    hi[used] = np.maximum.reduceat(y, starts)
    first, last = y[starts], y[ends - 1]
    if used.size > 1:
        inner = np.arange(used[0], used[-1] + 1)
        gaps = inner[np.isnan(lo[inner])]
        if gaps.size:
            fill = np.interp(gaps, used, (first + last) / 2)
            lo[gaps] = hi[gaps] = fill
        # stretch each column to its left neighbour's end value (continuity)
        prev_end = np.full(cols, np.nan)
        prev_end[used] = last
        prev_end[gaps] = lo[gaps]
        shifted = np.r_[np.nan, prev_end[:-1]]
        has = ~np.isnan(shifted) & ~np.isnan(lo)
        lo[has] = np.minimum(lo[has], shifted[has])
        hi[has] = np.maximum(hi[has], shifted[has])
    return lo, hi


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
    """Dollar axis label."""
    return f"${value:.2f}" if math.isfinite(value) else "?"


def render_plot(
    lines: Sequence[PlotLine],
    width: int,
    height: int,
    *,
    x_format: Callable[[float], str] = nice_number,
    y_format: Callable[[float], str] = nice_number,
    y_min: float | None = None,
    y_max: float | None = None,
    legend: bool = True,
) -> Text:
    """A chart of ``lines`` exactly ``width`` x ``height`` cells (legend, plot, x labels)."""
    width, height = max(width, 1), max(height, 1)
    if height < 4 or width < 12:
        return Text("(too small)", style="dim")
    present = [ln for ln in lines if ln.x.size]
    if not present:
        return Text("\n" * (height // 2) + "waiting for data…".center(width), style="dim")
    xs_min = min(float(np.nanmin(ln.x)) for ln in present)
    xs_max = max(float(np.nanmax(ln.x)) for ln in present)
    finite_y = [ln.y[np.isfinite(ln.y)] for ln in present]
    finite_y = [v for v in finite_y if v.size]
    lo_y = min(float(v.min()) for v in finite_y) if finite_y else 0.0
    hi_y = max(float(v.max()) for v in finite_y) if finite_y else 1.0
    if y_min is not None:
        lo_y = min(y_min, lo_y)
    if y_max is not None:
        hi_y = max(y_max, hi_y)
    if hi_y - lo_y < 1e-12:
        pad = abs(hi_y) * 0.1 or 1.0
        lo_y, hi_y = lo_y - pad, hi_y + pad
    else:
        pad = (hi_y - lo_y) * 0.05
        hi_y += pad
        if y_min is None:
            lo_y -= pad
    labels = [y_format(hi_y), y_format((hi_y + lo_y) / 2), y_format(lo_y)]
    gutter = max(len(s) for s in labels) + 1
    plot_w = max(width - gutter, 2)
    plot_h = max(height - (2 if legend else 1), 1)
    px_w, px_h = plot_w * 2, plot_h * 4
    codes = np.zeros((plot_h, plot_w), dtype=np.uint16)
    owner = np.full((plot_h, plot_w), -1, dtype=np.int16)
    rows = np.arange(px_h)[:, None]
    scale = (px_h - 1) / (hi_y - lo_y)
    for index, line in enumerate(present):
        lo, hi = decimate(line.x, line.y, xs_min, xs_max, px_w)
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
    colors = [ln.color or PALETTE[i % len(PALETTE)] for i, ln in enumerate(present)]
    styles = [Style(color=c) for c in colors]
    out = Text(no_wrap=True, overflow="crop")
    if legend:
        legend_text = Text(" " * gutter)
        for line, color in zip(present, colors, strict=True):
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
    axis = " " * gutter + left + right.rjust(max(plot_w - len(left), 0))
    out.append(axis[:width], style=axis_style)
    return out

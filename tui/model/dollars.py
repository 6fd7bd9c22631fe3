"""Dollars used at given elapsed times, from a run's cost series: the $ axis of every plot."""

from __future__ import annotations

import numpy as np


def usd_at(ts: np.ndarray, ys: np.ndarray, usd_per_hour: float | None, x: np.ndarray) -> np.ndarray:
    """Dollars used at each elapsed second of ``x``: linear between the (``ts``, ``ys``) cost
    points, from $0 at 0 s up to the first, and at ``usd_per_hour`` past the last.

    A flat series (a run recorded before `cost` events carried ``accrued_usd``: the billed
    one-minute minimum) would map every x to one dollar figure, so the rate alone is used then.
    """
    x = np.asarray(x, dtype=np.float64)
    rate = (usd_per_hour or 0.0) / 3600.0
    ts, ys = np.asarray(ts, dtype=np.float64), np.asarray(ys, dtype=np.float64)
    if ts.size == 0 or (rate > 0 and np.ptp(ys) == 0):
        flat: np.ndarray = rate * np.maximum(x, 0.0)
        return flat
    t0, y0 = ts[0], ys[0]
    head = y0 * x / t0 if t0 > 0 else np.full_like(x, y0)
    out = np.interp(x, ts, ys)
    out = np.where(x < t0, head, out)
    used: np.ndarray = np.where(x > ts[-1], ys[-1] + rate * (x - ts[-1]), out)
    return used

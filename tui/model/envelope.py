"""SeriesEnvelope: a few thousand points of a Series that plot like all of them, kept incrementally.

A plot shows at most a few hundred pixel columns, so copying 10^6 points out of the model on
every redraw is waste. The envelope cuts the series into blocks of consecutive points (a power
of two long, so that there are never more than ``2 * max_blocks`` of them) and keeps, per
block, the indices of its first, lowest, highest and last point. Those real points, in order,
draw the same min/max line as the whole series wherever one block spans less than a pixel
column, and every extreme of the series is among them.

A Series only grows at its end (its newest point may be rewritten) until it thins itself, so a
sync costs O(points added since the last one) plus a gather of at most ``8 * max_blocks``
points; blocks double by merging pairs, which needs no pass over the points. Call
:meth:`SeriesEnvelope.sync` with the state's lock held: it reads the model's buffers in place
and hands back arrays of its own.
"""

from __future__ import annotations

import numpy as np

from tui.model.series import Series

MAX_BLOCKS = 2048
"""Blocks kept at least once a series is long enough (at most twice as many): 4 points each."""
COLUMNS = ("t", "step", "y")


class SeriesEnvelope:
    """Columns t, step and y of the points that shape one Series' plot."""

    __slots__ = (
        "_done",
        "_first",
        "_generation",
        "_high",
        "_high_at",
        "_kept_columns",
        "_low",
        "_low_at",
        "_version",
        "block",
        "columns",
        "max_blocks",
    )

    def __init__(self, max_blocks: int = MAX_BLOCKS) -> None:
        if max_blocks < 1:
            raise ValueError(f"max_blocks must be >= 1, got {max_blocks}")
        self.max_blocks = max_blocks
        """Blocks are merged in pairs once there are more than twice this many."""
        self.block = 1
        """Points per block now (a power of two)."""
        self.columns: dict[str, np.ndarray] = {c: np.empty(0) for c in COLUMNS}
        """Column name -> values at the kept points, in series order."""
        self._generation = -1
        self._version = -1
        self._reset(0)

    def _reset(self, block: int) -> None:
        self.block = max(block, 1)
        self._done = 0  # points covered by complete blocks
        self._first = np.empty(0, dtype=np.int64)  # index of each complete block's first point
        self._low_at = np.empty(0, dtype=np.int64)
        self._high_at = np.empty(0, dtype=np.int64)
        self._low = np.empty(0)
        self._high = np.empty(0)
        # the columns at the points kept from complete blocks (grown as blocks complete)
        self._kept_columns: dict[str, np.ndarray] = {c: np.empty(0) for c in COLUMNS}

    def sync(self, series: Series) -> dict[str, np.ndarray]:
        """Bring the envelope up to date with ``series`` (call with the state's lock held)."""
        if series.version == self._version and series.generation == self._generation:
            return self.columns
        n = len(series)
        if series.generation != self._generation or n - 1 < self._done:
            self._reset(self._block_for(n))
        self._generation, self._version = series.generation, series.version
        if n == 0:
            self.columns = {c: np.empty(0) for c in COLUMNS}
            return self.columns
        buffers = {name: np.frombuffer(getattr(series, name), dtype=np.float64) for name in COLUMNS}
        try:
            self._add_blocks(buffers, n)
            tail = self._tail_indices(buffers["y"], n)
            self.columns = {
                name: np.concatenate([self._kept_columns[name], values[tail]])
                for name, values in buffers.items()
            }
        finally:
            del buffers  # release the exports so the array.arrays can grow again
        return self.columns

    def _block_for(self, n: int) -> int:
        """The block length a fresh envelope of n points takes (what growth would reach)."""
        block = 1
        while (n - 1) // block > 2 * self.max_blocks:
            block *= 2
        return block

    def _add_blocks(self, buffers: dict[str, np.ndarray], n: int) -> None:
        """Summarise the blocks completed since the last sync (the newest point stays out)."""
        merged = False
        while self.block < self._block_for(n):  # longer blocks first: a big batch is one pass
            self._merge_pairs()
            merged = True
        end = (n - 1) // self.block * self.block
        added = self._first.size
        if end > self._done:
            rows = buffers["y"][self._done : end].reshape(-1, self.block)
            low_at, high_at = _extremes(rows)
            offsets = np.arange(self._done, end, self.block, dtype=np.int64)
            picked = np.arange(rows.shape[0])
            self._first = np.concatenate([self._first, offsets])
            self._low_at = np.concatenate([self._low_at, offsets + low_at])
            self._high_at = np.concatenate([self._high_at, offsets + high_at])
            self._low = np.concatenate([self._low, rows[picked, low_at]])
            self._high = np.concatenate([self._high, rows[picked, high_at]])
            self._done = end
        if merged:
            kept = self._block_indices(0)
            self._kept_columns = {name: v[kept] for name, v in buffers.items()}
        elif self._first.size > added:
            new = self._block_indices(added)
            for name, values in buffers.items():
                self._kept_columns[name] = np.concatenate([self._kept_columns[name], values[new]])

    def _merge_pairs(self) -> None:
        """Double the block length: pairs of blocks become one (an odd last one is redone)."""
        pairs = self._first.size // 2
        keep = 2 * pairs
        first = self._first[:keep:2]
        low, high = self._low[:keep].reshape(pairs, 2), self._high[:keep].reshape(pairs, 2)
        low_at = self._low_at[:keep].reshape(pairs, 2)
        high_at = self._high_at[:keep].reshape(pairs, 2)
        # the right block wins only when strictly more extreme (or the left one is all NaN)
        right_low = (low[:, 1] < low[:, 0]) | (np.isnan(low[:, 0]) & ~np.isnan(low[:, 1]))
        right_high = (high[:, 1] > high[:, 0]) | (np.isnan(high[:, 0]) & ~np.isnan(high[:, 1]))
        pick_low, pick_high = right_low.astype(np.int64), right_high.astype(np.int64)
        rows = np.arange(pairs)
        self._first = first
        self._low_at, self._low = low_at[rows, pick_low], low[rows, pick_low]
        self._high_at, self._high = high_at[rows, pick_high], high[rows, pick_high]
        self.block *= 2
        self._done = pairs * self.block

    def _block_indices(self, start: int) -> np.ndarray:
        """Sorted, distinct indices of the points kept from complete blocks ``start`` on."""
        first = self._first[start:]
        last = np.empty_like(first)
        last[:-1] = first[1:] - 1
        if last.size:
            last[-1] = self._done - 1
        blocks = np.stack([first, self._low_at[start:], self._high_at[start:], last], axis=1)
        blocks.sort(axis=1)
        return _distinct(blocks.ravel())

    def _tail_indices(self, y: np.ndarray, n: int) -> np.ndarray:
        """Sorted, distinct indices of the open tail's first, lowest, highest and last point."""
        low_at, high_at = _extremes(y[self._done : n].reshape(1, -1))
        at = np.array([0, low_at[0], high_at[0], n - 1 - self._done], dtype=np.int64)
        return _distinct(np.sort(at) + self._done)


def _distinct(index: np.ndarray) -> np.ndarray:
    """``index`` (sorted) without repeats."""
    if index.size < 2:
        return index
    keep = np.empty(index.size, dtype=bool)
    keep[0] = True
    np.not_equal(index[1:], index[:-1], out=keep[1:])
    return index[keep]


def _extremes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the positions of the lowest and highest value, NaN skipped (first one on ties)."""
    low_at, high_at = rows.argmin(axis=1), rows.argmax(axis=1)
    picked = np.arange(rows.shape[0])
    nan_rows = np.flatnonzero(np.isnan(rows[picked, low_at]) | np.isnan(rows[picked, high_at]))
    if nan_rows.size:  # argmin/argmax stop at a NaN; redo those rows without them
        sub = rows[nan_rows]
        missing = np.isnan(sub)
        low_at[nan_rows] = np.where(missing, np.inf, sub).argmin(axis=1)
        high_at[nan_rows] = np.where(missing, -np.inf, sub).argmax(axis=1)
    return low_at, high_at

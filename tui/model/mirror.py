"""SeriesMirror: numpy copies of a Series, refreshed incrementally (only new points are copied).

Views hold the RunState lock only while calling :meth:`SeriesMirror.sync`; the arrays it
returns are theirs to read afterwards. A series only grows at its end (the newest point may be
rewritten) until it thins itself, so a sync copies O(new points), not O(all points).
"""

from __future__ import annotations

import numpy as np

from tui.model.series import Series

COLUMNS = ("t", "step", "y")


class SeriesMirror:
    """Numpy columns t, step and y mirroring one Series."""

    __slots__ = ("_generation", "_n", "_version", "columns")

    def __init__(self) -> None:
        self.columns: dict[str, np.ndarray] = {c: np.empty(0) for c in COLUMNS}
        """Column name -> array of the first n points (views of a larger buffer)."""
        self._generation = -1
        self._version = -1
        self._n = 0

    def sync(self, series: Series) -> dict[str, np.ndarray]:
        """Bring the copies up to date with ``series`` (call with the state's lock held)."""
        n = len(series)
        if series.version == self._version and series.generation == self._generation:
            return self.columns
        full = series.generation != self._generation or n < self._n
        start = 0 if full else max(self._n - 1, 0)  # the newest point may have been rewritten
        for name in COLUMNS:
            source = np.frombuffer(getattr(series, name), dtype=np.float64)
            current = self.columns[name]
            base = current.base if current.base is not None else current
            if full or base.size < n:
                buffer = np.empty(n + max(n // 2, 64))
                if not full:
                    buffer[:start] = current[:start]
                base = buffer
            base[start:n] = source[start:n]
            del source  # release the export so the array.array can grow again
            self.columns[name] = base[:n]
        self._n = n
        self._version = series.version
        self._generation = series.generation
        return self.columns

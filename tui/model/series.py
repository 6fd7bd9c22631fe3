"""Bounded time series: parallel float arrays that halve their resolution when full."""

from __future__ import annotations

import math
from array import array

DEFAULT_CAPACITY = 1 << 14
"""Points kept per series before it thins itself (memory stays O(capacity))."""


class Series:
    """Points (t, step, y) appended in time order, kept under ``capacity``.

    When the series reaches ``capacity`` points it keeps every other point, so memory stays
    bounded however long a run lasts while the whole history remains covered (at a coarser
    resolution). ``t`` is seconds since the run began, ``step`` the global step (NaN where a
    series has none), ``y`` the value.
    """

    __slots__ = (
        "_append_every",
        "_pending",
        "_provisional",
        "capacity",
        "generation",
        "name",
        "step",
        "step_sorted",
        "t",
        "t_sorted",
        "version",
        "y",
    )

    def __init__(self, name: str, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 4:
            raise ValueError(f"Series capacity must be >= 4, got {capacity}")
        self.name = name
        """Label shown in legends."""
        self.capacity = capacity
        """Most points kept; the series thins itself by 2 when it reaches this."""
        self.t = array("d")
        self.step = array("d")
        self.y = array("d")
        self.version = 0
        """Bumped on every change, so renderers can cache."""
        self.generation = 0
        """Bumped when the series thins itself (points before the end moved)."""
        self.t_sorted = True
        """True while t never decreased (plots then skip sorting)."""
        self.step_sorted = True
        """True while step never decreased and was never NaN."""
        self._append_every = 1
        self._pending = 0
        self._provisional = False

    def __len__(self) -> int:
        return len(self.y)

    def append(self, t: float, y: float, step: float = math.nan) -> None:
        """Add one point; once thinned, 1 in ``stride`` is kept, and always the newest."""
        if not self._provisional:
            if self.t and (t < self.t[-1] or not step >= self.step[-1]):
                self.t_sorted = self.t_sorted and t >= self.t[-1]
                self.step_sorted = self.step_sorted and step >= self.step[-1]
            self.t.append(t)
            self.step.append(step)
            self.y.append(y)
        else:  # the newest point stands in until the stride is complete
            self.t[-1] = t
            self.step[-1] = step
            self.y[-1] = y
        self.version += 1
        if self._append_every > 1:
            self._pending += 1
            self._provisional = self._pending < self._append_every
            if not self._provisional:
                self._pending = 0
        if len(self.y) >= self.capacity:
            self._thin()

    def _thin(self) -> None:
        last = (self.t[-1], self.step[-1], self.y[-1])
        self.t = self.t[::2]
        self.step = self.step[::2]
        self.y = self.y[::2]
        if self.t[-1] != last[0]:
            self.t.append(last[0])
            self.step.append(last[1])
            self.y.append(last[2])
        self._append_every *= 2
        self.generation += 1
        self._pending = 0
        self._provisional = False

    @property
    def stride(self) -> int:
        """How many appended points one kept point stands for now."""
        return self._append_every

    @property
    def last(self) -> float | None:
        """The newest value, or None when empty."""
        return self.y[-1] if self.y else None

    def nbytes(self) -> int:
        """Bytes held by the point buffers."""
        return sum(a.buffer_info()[1] * a.itemsize for a in (self.t, self.step, self.y))

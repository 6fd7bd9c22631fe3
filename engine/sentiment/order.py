"""The per-epoch sample order: blocks of rows shuffled, then rows shuffled within windows.

An epoch visits every sample once, in an order that is a function of (seed, epoch, number of
samples) only — never of the number of ranks, their shares or the storage — so any rank can
compute the ids at any global position without communication, and a run resumed on another
world size continues the same sequence.

A full permutation of N ids costs 8·N bytes on every rank (1.1 GB at the 142 M reviews of the
old study's corpus) and scatters reads over the whole file, which a cold page cache serves at
disk seek speed. Instead (as MosaicML Streaming's block shuffles do):

1. the rows are cut into blocks of ``block`` consecutive rows; the blocks are permuted by
   ``default_rng([seed, epoch])``;
2. consecutive groups of ``window_blocks`` permuted blocks form *windows*; the rows of window
   ``w`` are permuted by ``default_rng([seed, epoch, w + 1])``.

Memory is O(N / block + block · window_blocks) (a few MB at any N), a window reads
``window_blocks`` contiguous runs of the file (which the loader asks the kernel to read ahead),
and every global batch draws from ``window_blocks`` places spread over the whole file. A split
of at most ``block · window_blocks`` rows is one window: a uniform permutation.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

BLOCK_ROWS = 4096
"""Rows per block (≈ 0.8 MB of uint16 ids at 100 tokens: one contiguous read)."""
WINDOW_BLOCKS = 64
"""Blocks whose rows are shuffled together (262 144 rows ≈ 2 MB of ids per window held)."""

WindowHook = Callable[[list[tuple[int, int]]], None]
"""Called with the row ranges [lo, hi) of a window about to be read (prefetch)."""


class EpochOrder:
    """Sample ids by epoch position for (seed, epoch, n); keeps the two latest windows."""

    def __init__(
        self,
        n: int,
        seed: int,
        epoch: int,
        *,
        block: int = BLOCK_ROWS,
        window_blocks: int = WINDOW_BLOCKS,
        on_window: WindowHook | None = None,
    ) -> None:
        if n < 0 or block < 1 or window_blocks < 1:
            raise ValueError(f"bad order shape: n={n} block={block} window={window_blocks}")
        self.n, self.seed, self.epoch = n, seed, epoch
        self.block, self.window_blocks = block, window_blocks
        self.on_window = on_window
        nblocks = -(-n // block)
        self.blocks = np.random.default_rng([seed, epoch]).permutation(nblocks)  # (nblocks,)
        sizes = np.minimum(block, n - self.blocks * block)  # only the last block is short
        firsts = np.arange(0, nblocks, window_blocks)
        per_window = np.add.reduceat(sizes, firsts) if n else np.empty(0, dtype=np.int64)
        self.starts = np.concatenate(([0], np.cumsum(per_window))).astype(np.int64)
        """First position of each window (and n at the end)."""
        self._cache: dict[int, np.ndarray] = {}

    @property
    def windows(self) -> int:
        """Number of windows."""
        return len(self.starts) - 1

    def ranges(self, w: int) -> list[tuple[int, int]]:
        """Row ranges [lo, hi) of window ``w`` (sorted; one per block)."""
        blocks = np.sort(self.blocks[w * self.window_blocks : (w + 1) * self.window_blocks])
        return [(int(b) * self.block, min(self.n, (int(b) + 1) * self.block)) for b in blocks]

    def window(self, w: int) -> np.ndarray:
        """Sample ids of window ``w`` in epoch order (cached; the next window is announced)."""
        ids = self._cache.get(w)
        if ids is not None:
            return ids
        if self.on_window is not None:
            if not self._cache:  # the first window read in this epoch (or after a resume)
                self.on_window(self.ranges(w))
            if w + 1 < self.windows:
                self.on_window(self.ranges(w + 1))
        blocks = self.blocks[w * self.window_blocks : (w + 1) * self.window_blocks]
        rows = (blocks[:, None] * self.block + np.arange(self.block)[None, :]).ravel()
        if rows.size and rows.max() >= self.n:
            rows = rows[rows < self.n]
        ids = rows[np.random.default_rng([self.seed, self.epoch, w + 1]).permutation(rows.size)]
        if len(self._cache) >= 2:
            del self._cache[min(self._cache)]
        self._cache[w] = ids
        return ids

    def take(self, lo: int, hi: int) -> np.ndarray:
        """Sample ids at epoch positions [lo, hi)."""
        if not 0 <= lo <= hi <= self.n:
            raise IndexError(f"positions [{lo}, {hi}) outside 0..{self.n}")
        parts = []
        w = int(np.searchsorted(self.starts, lo, side="right")) - 1
        while lo < hi:
            start, stop = int(self.starts[w]), int(self.starts[w + 1])
            end = min(hi, stop)
            parts.append(self.window(w)[lo - start : end - start])
            lo, w = end, w + 1
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)

    def full(self) -> np.ndarray:
        """Every id in epoch order (tests and small splits; O(n) memory)."""
        return self.take(0, self.n)

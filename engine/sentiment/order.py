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

3. with length buckets (``lengths`` and ``group`` given: ``train.length_buckets``), each
   window's permuted rows are cut into chunks of ``group · BUCKET_GROUPS`` rows; a chunk is
   sorted by length and cut into groups of ``group`` rows (the global batch); runs of
   BUCKET_RUN neighbouring groups are shuffled, and each group's rows, by
   ``default_rng([seed, epoch, w + 1, 0])``. A global batch then holds rows
   of similar length, so it is padded to little more than its own longest row instead of to
   the longest of ``group`` random rows (on the GPU path every row is run to the batch's
   width); every rank's share of it is a random part of the same narrow band, so no rank gets
   all the long rows.

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

BUCKET_GROUPS = 64
"""Global batches whose rows are sorted by length together (a chunk of a window)."""
BUCKET_RUN = 4
"""Groups of neighbouring length bands kept together, in ascending order, when a chunk's groups
are shuffled."""

WindowHook = Callable[[list[tuple[int, int]]], None]
LengthsOf = Callable[[np.ndarray], np.ndarray]
"""Sample ids → their token lengths (for length buckets)."""
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
        lengths: LengthsOf | None = None,
        group: int = 0,
    ) -> None:
        if n < 0 or block < 1 or window_blocks < 1 or group < 0:
            raise ValueError(
                f"bad order shape: n={n} block={block} window={window_blocks} group={group}"
            )
        self.n, self.seed, self.epoch = n, seed, epoch
        bucketed = lengths is not None and group > 1
        self.lengths: LengthsOf | None = lengths if bucketed else None
        self.group = group if bucketed else 0
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
        if self.lengths is not None and ids.size > self.group:
            ids = self._bucketed(ids, self.lengths(ids), w)
        if len(self._cache) >= 2:
            del self._cache[min(self._cache)]
        self._cache[w] = ids
        return ids

    def _bucketed(self, ids: np.ndarray, lengths: np.ndarray, w: int) -> np.ndarray:
        """``ids`` (a window in permuted order) regrouped by length: see the module's step 3.
        Chunks and groups are cut at epoch positions (multiples of ``group``), so a global
        batch is about one group whatever the windows' sizes; groups move in runs of
        BUCKET_RUN neighbouring bands, so a batch that straddles two groups (a plan's steps are
        not exact multiples of the batch) mostly meets the next band, not a random one."""
        pos = int(self.starts[w]) + np.arange(ids.size)
        chunk = pos // (self.group * BUCKET_GROUPS)
        by_length = np.lexsort((pos, lengths, chunk))  # sorted within each chunk, ties stable
        group = pos // self.group
        run = group // BUCKET_RUN - int(group[0]) // BUCKET_RUN
        rng = np.random.default_rng([self.seed, self.epoch, w + 1, 0])
        run_key = rng.permutation(int(run[-1]) + 1)[run] * BUCKET_RUN + group % BUCKET_RUN
        row_key = rng.random(ids.size)  # a row's place in its group
        final = np.lexsort((row_key, run_key, chunk))
        result: np.ndarray = ids[by_length][final]
        return result

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

"""The node's one uncompressed copy of a split, memory-mapped by every local rank.

Why this design (issue 12): the loader needs random rows of a split larger than a rank's
memory, in an order that depends only on (seed, epoch) (:mod:`engine.sentiment.order`).

* Reading rows through h5py costs a library call and the HDF5 global lock per read (the old
  per-sample design did 7 k rows/s); reading whole chunks would tie the order to the chunking.
* A plain ``.npy`` copy of ``tokens``, ``labels`` and ``lengths``, mapped with ``mmap``, makes a
  row a memory access: ``np.take`` gathers a batch straight from the page cache (no copy per
  rank, nothing in the rank's anonymous memory), the kernel shares those pages between every
  process of the node (one copy per node, however many ranks), and evicts them under memory
  pressure instead of killing a rank. The loader announces each order window's row ranges
  with ``posix_fadvise(WILLNEED)`` so a cold cache is read ahead in large contiguous runs.
* The copy costs disk (the ids uncompressed: ≈ dataset.h5's size) and one sequential pass
  at the first run on a node. It lives in the node's user cache folder (``streams/`` under
  ``$SENTITOP_CACHE_DIR`` or the platform's; ``train.data_cache`` overrides), not in the data
  folder, which launchers ship to nodes. It is keyed by dataset.h5's path,
  size and mtime, written once under a file lock (the first local rank writes, the others
  wait), published by atomic renames, and replaced when dataset.h5 changes; copies of
  datasets that no longer exist are removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from engine.errors import DatasetError

ARRAYS = ("tokens", "labels", "lengths")
"""The per-split datasets copied (as in dataset.h5: uint16/int32 ids, uint8, int32)."""
_BLOCK_BYTES = 16 << 20
"""Bytes per read/write while copying (bounded memory)."""
_SPARE_BYTES = 256 << 20
"""Free space to leave on the cache disk after a copy."""


def cache_root(override: str | Path | None = None) -> Path:
    """Where this node keeps dataset copies: ``override``, else ``streams/`` in the user cache
    folder ($SENTITOP_CACHE_DIR, else the platform's, as for cached datasets and prices)."""
    if override:
        return Path(override).expanduser()
    env = os.environ.get("SENTITOP_CACHE_DIR")
    if env:
        return Path(env).expanduser() / "streams"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("sentitop")) / "streams"


@dataclass(frozen=True, slots=True)
class CopyInfo:
    """Where a split's copy is and what making it cost (zero when it already existed)."""

    folder: Path
    nbytes: int
    """Bytes of the three arrays."""
    written_s: float
    """Seconds this process spent writing the copy (0.0: another process or run made it)."""


def _source_key(h5: Path) -> tuple[str, str]:
    """(entry name from the real path, version key from size and mtime) of a dataset.h5."""
    real = os.path.realpath(h5)
    st = os.stat(real)
    return hashlib.sha1(real.encode()).hexdigest()[:16], f"{st.st_size:x}-{st.st_mtime_ns:x}"


@contextlib.contextmanager
def _locked(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    """Hold an exclusive flock on ``path`` (yields False when non-blocking and busy)."""
    with open(path, "a+b") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _file(folder: Path, split: str, key: str, name: str) -> Path:
    return folder / f"{split}-{key}.{name}.npy"


def ensure_copy(h5: Path, split: str, cache: str | Path | None = None) -> CopyInfo:
    """The node's copy of ``split`` of ``h5``, written now if missing (under the entry's lock)."""
    root = cache_root(cache)
    entry, key = _source_key(h5)
    folder = root / entry
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetError(
            f"cannot create the dataset cache {folder}: {exc}",
            hint="set SENTITOP_CACHE_DIR or train.data_cache to a writable folder",
        ) from None
    files = [_file(folder, split, key, name) for name in ARRAYS]
    written = 0.0
    with _locked(folder / ".lock"):
        if not all(f.is_file() for f in files):
            _remove_stale(folder, split, key)
            start = time.perf_counter()
            _write_copy(h5, split, folder, key)
            written = time.perf_counter() - start
            source = {"dataset": os.path.realpath(h5), "host": socket.gethostname()}
            (folder / "source.json").write_text(json.dumps(source))
    _collect_orphans(root, keep=folder)
    return CopyInfo(folder, sum(f.stat().st_size for f in files), written)


def _remove_stale(folder: Path, split: str, key: str) -> None:
    """Copies of an earlier version of the dataset, and temporary files of a dead writer."""
    for path in folder.iterdir():
        stale = path.name.startswith(f"{split}-") and not path.name.startswith(f"{split}-{key}.")
        if stale or (path.name.startswith(f".{split}-") and path.name.endswith(".tmp")):
            path.unlink(missing_ok=True)


def _collect_orphans(root: Path, keep: Path) -> None:
    """Remove entries this host made whose dataset.h5 is gone (best effort; skips entries in
    use; another host's entries are left alone: their dataset may live on that host's disk)."""
    for folder in root.iterdir():
        source = folder / "source.json"
        if folder == keep or not source.is_file():
            continue
        try:
            made = json.loads(source.read_text())
            here = made.get("host", socket.gethostname()) == socket.gethostname()  # old: no host
            gone = here and not Path(made["dataset"]).exists()
        except (OSError, ValueError, KeyError):
            continue
        if gone:
            with _locked(folder / ".lock", blocking=False) as got:
                if got:
                    shutil.rmtree(folder, ignore_errors=True)


def _write_copy(h5: Path, split: str, folder: Path, key: str) -> None:
    """Stream the split's arrays into ``.npy`` files (bounded memory), then rename each."""
    with h5py.File(h5, "r") as fh:
        group = fh[split]
        need = sum(group[name].size * group[name].dtype.itemsize for name in ARRAYS)
        free = shutil.disk_usage(folder).free
        if free < need + _SPARE_BYTES:
            raise DatasetError(
                f"the dataset cache {folder} needs {need / 1e9:.2f} GB for the {split} split "
                f"of {h5}, but its disk has {free / 1e9:.2f} GB free",
                hint="free space, or set SENTITOP_CACHE_DIR / train.data_cache to a larger disk",
            )
        ids = int(fh.attrs["vocab_size"]) + 2 if "vocab_size" in fh.attrs else None
        for name in ARRAYS:
            final = _file(folder, split, key, name)
            tmp = folder / f".{final.name}.{os.getpid()}.tmp"
            try:
                top = _write_npy(group[name], tmp)
                if name == "tokens" and ids is not None and top is not None and top[0] >= ids:
                    raise DatasetError(
                        f"{h5}: /{split}/tokens row {top[1]:,} holds token id {top[0]:,}, but "
                        f"its vocabulary has {ids:,} ids (0..{ids - 1:,}): a damaged file?",
                        hint="re-run preprocessing (or synth --dataset) into an empty folder",
                    )
                os.replace(tmp, final)
            except OSError as exc:
                tmp.unlink(missing_ok=True)
                raise DatasetError(
                    f"writing the dataset cache {final} failed: {exc}",
                    hint="free space, or set SENTITOP_CACHE_DIR / train.data_cache to another disk",
                ) from None
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise


def _write_npy(dset: h5py.Dataset, path: Path) -> tuple[int, int] | None:
    """``dset`` as an .npy file, read in chunk-aligned blocks into one reused buffer; returns
    its largest value and the first row holding it (None when empty): a token id past the
    vocabulary would fail a rank's embedding lookup hours into an epoch."""
    shape, dtype = tuple(dset.shape), np.dtype(dset.dtype)
    row_bytes = max(1, int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize)
    chunk = dset.chunks[0] if dset.chunks else 1
    rows = max(chunk, (_BLOCK_BYTES // row_bytes) // chunk * chunk)
    buf = np.empty((min(rows, max(1, shape[0])), *shape[1:]), dtype=dtype)
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    top: tuple[int, int] | None = None
    with open(path, "wb") as out:
        np.lib.format.write_array_header_2_0(out, header)
        for lo in range(0, shape[0], rows):
            hi = min(shape[0], lo + rows)
            dset.read_direct(buf, np.s_[lo:hi], np.s_[0 : hi - lo])
            block = buf[: hi - lo]
            out.write(block.data.cast("B"))
            if block.size and (top is None or block.max() > top[0]):
                where = int(np.argmax(block.reshape(block.shape[0], -1).max(axis=1)))
                top = (int(block[where].max()), lo + where)
        out.flush()
        os.fsync(out.fileno())
    return top


class SplitStore:
    """A split's memory-mapped arrays (first ``limit`` rows) and read-ahead hints for them."""

    def __init__(self, folder: Path, split: str, key: str, limit: int | None = None) -> None:
        self.paths = {name: _file(folder, split, key, name) for name in ARRAYS}
        self.limit = limit
        self._open()

    def _open(self) -> None:
        maps = {name: np.load(path, mmap_mode="r") for name, path in self.paths.items()}
        n = len(maps["labels"]) if self.limit is None else min(len(maps["labels"]), self.limit)
        # plain ndarray views of the mappings: np.memmap's subclass overhead on every take
        self.tokens: np.ndarray = maps["tokens"][:n].view(np.ndarray)
        self.labels: np.ndarray = maps["labels"][:n].view(np.ndarray)
        self.lengths: np.ndarray = maps["lengths"][:n].view(np.ndarray)
        self._token_offset = int(maps["tokens"].offset)
        self.row_bytes = int(self.tokens.strides[0]) if self.tokens.ndim == 2 else 0
        self._fd = os.open(self.paths["tokens"], os.O_RDONLY)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def nbytes(self) -> int:
        """Bytes of the rows in use (tokens + labels + lengths)."""
        return int(self.tokens.nbytes + self.labels.nbytes + self.lengths.nbytes)

    def padded_lengths(self, ids: np.ndarray) -> np.ndarray:
        """The widths rows ``ids`` take in a batch: their lengths, at most the row width."""
        width = self.tokens.shape[1] if self.tokens.ndim == 2 else 1
        widths: np.ndarray = np.minimum(np.take(self.lengths, ids), width)
        return widths

    def prefetch(self, ranges: list[tuple[int, int]]) -> None:
        """Ask the kernel to read the token rows [lo, hi) of each range ahead (asynchronous)."""
        for lo, hi in ranges:
            if hi > lo:
                offset = self._token_offset + lo * self.row_bytes
                os.posix_fadvise(
                    self._fd, offset, (hi - lo) * self.row_bytes, os.POSIX_FADV_WILLNEED
                )

    def evict(self) -> None:
        """Drop this split's pages from the page cache (cold-cache benchmarks; clean pages only)."""
        for path in self.paths.values():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)

    def close(self) -> None:
        """Close the read-ahead descriptor (the mappings go with the arrays)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __getstate__(self) -> dict[str, Any]:  # loader workers reopen; never pickle the rows
        return {"paths": self.paths, "limit": self.limit}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.paths, self.limit = state["paths"], state["limit"]
        self._open()


def open_split(
    h5: Path, split: str, *, limit: int | None = None, cache: str | Path | None = None
) -> tuple[SplitStore, CopyInfo]:
    """Memory-map ``split`` of ``h5`` from the node's copy (made first if needed)."""
    info = ensure_copy(h5, split, cache)
    _, key = _source_key(h5)
    return SplitStore(info.folder, split, key, limit), info

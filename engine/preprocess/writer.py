"""Output files: HDF5 parts written by reducers, the combine step, and atomic JSON writes."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from engine.preprocess.h5_write import written_h5
from engine.preprocess.reduce import (
    PAD_ID,
    UNK_ID,
    ReducedPart,
    encode_texts,
    token_dtype,
    word_index,
)

if TYPE_CHECKING:
    from engine.preprocess.job import JobSettings

FORMAT_VERSION = 1
"""Version of the dataset.h5 / vocab.json layout."""
SPLITS = ("train", "test")
CHUNK_BYTES = 1 << 20
"""Target size of one tokens chunk (a block of whole rows)."""


PartArrays = Mapping[str, Mapping[str, np.ndarray]]
"""split → "tokens", "labels", "lengths" → array: one encoded part held in memory."""
Part = str | Path | PartArrays | Callable[[], "str | Path | PartArrays"]
"""A part for combine_parts: an HDF5 part file, arrays, or a callable returning either when the
part's rows are first needed."""


@dataclass(frozen=True, slots=True)
class DatasetTarget:
    """Where a runner may write dataset.h5 itself (combining its parts as they come in)."""

    path: str
    attrs: Callable[[list[str]], dict[str, Any]]
    """The file's attributes for a vocabulary."""


def encode_arrays(
    part: ReducedPart,
    index: dict[bytes, int],
    stop: frozenset[bytes],
    seq_len: int,
    dtype: Any,
) -> dict[str, dict[str, np.ndarray]]:
    """The arrays of a reduced part (write_part's content), per split."""
    out = {}
    lut = local_lut(part.words, index, dtype) if part.local_tokens is not None else None
    for split, flag in (("train", 0), ("test", 1)):
        rows = [r for r in part.rows if r[3] == flag]
        if lut is not None and part.local_tokens is not None and part.lengths is not None:
            mask = np.fromiter((r[3] == flag for r in part.rows), bool, len(part.rows))
            tokens = _translate_rows(part.local_tokens, np.flatnonzero(mask), lut)
            lengths = part.lengths[mask]
        else:
            tokens, lengths = encode_texts([r[1] for r in rows], index, stop, seq_len, dtype)
        labels = np.fromiter((r[2] for r in rows), dtype=np.uint8, count=len(rows))
        out[split] = {"tokens": tokens, "labels": labels, "lengths": lengths}
    return out


def write_part(
    path: str | Path,
    part: ReducedPart,
    index: dict[bytes, int],
    stop: frozenset[bytes],
    seq_len: int,
    dtype: Any,
) -> dict[str, int]:
    """Encode a reduced part and write it as an HDF5 part file; returns rows per split."""
    sizes: dict[str, int] = {}
    with written_h5(path) as h5:
        _write_part_splits(h5, encode_arrays(part, index, stop, seq_len, dtype), sizes)
    return sizes


def _write_part_splits(h5: Any, splits: dict[str, Any], sizes: dict[str, int]) -> None:
    for split, arrays in splits.items():
        group = h5.create_group(split)
        for name in ("tokens", "labels", "lengths"):
            group[name] = arrays[name]
        sizes[split] = len(arrays["labels"])


TRANSLATE_ROWS = 16_384
"""Rows translated from local to global ids at a time (bounds the temporaries)."""


def _translate_rows(local: np.ndarray, rows: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """``lut[local[rows] + 1]`` (local id -1 = padding → lut[0]) in blocks of rows, so the only
    array of the output's size is the output (at 256 tokens a whole-matrix ``take`` made two
    more temporaries of ≈ 140 MB per worker for 1 GB of input)."""
    out = np.empty((len(rows), local.shape[1]), dtype=lut.dtype)
    for lo in range(0, len(rows), TRANSLATE_ROWS):
        block = local[rows[lo : lo + TRANSLATE_ROWS]]
        block += 1
        out[lo : lo + len(block)] = lut.take(block)
    return out


def local_lut(words: list[bytes], index: dict[bytes, int], dtype: Any) -> np.ndarray:
    """Global id of part-local id i at lut[i + 1]; lut[0] = padding (local id -1)."""
    lut = np.empty(len(words) + 1, dtype=dtype)
    lut[0] = PAD_ID
    lut[1:] = np.fromiter(map(index.get, words, repeat(UNK_ID)), dtype, len(words))
    return lut


class PartWriter:
    """An HDF5 part file (write_part's layout) appended to block by block; ``h5`` is the file
    open for writing (h5_write.written_h5, which closes it)."""

    def __init__(self, h5: Any, seq_len: int, dtype: Any) -> None:
        self.h5 = h5
        rows = _chunk_rows(seq_len, np.dtype(dtype).itemsize)
        for split in SPLITS:
            group = self.h5.create_group(split)
            group.create_dataset(
                "tokens", (0, seq_len), dtype, maxshape=(None, seq_len), chunks=(rows, seq_len)
            )
            for name, kind in (("labels", np.uint8), ("lengths", np.int32)):
                group.create_dataset(name, (0,), kind, maxshape=(None,), chunks=(1 << 16,))

    def append(
        self, split: str, tokens: np.ndarray, labels: np.ndarray, lengths: np.ndarray
    ) -> None:
        """Add rows at the end of a split."""
        group = self.h5[split]
        at, n = group["labels"].shape[0], len(labels)
        for name, values in (("tokens", tokens), ("labels", labels), ("lengths", lengths)):
            group[name].resize(at + n, axis=0)
            group[name][at : at + n] = values


def _chunk_rows(seq_len: int, itemsize: int) -> int:
    return max(1, CHUNK_BYTES // (seq_len * itemsize))


def create_split(group: Any, n: int, seq_len: int, dtype: Any) -> None:
    """The empty tokens/labels/lengths datasets of one split (n rows) in the dataset.h5 layout:
    row-block chunks of about CHUNK_BYTES for tokens, 65,536 rows for the vectors."""
    chunk = max(1, min(_chunk_rows(seq_len, np.dtype(dtype).itemsize), n))
    group.create_dataset(
        "tokens", shape=(n, seq_len), maxshape=(None, seq_len), dtype=dtype, chunks=(chunk, seq_len)
    )
    for name, kind in (("labels", np.uint8), ("lengths", np.int32)):
        vec_chunk = max(1, min(n, 1 << 16))
        group.create_dataset(name, shape=(n,), maxshape=(None,), dtype=kind, chunks=(vec_chunk,))
    group.attrs["rows"] = n


def combine_parts(
    parts: Sequence[Part],
    out_path: str | Path,
    seq_len: int,
    dtype: Any,
    attrs: dict[str, Any],
    totals: Mapping[str, int] | None = None,
) -> None:
    """Concatenate parts (in the given order) into one chunked dataset file. With `totals`
    (rows per split of all parts), a part given as a callable is asked for only when its first
    rows are due: the rows before it are written meanwhile."""
    got: dict[int, str | Path | PartArrays] = {}

    def part(i: int) -> str | Path | PartArrays:
        if i not in got:
            p = parts[i]
            got[i] = p() if callable(p) else p
        return got[i]

    if totals is None:
        totals = dict.fromkeys(SPLITS, 0)
        for i in range(len(parts)):
            with _opened(part(i)) as src:
                for split in SPLITS:
                    totals[split] += src[split]["labels"].shape[0]
    sources = [partial(part, i) for i in range(len(parts))]
    with written_h5(out_path) as out:  # the groups live in _write_splits' frame: see written_h5
        _write_splits(out, attrs, totals, seq_len, dtype, sources)


def _write_splits(
    out: Any,
    attrs: dict[str, Any],
    totals: Mapping[str, int],
    seq_len: int,
    dtype: Any,
    sources: Sequence[Callable[[], str | Path | PartArrays]],
) -> None:
    for key, value in attrs.items():
        out.attrs[key] = value
    for split in SPLITS:
        group = out.create_group(split)
        create_split(group, totals[split], seq_len, dtype)
        for name in ("tokens", "labels", "lengths"):
            _copy_rows(group[name], sources, split, name)


@contextlib.contextmanager
def _opened(part: str | Path | PartArrays) -> Iterator[Any]:
    """A part's splits: its arrays, or its HDF5 part file open for reading."""
    if isinstance(part, Mapping):
        yield part
    else:
        with h5py.File(part, "r") as h5:
            yield h5


COPY_BYTES = 8 << 20
"""Bytes per write when combining parts (whole chunks, so the file's layout does not depend on
where the parts' boundaries fall: the same rows give the same bytes)."""


def _copy_rows(
    dst: Any, parts: Sequence[Callable[[], str | Path | PartArrays]], split: str, name: str
) -> None:
    """Concatenate /split/name of the parts into dst, written in whole-chunk blocks."""
    if not dst.shape[0]:
        return
    chunk = dst.chunks[0]
    row_bytes = dst.dtype.itemsize * int(np.prod(dst.shape[1:], dtype=np.int64))
    step = chunk * max(1, COPY_BYTES // (chunk * row_bytes))
    buf = np.empty((step, *dst.shape[1:]), dtype=dst.dtype)
    fill = at = 0
    for part in parts:
        with _opened(part()) as h5:
            src = h5[split][name]
            n, i = src.shape[0], 0
            while i < n:
                k = min(n - i, step - fill)
                if isinstance(src, np.ndarray):
                    buf[fill : fill + k] = src[i : i + k]
                else:
                    src.read_direct(buf, np.s_[i : i + k], np.s_[fill : fill + k])
                fill, i = fill + k, i + k
                if fill == step:
                    dst[at : at + step] = buf
                    at, fill = at + step, 0
    if fill:
        dst[at : at + fill] = buf[:fill]


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write JSON to a temporary file in the same folder, fsync, then rename over `path`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def publish_dataset(
    tmp_h5: str | Path, final_h5: str | Path, beside: Mapping[Path, Any] | None = None
) -> None:
    """The last step of a run: write the JSON files `beside` (path → content, each atomically)
    while another thread fsyncs the finished dataset file, then rename the dataset into place
    (it appears last, so a dataset never sits next to older JSON files)."""
    failed: list[BaseException] = []

    def sync() -> None:
        try:
            with open(tmp_h5, "rb+") as fh:
                os.fsync(fh.fileno())
        except BaseException as exc:  # raised again below, in the caller's thread
            failed.append(exc)

    syncing = threading.Thread(target=sync, name="fsync-dataset")
    syncing.start()
    try:
        for path, data in (beside or {}).items():
            write_json_atomic(path, data)
    finally:
        syncing.join()
    if failed:
        raise failed[0]
    os.replace(tmp_h5, final_h5)


def encode_part(part: ReducedPart, vocab: list[str], job: JobSettings, p: int) -> str:
    """Encode reduce partition ``p`` with the vocabulary and write it as job.tmp's part-NNNNN.h5;
    returns its path."""
    path = os.path.join(job.tmp, f"part-{p:05d}.h5")
    write_part(path, part, word_index(vocab), job.stop, job.seq_len, token_dtype(len(vocab) + 2))
    return path

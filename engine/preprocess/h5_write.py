"""HDF5 files written so that a full disk ends in a clear error, never in a crashed interpreter."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py

UNCLOSED: list[str] = []
"""Files whose close failed (a full disk, a file-size limit): HDF5 keeps them open and flushes
them again when the interpreter exits, which fails the same way and crashes it (exit 139)."""


@contextlib.contextmanager
def written_h5(path: str | Path) -> Iterator[Any]:
    """``path`` open for writing as an h5py File, closed at the end. When the body fails, its
    frames' datasets are released while the file is still whole and the file is closed without
    its flush error replacing the body's (h5py's close fails on the same full disk; its
    RuntimeError hid the clear error before). A close that fails after a good body becomes an
    OSError with the errno HDF5 names (ENOSPC, ...). The caller removes the file. The file has
    no chunk cache, so no dirty chunk is left to flush when a dataset is released after a
    failure (writes are whole chunks or large appended blocks: the cache saved nothing)."""
    out = h5py.File(path, "w", rdcc_nbytes=0)
    try:
        yield out
    except BaseException as exc:
        hook, sys.unraisablehook = sys.unraisablehook, _quiet  # datasets' flush errors on release
        try:
            traceback.clear_frames(exc.__traceback__)  # datasets released before the file goes
            try:
                out.close()
            except Exception:  # the body's error is the one to report
                UNCLOSED.append(str(path))
        finally:
            sys.unraisablehook = hook
        raise
    try:
        out.close()
    except (RuntimeError, OSError) as exc:
        UNCLOSED.append(str(path))
        code = _errno_in(str(exc))
        raise OSError(code, f"{os.strerror(code)} (closing {path})") from None


def _quiet(_unraisable: Any) -> None:
    """An unraisable-exception hook that says nothing (h5py's dealloc of a dataset whose
    flush fails on the full disk the body's own error already names)."""


def _errno_in(message: str) -> int:
    """The errno an HDF5 write error names ("errno = 28"), EIO when it names none."""
    found = re.search(r"errno = (\d+)", message)
    return int(found.group(1)) if found else errno.EIO


def exit_if_unclosed(code: int) -> None:
    """End the process at once with ``code`` (its output flushed) when an HDF5 file could not
    be closed: the library's exit handler would try again and crash (the CLI's last step)."""
    if UNCLOSED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

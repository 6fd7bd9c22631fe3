"""One writer per run folder: `train` and `embed` hold a lock on theirs while they run."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from engine.errors import InputError

LOCK_FILE = ".writer.lock"
"""In the run folder; locked (flock) while a command writes the folder, and naming it."""


@contextlib.contextmanager
def run_folder_lock(folder: str | Path, command: str) -> Iterator[None]:
    """Hold ``folder``'s writer lock (the folder must exist); InputError (exit 2) naming the
    command that holds it. Two runs into one folder both ended "ok" and left one run's model
    beside the other's vocabulary. The kernel drops the lock when the process ends, however."""
    path = Path(folder) / LOCK_FILE
    try:
        fh = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held until the with ends)
    except OSError as exc:
        raise InputError(
            f"{folder}: cannot create its lock file {LOCK_FILE} ({exc.strerror or exc})",
            hint="choose a folder you can write to",
        ) from None
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            raise _in_use(folder, fh.read()) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"sentitop {command} (pid {os.getpid()})\n")
        fh.flush()
        yield
    finally:
        fh.close()  # releases the lock


def check_not_in_use(folder: str | Path) -> None:
    """InputError (exit 2) when another command holds ``folder``'s writer lock now (checked
    before anything else about the folder: "holds no checkpoint" was said of a folder whose
    run had not written its first one yet). Takes no lock of its own."""
    try:
        fh = open(Path(folder) / LOCK_FILE, encoding="utf-8")  # noqa: SIM115
    except OSError:
        return  # no lock file: no run has written it
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _in_use(folder, fh.read()) from None


def _in_use(folder: str | Path, holder: str) -> InputError:
    return InputError(
        f"{folder} is in use: {holder.strip() or 'another sentitop command'} is writing to it",
        hint="wait until it ends, or give this run another folder",
    )

"""The output folder, built beside itself and swapped in whole: a complete set or nothing, ever.

A run writes dataset.h5, vocab.json and stats.json into a hidden stage folder next to the
output (``.NAME.preprocess-new-PID``, same filesystem), then exchanges the two folders in one
``renameat2(RENAME_EXCHANGE)`` call (Linux), else with two renames (the previous set waits as
``.NAME.preprocess-old-PID`` in between, and the next run puts it back if the swap was cut
there). An interrupted or failed run leaves the previous complete output as it was, or no
output folder when there was none. Since the folder is replaced as a whole, an existing output
folder may hold only a dataset's files; anything else in it is refused before any work.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import stat
from pathlib import Path

from engine.errors import InputError, StorageError
from engine.procstats import process_alive

OUTPUT_FILES = frozenset({"dataset.h5", "vocab.json", "stats.json"})
"""What a finished output folder holds."""
_OURS_HIDDEN = (".preprocess-tmp-", ".vocab.json.tmp-", ".stats.json.tmp-", ".synth-tmp-")
"""Leftovers of older versions' runs inside the output folder (replaced with it)."""
_NEW, _OLD = "new", "old"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _stage_name(out: Path, kind: str, pid: int) -> Path:
    return out.parent / f".{out.name}.preprocess-{kind}-{pid}"


def output_of(path: str | Path) -> str:
    """The output folder a path inside a stage folder is being written for (errors name it, not
    the hidden stage); any other path itself."""
    parts = Path(path).parts
    for i, part in enumerate(parts):
        name, sep, rest = part.partition(f".preprocess-{_NEW}-")
        if part.startswith(".") and sep and rest.isdigit():
            return str(Path(*parts[:i], name[1:]))
    return str(path)


def _clear_stale(out: Path) -> None:
    """Remove the stage folders of dead runs beside ``out``; a previous output left aside by a
    swap cut between its two renames is put back first."""
    prefix = f".{out.name}.preprocess-"
    for entry in sorted(out.parent.iterdir()):
        kind, _, pid = entry.name.removeprefix(prefix).partition("-")
        if not entry.name.startswith(prefix) or kind not in (_NEW, _OLD) or not pid.isdigit():
            continue
        if process_alive(int(pid)):
            continue
        if kind == _OLD and not out.exists():
            os.rename(entry, out)
        else:
            shutil.rmtree(entry, ignore_errors=True)


def foreign_entries(out: Path) -> list[str]:
    """Names in the folder ``out`` that no preprocessing run wrote."""
    return sorted(
        p.name
        for p in out.iterdir()
        if p.name not in OUTPUT_FILES and not p.name.startswith(_OURS_HIDDEN)
    )


def _check_replaceable(out: Path, flag: str) -> None:
    if out.exists() and not out.is_dir():  # it read "cannot write to the scratch folder"
        raise InputError(
            f"{flag} {out} is a file, not a folder",
            hint="name a folder for dataset.h5, vocab.json and stats.json (it is created when "
            "missing)",
        )
    if out.is_dir() and os.path.ismount(out):  # a mount point cannot be renamed
        raise InputError(
            f"{flag} {out} is a mount point; the folder is replaced as a whole",
            hint=f"name a folder inside it, e.g. {out / 'dataset'}",
        )
    if out.is_dir() and not out.stat().st_mode & stat.S_IWUSR:  # the new set takes its mode
        raise InputError(
            f"{flag} {out} is read-only (mode {stat.filemode(out.stat().st_mode)}): its "
            "dataset is kept as it is",
            hint=f"to replace it: chmod u+w {out}; or name another {flag}",
        )
    foreign = foreign_entries(out) if out.is_dir() else []
    if foreign:
        more = f" (+{len(foreign) - 3} more)" if len(foreign) > 3 else ""
        shown = ", ".join(foreign[:3]) + more
        raise InputError(
            f"{flag} {out} holds files that are not a dataset's ({shown}); the folder is "
            "replaced as a whole",
            hint="name a new or empty folder, or one that holds only dataset.h5, vocab.json and "
            "stats.json",
        )


def make_stage(out: Path, flag: str = "--output") -> Path:
    """A fresh, empty stage folder beside ``out`` for the new set (InputError naming ``flag``
    when ``out`` is a file or holds other files, or its parent cannot be written)."""
    _check_replaceable(out, flag)
    stage = _stage_name(out, _NEW, os.getpid())
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        _clear_stale(out)
        _check_replaceable(out, flag)  # a set put back by _clear_stale is replaceable too
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir()
        if out.is_dir():  # the new folder keeps the old one's permissions
            os.chmod(stage, out.stat().st_mode & 0o7777)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StorageError(f"no space left on the device of {out.parent}") from exc
        blocker = next((p for p in out.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:  # mkdir says only "File exists" or "Not a directory"
            raise InputError(
                f"{flag} {out}: cannot write the folder, {blocker} is a file, not a folder",
                hint=f"pick a {flag} inside a folder",
            ) from exc
        raise InputError(
            f"{flag} {out}: cannot write the folder: {exc.strerror or type(exc).__name__}",
            hint="its parent folder must be a writable folder",
        ) from exc
    return stage


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one system call (Linux renameat2); False where that is unavailable."""
    name = ctypes.util.find_library("c")
    try:
        renameat2 = ctypes.CDLL(name, use_errno=True).renameat2
    except (OSError, AttributeError, TypeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    if renameat2(_AT_FDCWD, bytes(a), _AT_FDCWD, bytes(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):  # the filesystem cannot
        return False
    raise OSError(code, os.strerror(code), str(b))


def swap_in(stage: Path, out: Path, flag: str = "--output") -> None:
    """Make the finished ``stage`` folder the output; the previous output (if any) ends up at
    ``stage``'s path for the caller to remove (or is removed here on the two-rename path)."""
    _check_replaceable(out, flag)  # nothing of someone else's is swapped away, even now
    if not out.exists():
        os.rename(stage, out)
    elif not _exchange(stage, out):
        old = _stage_name(out, _OLD, os.getpid())
        os.rename(out, old)
        os.rename(stage, out)
        shutil.rmtree(old, ignore_errors=True)
    fd = os.open(out.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the renames reach the disk with the files they name
    finally:
        os.close(fd)

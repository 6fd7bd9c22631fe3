"""Input folders: a folder given as an input stands for its review files (preprocess and embed)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import InputError

SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson", ".ndjson.gz")
"""File names a folder contributes; its other files are skipped with a warning naming them."""
SHOWN = 3
"""File names a warning or error lists before '(+N more)'."""


@dataclass(slots=True)
class InputFiles:
    """The files of some input paths, and what the folders among them left out."""

    files: list[str] = field(default_factory=list)
    """Every file, in the order given; a folder's review files sorted by name."""
    folders: dict[str, int] = field(default_factory=dict)
    """Folder as given → review files taken from it."""
    warnings: list[dict[str, str]] = field(default_factory=list)
    """``{code, message}`` per folder that held empty review files (``empty_input_file``) or
    files of another type (``unknown_input_file``), and per file given more than once
    (``repeated_input_file``: read once)."""


def _names(paths: Sequence[Path]) -> str:
    shown = ", ".join(p.name for p in paths[:SHOWN])
    return shown + (f" (+{len(paths) - SHOWN} more)" if len(paths) > SHOWN else "")


def expand_folders(paths: Sequence[str]) -> InputFiles:
    """The files of ``paths``: a file (or s3:// URL) stands for itself, unchecked; a folder for
    its non-empty review files (names ending in SUFFIXES, sorted, not recursing). Empty review
    files and other files in a folder are skipped with a warning naming them (hidden files and
    subfolders silently); InputError names a folder that cannot be listed or that holds no
    non-empty review file. A file met again (named twice, or also through its folder) is read
    once, where first met, with a warning: every runner counts its lines once."""
    result = InputFiles()
    for raw in paths:
        folder = Path(raw)
        if raw.startswith("s3://") or not folder.is_dir():
            result.files.append(raw)
            continue
        try:
            entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
            entries = [p for p in entries if p.is_file()]
            reviews = [p for p in entries if p.name.endswith(SUFFIXES)]
            empty = [p for p in reviews if os.path.getsize(p) == 0]
        except OSError as exc:
            raise InputError(
                f"cannot read folder {raw}: {exc.strerror or type(exc).__name__}"
            ) from None
        other = [p for p in entries if p not in reviews]
        taken = [p for p in reviews if p not in empty]
        if not taken:
            what = (
                f"only empty review files ({_names(empty)})"
                if empty
                else f"no review file ({', '.join(SUFFIXES)})"
            )
            raise InputError(
                f"{raw}: folder holds {what}",
                hint="pass JSON-lines review files, or a folder holding them, to --input",
            )
        if empty:
            result.warnings.append(
                {
                    "code": "empty_input_file",
                    "message": f"{raw}: skipped {len(empty)} empty review file(s): {_names(empty)}",
                }
            )
        if other:
            result.warnings.append(
                {
                    "code": "unknown_input_file",
                    "message": f"{raw}: skipped {len(other)} file(s) that are not review files "
                    f"({', '.join(SUFFIXES)}): {_names(other)}",
                }
            )
        result.files += [str(p) for p in taken]
        result.folders[raw] = len(taken)
    return _read_once(result)


def _read_once(found: InputFiles) -> InputFiles:
    """Drop the files already met earlier in ``found.files`` (the same file by its real path,
    an s3:// URL by its text), warning about them."""
    seen: dict[str, str] = {}
    files, repeated = [], []
    for path in found.files:
        key = path if path.startswith("s3://") else os.path.realpath(path)
        if key in seen:
            repeated.append(path if path == seen[key] else f"{path} (= {seen[key]})")
            continue
        seen[key] = path
        files.append(path)
    if repeated:
        more = f" (+{len(repeated) - SHOWN} more)" if len(repeated) > SHOWN else ""
        found.warnings.append(
            {
                "code": "repeated_input_file",
                "message": f"{len(repeated)} input file(s) given more than once, read once: "
                + ", ".join(repeated[:SHOWN])
                + more,
            }
        )
    found.files = files
    return found

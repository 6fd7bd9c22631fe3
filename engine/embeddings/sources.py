"""The texts of an embeddings corpus: several review files or folders, ratings not needed.

Each file's layout is detected as preprocessing detects it (McAuley 2014/2018, IMDB, Fine
Food ``Text``, Alexa ``verified_reviews``...), falling back to a text-only layout for files
without a rating; every text is cleaned by :func:`engine.preprocess.text.clean_text`, the
cleaning the classifier's vocabulary comes from, so ``init_embeddings`` aligns word by word.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from engine.errors import InputError
from engine.preprocess.inputs import expand_folders

TEXT_FIELDS = ("reviewText", "Text", "verified_reviews", "text", "review", "content", "body")
"""Text fields tried, in order, for records without a rating (text-only files)."""


def expand_inputs(paths: list[str], warnings: list[dict[str, str]] | None = None) -> list[str]:
    """Files of ``paths``: a file stands for itself, a folder for its non-empty review files
    (sorted by name; :func:`engine.preprocess.inputs.expand_folders`, whose warnings about the
    files a folder held but gave nothing go to ``warnings``); InputError naming a path that is
    missing or empty, or a folder without a non-empty review file."""
    found = expand_folders(paths)
    if warnings is not None:
        warnings += found.warnings
    for path in found.files:
        if not os.path.isfile(path):
            raise InputError(f"{path} not found", hint="pass a JSON-lines file to --input")
        if os.path.getsize(path) == 0:
            raise InputError(f"{path} is empty", hint="pass a JSON-lines review file to --input")
    return found.files


def _text_field(path: str) -> tuple[str, str]:
    """(record format, text field) of ``path``: preprocessing's detection, else the first of
    TEXT_FIELDS present in the first records (InputError when none is)."""
    from engine.config import PreprocessConfig
    from engine.preprocess.readers import detect_spec, gzip_errors, open_binary
    from engine.preprocess.records import RecordSpec, parse_object

    try:
        spec = detect_spec(path, PreprocessConfig(inputs=[path], output="-"))
        return spec.format, spec.text_field
    except InputError:
        pass
    seen: set[str] = set()
    with gzip_errors(path), open_binary(path) as stream:
        for n, raw in enumerate(stream):
            if n >= 50:
                break
            obj = parse_object(raw.rstrip(b"\r\n"), RecordSpec())
            if isinstance(obj, dict):
                seen |= set(obj)
                for name in TEXT_FIELDS:
                    if isinstance(obj.get(name), str):
                        return "mcauley", name
    raise InputError(
        f"{path}: no text field found (fields seen: {', '.join(sorted(seen)[:12]) or 'none'})",
        hint=f"records need one of {', '.join(TEXT_FIELDS)}",
    )


def _has_records(path: str, lines: int = 200) -> bool:
    """Whether any of the first ``lines`` lines of ``path`` is a JSON (or McAuley literal)
    object."""
    from engine.preprocess.readers import gzip_errors, open_binary
    from engine.preprocess.records import RecordSpec, parse_object

    with gzip_errors(path), open_binary(path) as stream:
        for n, raw in enumerate(stream):
            if n >= lines:
                break
            if isinstance(parse_object(raw.rstrip(b"\r\n"), RecordSpec()), dict):
                return True
    return False


@dataclass(slots=True)
class SourceStats:
    """Documents taken from one file and lines passed over."""

    path: str
    docs: int = 0
    skipped: int = 0
    duplicates: int = 0
    text_field: str = ""
    reasons: dict[str, int] = field(default_factory=dict)
    """Lines passed over by reason (keys of :data:`engine.preprocess.records.SKIP_REASONS`)."""
    first_lines: dict[str, int] = field(default_factory=dict)
    """The first line number passed over for each reason."""

    def skip(self, reason: str, line_no: int) -> None:
        """Count one line passed over."""
        self.skipped += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        self.first_lines.setdefault(reason, line_no)


def iter_file_texts(
    path: str, fmt: str, text_field: str, max_line_bytes: int = 1 << 20
) -> Iterator[bytes | str]:
    """Cleaned ``text_field`` (ASCII bytes, words separated by one space) of each line of one
    file, or why the line gives none (a key of :data:`engine.preprocess.records.SKIP_REASONS`:
    malformed_json, missing_text, empty_text...)."""
    from engine.preprocess.readers import MapTask, is_gzip, iter_task_blocks
    from engine.preprocess.records import RecordSpec, parse_object
    from engine.preprocess.text import clean_text

    spec = RecordSpec(format=fmt, text_field=text_field)
    task = MapTask(0, path, 0, os.path.getsize(path), is_gzip(path), 0)
    for lines, too_long in iter_task_blocks(task, max_line_bytes):
        long = set(too_long)
        for i, line in enumerate(lines):
            obj = parse_object(line, spec) if line.strip() else "empty_line"
            if i in long:
                yield "too_long"
            elif isinstance(obj, str):
                yield obj
            elif obj.get(text_field) is None:
                yield "missing_text"
            elif not isinstance(text := obj[text_field], str):
                yield "text_not_string"
            else:
                yield clean_text(text) or "empty_text"


@dataclass(slots=True)
class Sources:
    """Documents (word lists) of several inputs read in turn, with per-file counts."""

    paths: list[str]
    dedupe: bool = False
    stats: list[SourceStats] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    """``{code, message}`` of the files the folders held but gave nothing (empty, other type)."""

    def __iter__(self) -> Iterator[list[str]]:
        seen: set[bytes] = set()
        self.warnings.clear()
        for path in expand_inputs(self.paths, self.warnings):
            fmt, text_field = _text_field(path)
            stats = SourceStats(path, text_field=text_field)
            self.stats.append(stats)
            for line_no, cleaned in enumerate(iter_file_texts(path, fmt, text_field), 1):
                if isinstance(cleaned, str):
                    stats.skip(cleaned, line_no)
                    continue
                if self.dedupe:
                    digest = hashlib.blake2b(cleaned, digest_size=12).digest()
                    if digest in seen:
                        stats.duplicates += 1
                        continue
                    seen.add(digest)
                yield cleaned.decode().split()
                stats.docs += 1  # after the yield: a consumer that stops early did not take it
            if stats.docs + stats.duplicates == 0:
                if not _has_records(path):  # it named a `reviewText` field no line has
                    raise InputError(
                        f"{path}: no usable review: none of its first lines is a JSON record "
                        f"({stats.skipped} line(s) passed over); not a JSON-lines file?",
                        hint="pass JSON-lines review files (one JSON object a line) to --input",
                    )
                raise InputError(
                    f"{path}: no usable review: no record with any word in its "
                    f"`{stats.text_field}` field ({stats.skipped} line(s) passed over)",
                    hint="pass review files with a text field to --input",
                )


def skipped_warning(stats: list[SourceStats]) -> dict[str, str] | None:
    """The `skipped_share` warning (``{code, message}``) of preprocessing when more than its
    ``max_skipped_share`` of the lines read were passed over: the files that lost the most, the
    three commonest reasons (what each means, where it first occurs); else None."""
    from dataclasses import fields

    from engine.config import PreprocessConfig
    from engine.preprocess.records import SKIP_REASONS

    limit = next(f.default for f in fields(PreprocessConfig) if f.name == "max_skipped_share")
    assert isinstance(limit, float)
    skipped = sum(s.skipped for s in stats)
    read = skipped + sum(s.docs + s.duplicates for s in stats)
    if not read or skipped / read <= limit:
        return None
    worst = sorted((s for s in stats if s.skipped), key=lambda s: -s.skipped)
    files = ", ".join(s.path for s in worst[:3]) + (
        f" (+{len(worst) - 3} more)" if len(worst) > 3 else ""
    )
    totals: dict[str, int] = {}
    for s in stats:
        for reason, n in s.reasons.items():
            totals[reason] = totals.get(reason, 0) + n
    parts = []
    for reason, n in sorted(totals.items(), key=lambda item: -item[1])[:3]:
        first = next(s for s in stats if reason in s.reasons)
        read_as = {s.text_field for s in stats if reason in s.reasons}
        why = SKIP_REASONS.get(reason, reason)
        if reason in ("missing_text", "text_not_string") and len(read_as) == 1:
            why = why.replace("text field", f"text field `{first.text_field}`")
        parts.append(f"{n:,} {reason} ({why}, e.g. {first.path}:{first.first_lines[reason]})")
    return {
        "code": "skipped_share",
        "message": f"{files}: skipped {skipped / read:.0%} of {read:,} lines (more than "
        f"{limit:.0%}): " + "; ".join(parts),
    }

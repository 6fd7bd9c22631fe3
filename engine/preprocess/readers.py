"""Input files: open plain or gzip, split into line-aligned tasks, read in large blocks,
detect the record format, and iterate parsed records (for eval/predict on new raw files)."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import IO, TYPE_CHECKING, Any, BinaryIO, cast

from engine.errors import InputError
from engine.preprocess.records import Record, RecordSpec, parse_line, parse_object

if TYPE_CHECKING:
    from engine.config import PreprocessConfig

BLOCK_BYTES = 8 << 20
"""Bytes read per block (blocks are split on newlines)."""
GZIP_MAGIC = b"\x1f\x8b"
MIN_SPLIT_BYTES = 4 << 20
"""Plain files are split into ranges of at least this many bytes."""
MAX_SPLIT_BYTES = 32 << 20
"""... and at most this many (progress is reported per range)."""


def label_spec(text_field: str, label_field: str, fmt: str = "jsonl") -> RecordSpec:
    """How to read records whose ``label_field`` holds a 0/1 label (0 negative, 1 positive)."""
    return RecordSpec(format=fmt, text_field=text_field, rating_field=label_field,
                      rating_min=0, rating_max=1, negative_max=0)  # fmt: skip


NOT_LABEL_SHARE = 0.2
"""A label field whose value is not 0 or 1 on more than this share of the lines read is not a
0/1 label (a star rating read as one took 1★ reviews for positives): an error (exit 2). Below
it, such lines are skipped and counted, as any bad line."""
NOT_LABEL_REASONS = ("bad_rating", "rating_out_of_range")
"""The skip reasons of a label field whose value is not 0 or 1."""


def is_label_spec(spec: RecordSpec) -> bool:
    """Whether ``spec`` reads a 0/1 label (label_spec) rather than a star rating."""
    return (spec.rating_min, spec.rating_max, spec.negative_max) == (0, 1, 0)


def check_label_values(
    paths: Sequence[str],
    spec: RecordSpec,
    skipped: Mapping[str, int],
    lines: int,
    max_line_bytes: int = 1 << 20,
) -> None:
    """Raise InputError when ``spec`` reads a 0/1 label whose field held another value on more
    than NOT_LABEL_SHARE of the ``lines`` read from ``paths`` (``skipped``: their skip counts),
    naming the first such line of the local files and its value."""
    count = sum(int(skipped.get(reason, 0)) for reason in NOT_LABEL_REASONS)
    if not is_label_spec(spec) or not lines or count / lines <= NOT_LABEL_SHARE:
        return
    field = spec.rating_field
    first = _first_not_label(paths, spec, max_line_bytes)
    value: Any = None if first is None else first[1]
    example = "" if first is None else f" (e.g. {first[0]} value {_shown(value)})"
    rating = _is_number(value)
    raise InputError(
        f"field `{field}` holds values other than 0/1 on {count:,} of {lines:,} lines"
        f"{example}: "
        + ("it looks like a rating, not a 0/1 label" if rating else "it is not a 0/1 label"),
        hint=(
            f"use --rating-field {field} to read it as a star rating"
            if rating
            else "map its values to 0 (negative) and 1 (positive)"
        )
        + ", or name the files' 0/1 field with --label-field",
    )


def _first_not_label(
    paths: Sequence[str], spec: RecordSpec, max_line_bytes: int
) -> tuple[str, Any] | None:
    """("FILE:LINE", value) of the first line of the local ``paths`` whose label field holds
    neither 0 nor 1 (None when there is none, or the files are not local)."""
    for path in paths:
        if not os.path.isfile(path):
            continue
        task = MapTask(0, path, 0, os.path.getsize(path), is_gzip(path), 0)
        number = 0
        for lines, too_long in iter_task_blocks(task, max_line_bytes):
            long_lines = set(too_long)
            for i, line in enumerate(lines):
                number += 1
                if (
                    i in long_lines
                    or parse_line(line, spec, max_line_bytes) not in NOT_LABEL_REASONS
                ):
                    continue
                obj = parse_object(line, spec)
                value = obj.get(spec.rating_field) if isinstance(obj, dict) else None
                return f"{path}:{number}", value
    return None


def _shown(value: Any, width: int = 40) -> str:
    """A field's value as JSON writes it, cut to ``width`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _is_number(value: Any) -> bool:
    """Whether a field's value is a number, or a string holding one (a rating's look)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    try:
        float(str(value).strip())
    except ValueError:
        return False
    return True


KNOWN_LAYOUTS: list[tuple[frozenset[str], RecordSpec]] = [
    (frozenset({"reviewText", "overall"}), RecordSpec()),
    (
        frozenset({"Text", "Score"}),
        RecordSpec(format="jsonl", text_field="Text", rating_field="Score"),
    ),
    (
        frozenset({"verified_reviews", "rating"}),
        RecordSpec(format="jsonl", text_field="verified_reviews", rating_field="rating"),
    ),
    # IMDB (Maas et al. 2011): ratings 1-10; 1-4 negative, 7-10 positive (5-6 are not in the set).
    (
        frozenset({"text", "rating", "label"}),
        RecordSpec(
            format="jsonl", text_field="text", rating_field="rating", rating_max=10, negative_max=4
        ),
    ),
    (
        frozenset({"text", "rating"}),
        RecordSpec(format="jsonl", text_field="text", rating_field="rating"),
    ),
    # binary sentiment sets (SST-2, Yelp polarity, exported Hugging Face datasets): 0/1 labels
    (frozenset({"text", "label"}), label_spec("text", "label")),
]
"""Field layouts recognised by format=auto, first match wins (McAuley 2014/2018, Fine Food,
Alexa, IMDB, generic text/rating)."""

SUMMARY_FIELDS = {"reviewText": "summary", "Text": "Summary"}


@dataclass(frozen=True, slots=True)
class MapTask:
    """A line-aligned byte range of one input file (a whole file when gzip)."""

    file_index: int
    path: str
    start: int
    end: int
    gzip: bool
    split_no: int

    @property
    def nbytes(self) -> int:
        """Input bytes this task covers (compressed size for gzip)."""
        return self.end - self.start


def check_inputs(paths: list[str]) -> list[int]:
    """File sizes of the local inputs; raise InputError naming the first missing/unreadable."""
    sizes = []
    for path in paths:
        if path.startswith("s3://"):
            raise InputError(
                f"{path}: s3:// inputs need --runner emr or hadoop",
                hint="download the file, or run on EMR",
            )
        try:
            with open(path, "rb") as fh:
                fh.read(1)
            sizes.append(os.path.getsize(path))
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise InputError(f"cannot read input {path}: {reason}") from None
    return sizes


def is_gzip(path: str) -> bool:
    """True when the file starts with the gzip magic bytes; InputError naming the file when it
    cannot be read (eval and embed reach files here first: a PermissionError traceback)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == GZIP_MAGIC
    except OSError as exc:
        raise InputError(f"cannot read input {path}: {exc.strerror or exc}") from None


SIZE_SAMPLE = 1 << 20
"""Compressed bytes plain_size decompresses to estimate a gzip file's ratio."""
SIZE_SAMPLE_OUT = 64 << 20
"""At most this much output from that sample (a file that compresses 1000:1 stops here)."""


def plain_size(path: str, size: int) -> int:
    """Bytes ``path`` holds once decompressed: ``size`` for a plain file; for gzip, exact when
    the file is at most SIZE_SAMPLE, else estimated from its first SIZE_SAMPLE bytes' ratio
    (IMDB's 25.8 MB .gz holds 4.4× that: memory plans on the file size spilled too little)."""
    if not is_gzip(path):
        return size
    with open(path, "rb") as fh:
        raw = fh.read(SIZE_SAMPLE)
    out = used = 0
    rest = raw
    try:
        while rest and out < SIZE_SAMPLE_OUT:  # member after member (concatenated gzips)
            d = zlib.decompressobj(wbits=31)
            out += len(d.decompress(rest, SIZE_SAMPLE_OUT - out))
            used += len(rest) - len(d.unconsumed_tail) - len(d.unused_data)
            rest = d.unused_data if d.eof else b""
    except zlib.error:  # damaged: the reader says where; plan on the file's size
        return size
    if len(raw) < SIZE_SAMPLE and not rest and out < SIZE_SAMPLE_OUT:
        return out  # read whole
    return round(size * out / max(used, 1))


GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)
"""What reading a truncated or damaged gzip file raises."""


@contextmanager
def gzip_errors(path: str) -> Iterator[None]:
    """Turn a truncated or damaged gzip stream read inside the block into an InputError
    naming the file (exit 2), not a traceback."""
    try:
        yield
    except GZIP_ERRORS as exc:
        raise InputError(
            f"{path}: not a readable gzip file ({exc or type(exc).__name__})",
            hint="the file is truncated or damaged: download or copy it again "
            "(`gzip -t FILE` checks one)",
        ) from None


def open_binary(path: str) -> IO[bytes]:
    """A binary stream of the file's content, decompressed when it is gzip."""
    if is_gzip(path):
        return cast(BinaryIO, gzip.open(path, "rb"))
    return open(path, "rb")


def plan_tasks(
    paths: list[str], sizes: list[int], workers: int, finish_together: int = 0
) -> list[MapTask]:
    """Split plain files into line-aligned ranges (about 4 per worker, within
    MIN/MAX_SPLIT_BYTES), gzip files whole. With `finish_together` (the number of processes
    that take the ranges from one queue, largest first), the end of each file is cut into
    shrinking ranges (guided scheduling, down to a quarter of MIN_SPLIT_BYTES), so the last
    ranges taken are small and the processes end their map at nearly the same time."""
    total = sum(sizes)
    target = min(MAX_SPLIT_BYTES, max(MIN_SPLIT_BYTES, total // max(1, workers * 4)))
    smallest = max(1, MIN_SPLIT_BYTES // 4)
    tasks = []
    for index, (path, size) in enumerate(zip(paths, sizes, strict=True)):
        if is_gzip(path) or size <= target:
            tasks.append(MapTask(index, path, 0, size, is_gzip(path), 0))
            continue
        start = split_no = 0
        while start < size:
            step = target
            if finish_together:
                step = min(target, max(smallest, (size - start) // (2 * finish_together)))
            end = min(size, start + step)
            tasks.append(MapTask(index, path, start, end, False, split_no))
            start, split_no = end, split_no + 1
    return tasks


def _skip_partial_line(stream: IO[bytes], start: int) -> int:
    """Move to the first line that starts at or after `start`; return that offset."""
    stream.seek(start - 1)
    if stream.read(1) == b"\n":
        return start
    pos = start
    while True:
        chunk = stream.read(1 << 16)
        if not chunk:
            return pos
        nl = chunk.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(chunk)


def iter_task_blocks(
    task: MapTask,
    max_line_bytes: int,
    block_bytes: int = BLOCK_BYTES,
    cursor: list[int] | None = None,
) -> Iterator[tuple[list[bytes], list[int]]]:
    """Lines of a task in blocks: (lines without newline, indexes of too-long lines in the
    block, which are replaced by b"" and never held in memory). `cursor[0]`, when given, is
    kept at the input bytes consumed so far (compressed bytes for gzip; for progress)."""
    cursor = cursor if cursor is not None else [0]
    if task.gzip:
        with (
            gzip_errors(task.path),
            open(task.path, "rb") as raw,
            gzip.GzipFile(fileobj=raw, mode="rb") as gz,
        ):
            for block in iter_line_blocks(cast(BinaryIO, gz), None, block_bytes, max_line_bytes):
                cursor[0] = min(raw.tell(), task.nbytes)
                yield block
        return
    with open(task.path, "rb", buffering=0) as stream:
        start = task.start if task.start == 0 else _skip_partial_line(stream, task.start)
        if start >= task.end and task.start > 0:
            return
        stream.seek(start)
        for block in iter_line_blocks(stream, task.end - start, block_bytes, max_line_bytes):
            cursor[0] = min(stream.tell() - task.start, task.nbytes)
            yield block


def iter_line_blocks(
    stream: IO[bytes], limit: int | None, block_bytes: int, max_line_bytes: int
) -> Iterator[tuple[list[bytes], list[int]]]:
    """Complete lines of the lines starting in the next `limit` bytes (None: to the end)."""
    carry = b""
    dropping = False  # inside a line already known to be too long
    consumed = 0
    while True:
        past = limit is not None and consumed >= limit
        if past and not carry and not dropping:
            return
        want = block_bytes if limit is None or past else min(block_bytes, limit - consumed)
        chunk = stream.read(want)
        if not chunk:
            if dropping or carry:
                yield ([b""], [0]) if dropping else ([carry], [])
            return
        consumed += len(chunk)
        cut = chunk.find(b"\n") if past else chunk.rfind(b"\n")
        if cut < 0:
            if not dropping:
                carry += chunk
                if len(carry) > max_line_bytes:
                    dropping, carry = True, b""
            continue
        lines = chunk[:cut].split(b"\n")
        too_long = []
        if dropping:
            lines[0], dropping = b"", False
            too_long.append(0)
        elif carry:
            lines[0] = carry + lines[0]
        carry = chunk[cut + 1 :]
        yield lines, too_long
        if past:
            return


def detect_spec(path: str, cfg: PreprocessConfig, probe_lines: int = 50) -> RecordSpec:
    """The RecordSpec of a file: from cfg.format/text_field/rating_field, or detected from the
    first parseable records when format is auto (raises InputError when nothing matches); a
    label_field reads a 0/1 label instead of a rating."""
    if cfg.label_field:
        if cfg.rating_field:
            raise InputError(
                "--label-field and --rating-field both name the label: give one",
                hint="--label-field for a 0/1 label, --rating-field for star ratings",
            )
        fmt = "jsonl" if cfg.format == "auto" else cfg.format
        base = label_spec(cfg.text_field or _text_field_of(path, cfg), cfg.label_field, fmt)
        return _with_title(base, cfg)
    if cfg.format != "auto" or cfg.text_field or cfg.rating_field:
        fmt = "jsonl" if cfg.format == "auto" else cfg.format
        text_field = cfg.text_field or "reviewText"
        base = RecordSpec(
            format=fmt, text_field=text_field, rating_field=cfg.rating_field or "overall"
        )
        return _with_title(base, cfg)
    records = probe_records(path, probe_lines)
    for obj in records:
        for fields, spec in KNOWN_LAYOUTS:
            if fields <= set(obj):
                return _with_title(spec, cfg)
    if not records:  # empty or entirely unreadable: every line will be counted as skipped
        return _with_title(RecordSpec(), cfg)
    raise InputError(
        f"{path}: cannot tell the review text and rating fields apart "
        f"(fields seen: {', '.join(field_names(records)[:12])})",
        hint=_field_hint(records),
    )


def probe_records(path: str, probe_lines: int) -> list[dict[str, Any]]:
    """The records among the first ``probe_lines`` lines of ``path`` that parse."""
    records = []
    with gzip_errors(path), open_binary(path) as stream:
        for n, raw in enumerate(stream):
            if n >= probe_lines:
                break
            obj = parse_object(raw.rstrip(b"\r\n"), RecordSpec())
            if not isinstance(obj, str):
                records.append(obj)
    return records


def field_names(records: list[dict[str, Any]]) -> list[str]:
    """The field names of ``records``, sorted."""
    return sorted({str(key) for obj in records for key in obj})


def _longest_text_field(records: list[dict[str, Any]], besides: str = "") -> str | None:
    """The field whose string values are longest on average over ``records`` (a review's text
    is its longest field), ``besides`` left out; None when no field holds strings."""
    lengths: dict[str, list[int]] = {}
    for obj in records:
        for key, value in obj.items():
            if key != besides and isinstance(value, str):
                lengths.setdefault(key, []).append(len(value))
    if not lengths:
        return None
    return max(lengths, key=lambda key: sum(lengths[key]) / len(records))


RATING_NAMES = ("overall", "rating", "stars", "star_rating", "score")
"""Usual names of a star-rating field, preferred when several numbers could be one."""
LABEL_NAMES = ("label", "sentiment", "polarity", "positive")
"""Usual names of a 0/1 label field."""


def _field_hint(records: list[dict[str, Any]]) -> str:
    """How to name the fields, with the ones these records suggest."""
    text = _longest_text_field(records)
    numbers: dict[str, set[Any]] = {}
    for obj in records:
        for key, value in obj.items():
            if key != text and isinstance(value, int | float) and not isinstance(value, bool):
                numbers.setdefault(key, set()).add(value)
    held = {key: sum(key in obj for obj in records) for key in numbers}

    def likeliest(keys: list[str], known: tuple[str, ...]) -> str | None:
        """A field of a usual name first, then the one most records hold."""
        return min(keys, key=lambda k: (k.lower() not in known, -held[k]), default=None)

    label = likeliest([k for k, v in numbers.items() if v <= {0, 1}], LABEL_NAMES)
    stars = likeliest(
        [k for k, v in numbers.items() if k != label and v <= {1, 2, 3, 4, 5}], RATING_NAMES
    )
    if stars in RATING_NAMES and label not in LABEL_NAMES:
        label = None  # a stray 0/1 number beside a rating field
    given = f"--text-field {text or 'NAME'} "
    if label and not stars:
        return f"pass {given}--label-field {label} (0 negative, 1 positive)"
    if stars:
        return f"pass {given}--rating-field {stars} (1-5 stars)"
    return f"pass {given}and --rating-field NAME (1-5 stars) or --label-field NAME (0/1)"


def _text_field_of(path: str, cfg: PreprocessConfig) -> str:
    """The text field of the layout detected in ``path``, else its longest string field other
    than the label (reviewText when it holds none)."""
    try:
        return detect_spec(path, replace(cfg, label_field=None)).text_field
    except InputError:
        found = _longest_text_field(probe_records(path, 50), besides=cfg.label_field or "")
        return found or "reviewText"


def _with_title(spec: RecordSpec, cfg: PreprocessConfig) -> RecordSpec:
    """The spec with the layout's title field appended to the text (append_summary) and/or read
    as a training row of its own (title_rows)."""
    summary = SUMMARY_FIELDS.get(spec.text_field, "summary")
    return replace(
        spec,
        summary_field=summary if cfg.append_summary else None,
        title_field=summary if cfg.title_rows else None,
        test_fraction=cfg.test_fraction,
    )


def iter_records(
    path: str,
    cfg: PreprocessConfig,
    spec: RecordSpec | None = None,
    skipped: Counter[str] | None = None,
) -> Iterator[Record]:
    """Record(text=cleaned text, rating, label) of each usable line of a local file, in file
    order; bad lines are skipped (counted by reason into ``skipped`` when given, as
    preprocess counts them). `spec` defaults to the one detected from cfg; pass the spec
    recorded in vocab.json to reproduce a dataset's rules."""
    for _, record in iter_numbered_records(path, cfg, spec, skipped):
        yield record


def iter_numbered_records(
    path: str,
    cfg: PreprocessConfig,
    spec: RecordSpec | None = None,
    skipped: Counter[str] | None = None,
    examples: dict[str, list[int]] | None = None,
) -> Iterator[tuple[int, Record]]:
    """iter_records() with each record's line number in the file (1-based; of the
    decompressed text for gzip); ``examples`` gets the first 3 line numbers of each
    skip reason."""
    check_inputs([path])
    spec = spec or detect_spec(path, cfg)
    task = MapTask(0, path, 0, os.path.getsize(path), is_gzip(path), 0)
    before = 0
    for lines, too_long in iter_task_blocks(task, cfg.max_line_bytes):
        long_lines = set(too_long)
        for i, line in enumerate(lines):
            parsed = "too_long" if i in long_lines else parse_line(line, spec, cfg.max_line_bytes)
            if not isinstance(parsed, str):
                yield before + i + 1, Record(parsed[0].decode(), parsed[1], spec.label(parsed[1]))
            else:
                if skipped is not None:
                    skipped[parsed] += 1
                if examples is not None and len(seen := examples.setdefault(parsed, [])) < 3:
                    seen.append(before + i + 1)
        before += len(lines)

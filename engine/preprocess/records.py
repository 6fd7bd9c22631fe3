"""Per-record pure functions: one raw line → (cleaned text, rating) or a skip reason."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from engine.preprocess.dedupe import is_test
from engine.preprocess.text import clean_text

SKIP_REASONS: dict[str, str] = {
    "empty_line": "blank line",
    "too_long": "line longer than max_line_bytes",
    "invalid_utf8": "line is not valid UTF-8",
    "malformed_json": "neither JSON nor a Python literal",
    "python_literal": "a Python literal, not JSON: --format auto or mcauley reads it",
    "not_an_object": "JSON value is not an object",
    "missing_text": "text field absent or null",
    "text_not_string": "text field is not a string",
    "empty_text": "text empty or without any word after cleaning",
    "missing_rating": "rating field absent or null",
    "bad_rating": "rating not a whole number",
    "rating_out_of_range": "rating outside rating_min..rating_max",
    "only_stopwords": "distinct text left with no word after stopword removal",
}
"""Every reason a line can be skipped for (keys of stats.json's `skipped`)."""


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """How to read one input file's records and turn ratings into labels."""

    format: str = "mcauley"
    """mcauley (McAuley 2014/2018: JSON or Python literal per line) or jsonl."""
    text_field: str = "reviewText"
    """Field holding the review text."""
    rating_field: str = "overall"
    """Field holding the star rating."""
    summary_field: str | None = None
    """Field appended to the text (with a space) when set, e.g. `summary`."""
    title_field: str | None = None
    """Field whose text becomes a training row of its own, with its review's rating, when set
    (e.g. `summary`: the review's title); see `title_of`."""
    test_fraction: float = 0.0
    """The job's test share (PreprocessConfig.test_fraction), which title rows stay out of."""
    rating_min: int = 1
    """Smallest valid rating."""
    rating_max: int = 5
    """Largest valid rating."""
    negative_max: int = 3
    """Ratings up to this are label 0 (negative), above it label 1 (positive)."""

    def label(self, rating: int) -> int:
        """0 for negative, 1 for positive."""
        return 0 if rating <= self.negative_max else 1

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for vocab.json and job arguments)."""
        return {f: getattr(self, f) for f in self.__slots__}


UTF8_BOM = b"\xef\xbb\xbf"
"""Byte order mark that Windows tools put before a file's first line (not part of the JSON)."""

Parsed = tuple[bytes, int]
"""(cleaned text, rating)."""


class Record(NamedTuple):
    """A usable review: cleaned text, its rating and the label the rating maps to."""

    text: str
    rating: int
    label: int


def _literal(line: bytes) -> Any:
    try:
        return ast.literal_eval(line.decode())
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None


def parse_object(line: bytes, spec: RecordSpec) -> dict[str, Any] | str:
    """The decoded object of a line (JSON, or a Python literal for McAuley), or a skip reason;
    a leading UTF-8 byte order mark is ignored (it cost such a file its first review)."""
    if line.startswith(UTF8_BOM):
        line = line[len(UTF8_BOM) :]
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            line.decode()
        except UnicodeDecodeError:
            return "invalid_utf8"
        if line.lstrip()[:1] != b"{":
            return "malformed_json"
        if spec.format != "mcauley":  # strict JSON lines: name a line another format reads
            return "python_literal" if _literal(line) is not None else "malformed_json"
        obj = _literal(line)
        if obj is None:
            return "malformed_json"
    return obj if isinstance(obj, dict) else "not_an_object"


def rating_of(value: Any, spec: RecordSpec) -> int | str:
    """A whole-number rating within range, or a skip reason."""
    if value is None:
        return "missing_rating"
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return "bad_rating"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "bad_rating"
    if not math.isfinite(value) or value != int(value):
        return "bad_rating"
    rating = int(value)
    if not spec.rating_min <= rating <= spec.rating_max:
        return "rating_out_of_range"
    return rating


def record_of(obj: dict[str, Any], spec: RecordSpec) -> Parsed | str:
    """(cleaned text, rating) of a decoded record, or a skip reason."""
    text = obj.get(spec.text_field)
    if text is None:
        return "missing_text"
    if not isinstance(text, str):
        return "text_not_string"
    if spec.summary_field is not None:
        summary = obj.get(spec.summary_field)
        if isinstance(summary, str) and summary:
            text = f"{text} {summary}"
    rating = rating_of(obj.get(spec.rating_field), spec)
    if isinstance(rating, str):
        return rating
    cleaned = clean_text(text)
    if not cleaned:
        return "empty_text"
    return cleaned, rating


def parse_line(line: bytes, spec: RecordSpec, max_line_bytes: int = 1 << 20) -> Parsed | str:
    """One raw line (without its newline) → (cleaned text, rating) or a skip reason."""
    if len(line) > max_line_bytes:
        return "too_long"
    if not line.strip():
        return "empty_line"
    obj = parse_object(line, spec)
    if isinstance(obj, str):
        return obj
    return record_of(obj, spec)


def title_of(obj: dict[str, Any], review: bytes, spec: RecordSpec) -> bytes | None:
    """The cleaned title of a usable review's record as a training row, or None: only when the
    review (its cleaned text ``review``) and the title itself both fall in the training split,
    so no test review lends its title and no title lands in the test split."""
    if spec.title_field is None:
        return None
    title = obj.get(spec.title_field)
    if not isinstance(title, str) or not title:
        return None
    cleaned = clean_text(title)
    if not cleaned or is_test(review, spec.test_fraction) or is_test(cleaned, spec.test_fraction):
        return None
    return cleaned


def parse_titled(
    line: bytes, spec: RecordSpec, max_line_bytes: int = 1 << 20
) -> tuple[Parsed | str, bytes | None]:
    """parse_line's result with the line's title row (see title_of; None when it has none)."""
    if len(line) > max_line_bytes:
        return "too_long", None
    if not line.strip():
        return "empty_line", None
    obj = parse_object(line, spec)
    if isinstance(obj, str):
        return obj, None
    parsed = record_of(obj, spec)
    if isinstance(parsed, str):
        return parsed, None
    return parsed, title_of(obj, parsed[0], spec)

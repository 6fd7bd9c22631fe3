"""Parsing one line: every skip reason, ratings, formats."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from engine.config import PreprocessConfig
from engine.errors import InputError
from engine.preprocess.readers import detect_spec, iter_records
from engine.preprocess.records import SKIP_REASONS, RecordSpec, parse_line

from .conftest import DATA, review

MC = RecordSpec()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"", "empty_line"),
        (b"   \r", "empty_line"),
        (b'{"reviewText": "ok", "overall": 5', "malformed_json"),
        (b"not json at all", "malformed_json"),
        (b'{"reviewText": "caf\xe9", "overall": 5}', "invalid_utf8"),
        (b"[1, 2]", "not_an_object"),
        (b'"just a string"', "not_an_object"),
        (b'{"overall": 5}', "missing_text"),
        (b'{"reviewText": null, "overall": 5}', "missing_text"),
        (b'{"reviewText": 12, "overall": 5}', "text_not_string"),
        (b'{"reviewText": "", "overall": 5}', "empty_text"),
        (b'{"reviewText": " ?! ", "overall": 5}', "empty_text"),
        (b'{"reviewText": "good"}', "missing_rating"),
        (b'{"reviewText": "good", "overall": "five"}', "bad_rating"),
        (b'{"reviewText": "good", "overall": 4.5}', "bad_rating"),
        (b'{"reviewText": "good", "overall": true}', "bad_rating"),
        (b'{"reviewText": "good", "overall": [5]}', "bad_rating"),
        (b'{"reviewText": "good", "overall": 0}', "rating_out_of_range"),
        (b'{"reviewText": "good", "overall": 6.0}', "rating_out_of_range"),
        (b'{"reviewText": "good", "overall": -1}', "rating_out_of_range"),
    ],
)
def test_bad_lines_give_their_reason(line: bytes, reason: str) -> None:
    assert reason in SKIP_REASONS
    assert parse_line(line, MC) == reason


def test_too_long_line() -> None:
    line = review("word " * 1000)
    assert parse_line(line, MC, max_line_bytes=100) == "too_long"
    assert parse_line(line, MC, max_line_bytes=len(line))[1] == 5


@pytest.mark.parametrize("rating", [1, 1.0, "3", " 4.0 ", 5.0])
def test_numeric_ratings_accepted(rating: object) -> None:
    parsed = parse_line(review("Nice!", rating), MC)
    assert parsed == (b"nice", int(float(str(rating))))


def test_python_literal_lines_are_read_for_mcauley_only() -> None:
    line = b"{'reviewText': 'It\\'s great', 'overall': 4.0, 'helpful': [0, 0]}"
    assert parse_line(line, MC) == (b"its great", 4)
    assert parse_line(line, RecordSpec(format="jsonl")) == "python_literal"  # skipped, named
    assert parse_line(b"{'reviewText': __import__('os')}", MC) == "malformed_json"


def test_summary_is_appended_when_asked() -> None:
    spec = RecordSpec(summary_field="summary")
    assert parse_line(review("Good strings", 5, summary="Five Stars"), spec) == (
        b"good strings five stars",
        5,
    )
    assert parse_line(review("Good strings", 5, summary="Five Stars"), MC) == (b"good strings", 5)


def test_label_rule() -> None:
    assert [MC.label(r) for r in range(1, 6)] == [0, 0, 0, 1, 1]
    imdb = RecordSpec(rating_max=10, negative_max=4)
    assert [imdb.label(r) for r in (1, 4, 5, 7, 10)] == [0, 0, 1, 1, 1]


def _cfg(**kw: object) -> PreprocessConfig:
    return PreprocessConfig(inputs=["x"], output="y", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "text_field", "rating_field", "rating_max"),
    [
        ("amazon2014_Musical_Instruments_5.jsonl.gz", "reviewText", "overall", 5),
        ("amazon2018_Appliances_5.jsonl.gz", "reviewText", "overall", 5),
        ("amazon_fine_food_reviews.head.jsonl.gz", "Text", "Score", 5),
        ("amazon_alexa_reviews.dedup.jsonl.gz", "verified_reviews", "rating", 5),
        ("imdb_aclImdb_labeled.jsonl.gz", "text", "rating", 10),
    ],
)
def test_auto_detects_real_layouts(
    name: str, text_field: str, rating_field: str, rating_max: int
) -> None:
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    spec = detect_spec(str(path), _cfg())
    assert (spec.text_field, spec.rating_field, spec.rating_max) == (
        text_field,
        rating_field,
        rating_max,
    )


def test_explicit_fields_and_unknown_layout(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"body": "fine", "stars": 4}) + "\n")
    with pytest.raises(InputError, match="body, stars") as exc:
        detect_spec(str(path), _cfg())
    assert "--text-field" in exc.value.user_message()
    spec = detect_spec(str(path), _cfg(format="jsonl", text_field="body", rating_field="stars"))
    assert (spec.text_field, spec.rating_field) == ("body", "stars")


def test_iter_records_reads_gzip_and_skips_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.json.gz"
    path.write_bytes(gzip.compress(b"\n".join([review("Loved it", 5), b"{bad", review("Meh.", 2)])))
    records = list(iter_records(str(path), _cfg()))
    assert [(r.text, r.rating, r.label) for r in records] == [("loved it", 5, 1), ("meh", 2, 0)]


def test_a_byte_order_mark_before_the_first_line_is_ignored(tmp_path: Path) -> None:
    """A file saved by a Windows tool starts with a UTF-8 BOM: its first review was skipped as
    malformed_json (and a one-line file's format could not be detected)."""
    bom = b"\xef\xbb\xbf"
    assert parse_line(bom + review("great tuner", 4), MC) == (b"great tuner", 4)
    path = tmp_path / "export.jsonl"
    path.write_bytes(bom + json.dumps({"Text": "stale beans", "Score": 1}).encode() + b"\r\n")
    cfg = PreprocessConfig(inputs=[str(path)], output=str(tmp_path / "o"))
    assert detect_spec(str(path), cfg).text_field == "Text"
    assert [r.text for r in iter_records(str(path), cfg)] == ["stale beans"]


def test_a_python_literal_read_as_strict_json_lines_is_named_so() -> None:
    """Under --format jsonl a McAuley line ({'reviewText': ...}) was skipped as malformed_json,
    "neither JSON nor a Python literal": false, it is one; auto and mcauley read it."""
    line = b"{'reviewText': 'Great strings', 'overall': 5.0}"
    strict = RecordSpec(format="jsonl")
    assert parse_line(line, strict) == "python_literal"
    assert "--format auto" in SKIP_REASONS["python_literal"]
    assert parse_line(line, MC) == (b"great strings", 5)
    assert parse_line(b"{'reviewText': 'x', oops", strict) == "malformed_json"


def test_a_file_of_python_literals_under_jsonl_gets_the_format_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tui.cli import main

    path = tmp_path / "lit.jsonl"
    path.write_text("".join(f"{{'reviewText': 'good {i}', 'overall': 5.0}}\n" for i in range(9)))
    rc = main(["preprocess", "-i", str(path), "-o", str(tmp_path / "o"), "--format", "jsonl"])
    err = capsys.readouterr().err
    assert rc == 2 and "9 python_literal" in err
    assert "--format auto" in err and "neither JSON nor" not in err

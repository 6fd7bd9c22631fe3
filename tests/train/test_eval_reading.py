"""`sentitop eval` reading files: skipped lines counted and reported, other field names, folders."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.errors import InputError
from engine.sentiment.evaluate import read_labelled
from tui.cli.commands.evaluate import skipped_line, skipped_warning


def _run(tmp_path: Path) -> Any:
    """What read_labelled needs of a loaded run: its folder and preprocessing settings."""
    return SimpleNamespace(run_dir=tmp_path, encoder=SimpleNamespace(settings={"format": "auto"}))


def _write(path: Path, rows: list[dict[str, Any]], junk: int = 0) -> Path:
    lines = [json.dumps(r) for r in rows] + ["{junk"] * junk
    path.write_text("\n".join(lines) + "\n")
    return path


def test_skipped_lines_are_counted_and_reported(tmp_path: Path) -> None:
    rows = [{"reviewText": f"fine item {i}", "overall": 5 if i % 3 else 1} for i in range(20)]
    path = _write(tmp_path / "mix.jsonl", rows, junk=31)
    skipped: Counter[str] = Counter()
    texts, _ = read_labelled(_run(tmp_path), [str(path)], skipped)
    assert len(texts) == 20 and skipped == Counter({"malformed_json": 31})
    metrics = {"n": 20, "lines": 51, "skipped": dict(skipped)}
    assert skipped_line(metrics) == (
        "skipped 31 of 51 lines: 31 malformed_json (neither JSON nor a Python literal)"
    )
    warning = skipped_warning(metrics)
    assert warning is not None and "61% of the 51 lines were skipped" in warning
    few = {"n": 50, "lines": 51, "skipped": {"malformed_json": 1}}
    assert skipped_warning(few) is None and skipped_line(few) is not None
    assert skipped_line({"n": 5, "lines": 5, "skipped": {}}) is None


def test_skipped_lines_are_named_by_file_and_line(tmp_path: Path) -> None:
    """A 1 MB review was "skipped 1 of 21 lines: 1 too_long": which line, the user had to find."""
    rows = [{"reviewText": f"fine item {i}", "overall": 5 if i % 3 else 1} for i in range(20)]
    rows.insert(4, {"reviewText": "x " * 600_000, "overall": 5})  # line 5, past 1 MiB
    path = _write(tmp_path / "long.jsonl", rows, junk=4)  # lines 22-25
    skipped: Counter[str] = Counter()
    at: dict[str, list[str]] = {}
    texts, _ = read_labelled(_run(tmp_path), [str(path)], skipped, skipped_at=at)
    assert len(texts) == 20 and at == {
        "too_long": ["long.jsonl:5"],
        "malformed_json": ["long.jsonl:22", "long.jsonl:23", "long.jsonl:24"],
    }
    line = skipped_line({"n": 20, "lines": 25, "skipped": dict(skipped), "skipped_at": at})
    assert line is not None and "e.g. long.jsonl:5)" in line and "long.jsonl:25" not in line


def test_every_skip_reason_is_counted_commonest_first() -> None:
    """The line named the first three reasons met, so its counts fell short of its total."""
    skipped = {"missing_text": 1, "invalid_utf8": 1, "bad_rating": 1, "malformed_json": 3}
    line = skipped_line({"n": 40, "lines": 46, "skipped": {**skipped, "rating_out_of_range": 1}})
    assert line is not None and line.startswith("skipped 7 of 46 lines: 3 malformed_json (")
    counted = [int(part.split()[0]) for part in line.split(": ", 1)[1].replace(",", ";").split(";")]
    assert sum(counted) == 7, line
    assert line.endswith("; 1 bad_rating, 1 rating_out_of_range")


def test_files_with_other_field_names_are_read_when_named(tmp_path: Path) -> None:
    rows = [{"body": f"fine item {i}", "stars": 5 if i % 2 else 1} for i in range(10)]
    path = _write(tmp_path / "other.jsonl", rows)
    with pytest.raises(InputError, match="fields seen: body, stars"):
        read_labelled(_run(tmp_path), [str(path)])
    fields: dict[str, str | None] = {"text_field": "body", "rating_field": "stars"}
    texts, labels = read_labelled(_run(tmp_path), [str(path)], fields=fields)
    assert len(texts) == 10 and list(labels) == [i % 2 for i in range(10)]


def test_a_folder_stands_for_its_review_files(tmp_path: Path) -> None:
    folder = tmp_path / "reviews"
    folder.mkdir()
    with pytest.raises(InputError, match="reviews"):  # nothing in it
        read_labelled(_run(tmp_path), [str(folder)])
    _write(folder / "b.jsonl", [{"reviewText": "bad item", "overall": 1}])
    _write(folder / "a.jsonl", [{"reviewText": "fine item", "overall": 5}])
    (folder / "notes.txt").write_text("not reviews")
    left_out: list[dict[str, str]] = []
    texts, labels = read_labelled(_run(tmp_path), [str(folder)], Counter(), None, left_out)
    assert texts == ["fine item", "bad item"] and list(labels) == [1, 0]  # sorted by name
    assert [w["code"] for w in left_out] == ["unknown_input_file"]
    assert "notes.txt" in left_out[0]["message"]


def test_nothing_usable_is_a_clear_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "junk.jsonl", [], junk=5)
    with pytest.raises(InputError, match=r"no usable review .*skipped: 5 malformed_json"):
        read_labelled(_run(tmp_path), [str(path)], Counter())

"""Review titles as training rows (preprocess.title_rows): only training reviews' titles, never
in the test split, counted in stats, identical across runners."""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from engine.preprocess.dedupe import is_test
from engine.preprocess.text import clean_text

from .conftest import MUSICAL, assert_same_dataset, needs_spark, write_lines

Run = Callable[..., dict[str, Any]]
needs_data = pytest.mark.skipif(not MUSICAL.exists(), reason=f"{MUSICAL} not available")
FRACTION = 0.5


def _rows(result: dict[str, Any], split: str) -> dict[str, int]:
    """Decoded text (its kept words joined) → label of every row of a split."""
    itos = result["vocab"]["itos"]
    rows = {}
    for tokens, length, label in zip(
        result[f"{split}/tokens"], result[f"{split}/lengths"], result[f"{split}/labels"],
        strict=True,
    ):  # fmt: skip
        rows[" ".join(itos[t] for t in tokens[: int(length)])] = int(label)
    return rows


def _text(split: str, stem: str) -> str:
    """A text ``stem N`` whose cleaned form falls in the given split at FRACTION."""
    for n in count():
        text = f"{stem} {n}"
        if is_test(clean_text(text), FRACTION) == (split == "test"):
            return text
    raise AssertionError("unreachable")


def _review(text: str, title: str | None, stars: int) -> bytes:
    record: dict[str, Any] = {"reviewText": text, "overall": stars}
    if title is not None:
        record["summary"] = title
    return json.dumps(record).encode()


def test_only_training_reviews_lend_their_titles_and_no_title_enters_the_test_split(
    tmp_path: Path, preprocess: Run
) -> None:
    train_review, test_review = _text("train", "sturdy case"), _text("test", "flimsy case")
    train_title, test_title = _text("train", "not bad at all"), _text("test", "no complaints")
    kept_title, lent_title = _text("train", "never fails me"), _text("train", "it broke")
    lines = [
        _review(train_review, train_title, 5),
        _review(_text("train", "good strap"), test_title, 4),  # the title would be a test text
        _review(test_review, lent_title, 1),  # a test review lends nothing
        _review(_text("train", "fine cable"), kept_title, 5),
        _review(_text("train", "awful plug"), kept_title, 2),
        _review(_text("train", "nice lid"), kept_title, 5),
        _review(_text("train", "bad hinge"), "", 1),  # an empty title is no row
        _review(_text("train", "sad hinge"), None, 1),
    ]
    path = write_lines(tmp_path / "reviews.jsonl", lines)
    plain = preprocess([path], test_fraction=FRACTION)
    titled = preprocess([path], test_fraction=FRACTION, title_rows=True)

    train = _rows(titled, "train")
    assert train[clean_text(train_title).decode()] == 1
    assert train[clean_text(kept_title).decode()] == 1  # the mode of its three reviews' stars
    assert clean_text(lent_title).decode() not in train
    assert clean_text(test_title).decode() not in {**train, **_rows(titled, "test")}
    assert _rows(titled, "test") == _rows(plain, "test")
    assert set(_rows(plain, "train")) < set(train)
    stats = titled["stats"]
    assert stats["title_rows"] == 4 and plain["stats"]["title_rows"] == 0
    assert stats["read"] + stats["title_rows"] == (
        stats["kept"] + stats["skipped_total"] + stats["duplicates"]
    )
    assert stats["train"] == plain["stats"]["train"] + 2 and stats["duplicates"] == 2
    assert titled["vocab"]["settings"]["title_rows"] is True
    assert titled["vocab"]["settings"]["specs"][0]["title_field"] == "summary"


def test_a_title_equal_to_a_review_text_adds_its_stars_to_that_row(
    tmp_path: Path, preprocess: Run
) -> None:
    shared = _text("train", "works great")
    lines = [
        _review(shared, None, 2),
        _review(_text("train", "bright lamp"), shared, 5),
        _review(_text("train", "warm lamp"), shared, 5),
        _review(_text("train", "dim lamp"), "", 1),
    ]
    path = write_lines(tmp_path / "reviews.jsonl", lines)
    key = clean_text(shared).decode()
    assert _rows(preprocess([path], test_fraction=FRACTION), "train")[key] == 0
    titled = preprocess([path], test_fraction=FRACTION, title_rows=True)
    assert _rows(titled, "train")[key] == 1  # 5, 5 outvote the review's own 2


def test_files_without_titles_warn_that_title_rows_added_nothing(
    tmp_path: Path, preprocess: Run
) -> None:
    lines = [json.dumps({"text": f"item {n} {'good' if n % 2 else 'bad'}", "rating": 1 + n % 5})
             for n in range(40)]  # fmt: skip
    path = write_lines(tmp_path / "plain.jsonl", [line.encode() for line in lines])
    result = preprocess([path], title_rows=True, test_fraction=0.2)
    assert result["stats"]["title_rows"] == 0
    codes = [w["code"] for w in result["stats"]["warnings"]]
    assert "no_title_rows" in codes


@pytest.fixture(scope="module")
def titled_local(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from engine.config import PreprocessConfig
    from engine.preprocess import run_preprocess

    from .conftest import load_dataset

    out = tmp_path_factory.mktemp("titled")
    cfg = PreprocessConfig(inputs=[str(MUSICAL)], output=str(out), workers=2, title_rows=True)
    run_preprocess(cfg)
    return load_dataset(out)


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert_same_dataset(a, b)
    keys = ("read", "title_rows", "kept", "duplicates", "train", "test", "vocab_size")
    assert {k: a["stats"][k] for k in keys} == {k: b["stats"][k] for k in keys}


@needs_data
def test_real_titles_keep_the_test_split_and_match_one_worker(
    preprocess: Run, titled_local: dict[str, Any]
) -> None:
    plain = preprocess([MUSICAL], workers=2)
    assert titled_local["stats"]["title_rows"] > 8_000  # most of 10,261 reviews have a title
    # the same test texts in the same order (their ids differ: the vocabulary grew)
    for name in ("labels", "lengths"):
        assert (titled_local[f"test/{name}"] == plain[f"test/{name}"]).all()
    assert titled_local["stats"]["train"] > plain["stats"]["train"]
    _same(preprocess([MUSICAL], workers=1, title_rows=True), titled_local)


@needs_data
@pytest.mark.slow
def test_inline_mrjob_titles_match_local(preprocess: Run, titled_local: dict[str, Any]) -> None:
    _same(preprocess([MUSICAL], runner="inline", title_rows=True), titled_local)


@needs_data
@pytest.mark.slow
@needs_spark
def test_spark_titles_match_local(
    preprocess: Run, titled_local: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    _same(preprocess([MUSICAL], runner="spark", workers=2, title_rows=True), titled_local)


def test_python_literal_lines_give_the_title_rows_json_lines_give(
    tmp_path: Path, preprocess: Run
) -> None:
    """McAuley 2014's Python-literal lines take the parser's slow path, JSON the fast one."""
    records = [
        {"reviewText": _text(split, f"review {n}"), "overall": 1 + n % 5, "summary": title}
        for n, (split, title) in enumerate(
            [("train", "not bad at all"), ("test", "broke fast"), ("train", "no complaints"),
             ("test", "not bad at all"), ("train", ""), ("test", "I was not disappointed")]
        )
    ]  # fmt: skip
    as_json = write_lines(tmp_path / "j.jsonl", [json.dumps(r).encode() for r in records])
    as_literal = write_lines(tmp_path / "p.json", [repr(r).encode() for r in records])
    fast = preprocess([as_json], test_fraction=FRACTION, title_rows=True)
    slow = preprocess([as_literal], test_fraction=FRACTION, title_rows=True)
    assert_same_dataset(fast, slow)
    lent = [r["summary"] for r in records[::2]]  # the training reviews
    wanted = sum(1 for t in lent if t and not is_test(clean_text(t), FRACTION))
    assert fast["stats"]["title_rows"] == slow["stats"]["title_rows"] == wanted > 0

"""Cleaning and stopwords."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.preprocess import text as text_mod
from engine.preprocess.text import NEGATIONS, clean_text, content_words, stopwords


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("Great Product!!", b"great product"),
        ("  It's  GOOD,ok\n\tthanks ", b"its good ok thanks"),
        ("don't", b"dont"),
        ("I don\u2019t know", b"i dont know"),
        ("Tom &amp; Jerry &quot;rocks&quot; &#39;n roll", b"tom jerry rocks n roll"),
        ("caf\u00e9 na\u00efve", b"cafe naive"),
        ("\u65e5\u672c good", b"good"),
        ("5 stars :-) 10/10", b"5 stars 10 10"),
        ("!!!", b""),
        ("", b""),
    ],
)
def test_clean_text(raw: str, cleaned: bytes) -> None:
    assert clean_text(raw) == cleaned


def test_clean_text_is_idempotent() -> None:
    once = clean_text("Hello, World &amp; caf\u00e9 -- it's 5*!")
    assert clean_text(once.decode()) == once


def test_shipped_list_is_current_nltk_english() -> None:
    shipped = (Path(text_mod.__file__).parent / "nltk_stopwords_english.txt").read_text().split()
    assert len(shipped) == 179 == len(set(shipped))
    assert {"mightn't", "should've", "that'll", "you're", "nor", "not"} <= set(shipped)


def test_stopwords_fall_back_to_shipped_copy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(text_mod, "nltk_data_dirs", lambda: [tmp_path])
    stopwords.cache_clear()
    try:
        stop = stopwords(False)
        assert {b"product", b"would", b"get", b"the", b"not", b"dont", b"shouldve"} <= stop
        assert b"great" not in stop
        kept = stopwords(True)
        assert b"not" not in kept and b"dont" not in kept and b"no" not in kept
        assert b"the" in kept and b"product" in kept
        assert {w.decode() for w in stop - kept} <= NEGATIONS
    finally:
        stopwords.cache_clear()


def test_stopwords_use_installed_nltk_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    corpus = tmp_path / "corpora" / "stopwords"
    corpus.mkdir(parents=True)
    (corpus / "english").write_text("alpha\nbeta\n")
    monkeypatch.setattr(text_mod, "nltk_data_dirs", lambda: [tmp_path])
    stopwords.cache_clear()
    try:
        assert stopwords(False) == frozenset({b"alpha", b"beta", b"product", b"would", b"get"})
    finally:
        stopwords.cache_clear()


def test_content_words_drop_stopwords_and_keep_order() -> None:
    stop = frozenset({b"the", b"is", b"not"})
    assert content_words(b"the sound is not great great", stop) == [b"sound", b"great", b"great"]

"""Pure text functions: cleaning at the byte level, stopwords (NLTK or the shipped copy)."""

from __future__ import annotations

import html
import os
import re
import sys
import unicodedata
import zipfile
from functools import lru_cache
from importlib import resources
from pathlib import Path

EXTRA_STOPWORDS = ("product", "would", "get")
"""Added to NLTK's English list, as the seed did."""

NEGATIONS = frozenset(
    {
        "no",
        "nor",
        "not",
        "don",
        "dont",
        "ain",
        "aren",
        "arent",
        "couldn",
        "couldnt",
        "didn",
        "didnt",
        "doesn",
        "doesnt",
        "hadn",
        "hadnt",
        "hasn",
        "hasnt",
        "haven",
        "havent",
        "isn",
        "isnt",
        "mightn",
        "mightnt",
        "mustn",
        "mustnt",
        "needn",
        "neednt",
        "shan",
        "shant",
        "shouldn",
        "shouldnt",
        "wasn",
        "wasnt",
        "weren",
        "werent",
        "won",
        "wont",
        "wouldn",
        "wouldnt",
    }
)
"""Negation words (cleaned spelling: apostrophes removed) kept when keep_negations is set."""


def _make_table() -> bytes:
    table = bytearray(b" " * 256)
    for c in b"abcdefghijklmnopqrstuvwxyz0123456789":
        table[c] = c
    for c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        table[c] = c + 32
    return bytes(table)


CLEAN_TABLE = _make_table()
"""bytes.translate table: letters lowercased, digits kept, every other byte becomes a space."""
DELETE_BYTES = b"'"
"""Bytes removed outright (so "don't" becomes "dont", not "don t")."""

_COMBINING = re.compile("[\u0300-\u036f]")
_QUOTES = ("\u2019", "\u2018", "\u02bc")


def clean_text(text: str) -> bytes:
    """Cleaned text as ASCII bytes: entities decoded, accents folded, lowercase a-z0-9 words
    separated by single spaces; special characters removed (empty when no word is left)."""
    if "&" in text:
        text = html.unescape(text)
    if text.isascii():
        raw = text.encode()
    else:
        for quote in _QUOTES:
            if quote in text:
                text = text.replace(quote, "'")
        text = _COMBINING.sub("", unicodedata.normalize("NFKD", text))
        raw = text.encode("ascii", "replace")
    return b" ".join(raw.translate(CLEAN_TABLE, DELETE_BYTES).split())


def _clean_word(word: str) -> str:
    return clean_text(word).decode()


@lru_cache(maxsize=4)
def stopwords(keep_negations: bool = False, keep_others: bool = False) -> frozenset[bytes]:
    """English stopwords (cleaned spelling, as bytes): NLTK's list when its data is installed,
    else the copy shipped with sentitop, plus product/would/get; negations left out on request,
    and the other words too with ``keep_others`` (then only the listed negations remain, or
    nothing when negations are kept as well)."""
    words = _nltk_words()
    if words is None:
        shipped = resources.files(__package__).joinpath("nltk_stopwords_english.txt")
        words = shipped.read_text(encoding="utf-8").split()
    cleaned = {_clean_word(w) for w in (*words, *EXTRA_STOPWORDS)}
    if keep_negations:
        cleaned -= NEGATIONS
    if keep_others:
        cleaned &= NEGATIONS
    return frozenset(w.encode() for w in cleaned if w)


def nltk_data_dirs() -> list[Path]:
    """NLTK's data search path (as nltk.data.path builds it), without importing nltk (slow)."""
    dirs = [Path(p) for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    dirs.append(Path.home() / "nltk_data")
    dirs += [Path(sys.prefix) / sub for sub in ("nltk_data", "share/nltk_data", "lib/nltk_data")]
    dirs += [Path(p) for p in ("/usr/share/nltk_data", "/usr/local/share/nltk_data",
                               "/usr/lib/nltk_data", "/usr/local/lib/nltk_data")]  # fmt: skip
    return dirs


def _nltk_words() -> list[str] | None:
    """NLTK's installed English stopword list, or None when its data is not installed."""
    for base in nltk_data_dirs():
        plain = base / "corpora" / "stopwords" / "english"
        if plain.is_file():
            return plain.read_text(encoding="utf-8").split()
        packed = base / "corpora" / "stopwords.zip"
        if packed.is_file():
            try:
                with zipfile.ZipFile(packed) as zf:
                    return zf.read("stopwords/english").decode().split()
            except (KeyError, zipfile.BadZipFile, OSError):
                continue
    return None


def content_words(cleaned: bytes, stop: frozenset[bytes]) -> list[bytes]:
    """The words of a cleaned text that are not stopwords, in order."""
    return [w for w in cleaned.split() if w not in stop]

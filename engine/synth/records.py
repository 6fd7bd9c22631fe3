"""Review metadata pools and the byte layout of one McAuley 2014 line (JSON, literal, malformed)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import orjson

from engine.synth import lexicon

LINE = (
    b'{"reviewerID": "%s", "asin": "%s", %s"helpful": [%d, %d], "reviewText": "%s", '
    b'"overall": %s, "summary": "%s", "unixReviewTime": %d, "reviewTime": "%s"}\n'
)
NO_TEXT_LINE = (
    b'{"reviewerID": "%s", "asin": "%s", %s"helpful": [%d, %d], '
    b'"overall": %s, "summary": "%s", "unixReviewTime": %d, "reviewTime": "%s"}\n'
)
RATING_TEXT = [b"", b"1.0", b"2.0", b"3.0", b"4.0", b"5.0"]
MALFORMED_KINDS = (
    "broken_json",
    "missing_text",
    "rating_out_of_range",
    "rating_not_numeric",
    "empty_text",
)
OUT_OF_RANGE = [b"0.0", b"6.0", b"-1.0", b"10.0", b"5.5"]
NOT_NUMERIC = [b'"five"', b"null", b'""', b'"N/A"', b"[5]"]
EMPTY_TEXTS = [b"", b" ", b"   "]
FIRST_DAY = dt.date(2000, 1, 1)
DAYS = 365 * 14 + 3
"""Review dates span 2000-01-01 .. 2013-12-31, weighted towards recent years like the corpus."""
MISSING_NAME_RATE = 0.003


@dataclass(frozen=True, slots=True)
class Pools:
    """Reviewers, products and dates drawn once per file."""

    reviewer_ids: list[bytes]
    reviewer_names: list[bytes]
    """JSON fragment `"reviewerName": "...", ` or b"" when the name is missing."""
    reviewer_texts: list[str | None]
    asins: list[bytes]
    day_weights: np.ndarray
    unix_times: list[int]
    review_times: list[bytes]
    summaries: list[list[bytes]]


_ALNUM = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", dtype=np.uint8)


def _codes(rng: np.random.Generator, count: int, length: int, prefix: bytes) -> list[bytes]:
    body = _ALNUM[rng.integers(0, len(_ALNUM), size=(count, length))]
    return [prefix + row.tobytes() for row in body]


def _name(rng: np.random.Generator) -> str:
    first = lexicon.FIRST_NAMES[int(rng.integers(len(lexicon.FIRST_NAMES)))].title()
    last = lexicon.LAST_NAMES[int(rng.integers(len(lexicon.LAST_NAMES)))].title()
    style = rng.random()
    if style < 0.4:
        return f"{first} {last}"
    if style < 0.6:
        return first
    if style < 0.75:
        return f'{first} {last[0]}. "{first.lower()}{int(rng.integers(10, 99))}"'
    if style < 0.9:
        return f"{first[0]}. {last}"
    return "Amazon Customer"


def make_pools(rng: np.random.Generator, reviewers: int, products: int) -> Pools:
    """Reviewer/product/date pools sized for the file (more records, more of each)."""
    ids = _codes(rng, reviewers, 13, b"A")
    names: list[bytes] = []
    texts: list[str | None] = []
    for _ in range(reviewers):
        if rng.random() < MISSING_NAME_RATE:
            names.append(b"")
            texts.append(None)
            continue
        name = _name(rng)
        texts.append(name)
        names.append(b'"reviewerName": ' + orjson.dumps(name) + b", ")
    asins = [
        (b"B00" + code[:7]) if i % 4 else code
        for i, code in enumerate(_codes(rng, products, 10, b""))
    ]
    age = np.arange(DAYS, dtype=np.float64)
    weights = np.exp(age / 900.0)
    dates = [FIRST_DAY + dt.timedelta(days=d) for d in range(DAYS)]
    epoch = dt.date(1970, 1, 1)
    return Pools(
        reviewer_ids=ids,
        reviewer_names=names,
        reviewer_texts=texts,
        asins=asins,
        day_weights=np.cumsum(weights) / weights.sum(),
        unix_times=[(d - epoch).days * 86400 for d in dates],
        review_times=[f"{d.month:02d} {d.day}, {d.year}".encode() for d in dates],
        summaries=[[]] + [[s.encode() for s in lexicon.SUMMARIES[r]] for r in range(1, 6)],
    )


def literal_line(
    pools: Pools,
    reviewer: int,
    asin: bytes,
    helpful: tuple[int, int],
    text: bytes,
    rating: int,
    summary: bytes,
    day: int,
) -> bytes:
    """The same record as one Python literal (single quotes), as some original dumps hold."""
    record: dict[str, object] = {
        "reviewerID": pools.reviewer_ids[reviewer].decode(),
        "asin": asin.decode(),
    }
    name = pools.reviewer_texts[reviewer]
    if name is not None:
        record["reviewerName"] = name
    record["helpful"] = list(helpful)
    record["reviewText"] = orjson.loads(b'"' + text + b'"')
    record["overall"] = float(rating)
    record["summary"] = summary.decode()
    record["unixReviewTime"] = pools.unix_times[day]
    record["reviewTime"] = pools.review_times[day].decode()
    return repr(record).encode() + b"\n"


def malformed_line(
    kind: int,
    fields: tuple[bytes, bytes, bytes, int, int],
    rest: tuple[bytes, bytes, int, bytes],
    text: bytes,
    choice: int,
) -> bytes:
    """A deliberately invalid line of MALFORMED_KINDS[kind]; `choice` picks a variant."""
    rid, asin, name, h_yes, h_all = fields
    rating, summary, unix, when = rest
    name_kind = MALFORMED_KINDS[kind]
    if name_kind == "broken_json":
        line = LINE % (rid, asin, name, h_yes, h_all, text, rating, summary, unix, when)
        cut = 20 + choice % max(1, len(line) - 40)
        while line[cut] & 0xC0 == 0x80:  # never split a UTF-8 character
            cut -= 1
        return line[:cut] + b"\n"
    if name_kind == "missing_text":
        return NO_TEXT_LINE % (rid, asin, name, h_yes, h_all, rating, summary, unix, when)
    if name_kind == "rating_out_of_range":
        bad = OUT_OF_RANGE[choice % len(OUT_OF_RANGE)]
        return LINE % (rid, asin, name, h_yes, h_all, text, bad, summary, unix, when)
    if name_kind == "rating_not_numeric":
        bad = NOT_NUMERIC[choice % len(NOT_NUMERIC)]
        return LINE % (rid, asin, name, h_yes, h_all, text, bad, summary, unix, when)
    empty = EMPTY_TEXTS[choice % len(EMPTY_TEXTS)]
    return LINE % (rid, asin, name, h_yes, h_all, empty, rating, summary, unix, when)

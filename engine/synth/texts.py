"""Vectorised generator of review texts whose words depend on the star rating."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.synth import lexicon

FILLER_SIZE = 16_000
"""Distinct filler words (real English head, domain nouns, then pseudo-words), Zipf-weighted."""
ZIPF_EXPONENT = 1.0
ZIPF_OFFSET = 2.7
LENGTH_MEDIAN = 52.0
"""Median slots per text; expressions of 2-4 words lift the word median to about 55."""
LENGTH_SIGMA = 1.0
"""Log-normal spread: word p90 ≈ 200, p99 ≈ 600, like Amazon 2014 (Musical Instruments, Phones)."""
MAX_SLOTS = 4000
SENTIMENT_RATE = 0.12
"""Share of word slots that carry sentiment."""
SHORT_TEXT_SENTIMENT = 1.5
"""Short texts still carry about this many sentiment slots ("Great product. Five stars.")."""
HTML_TEXT_RATE = 0.05
NON_ASCII_TEXT_RATE = 0.02
ESCAPED_TEXT_RATE = 0.01
NOISE_SLOT_RATE = 0.06
"""Inside a noisy text, the share of slots replaced by a noise token."""

# Sentiment slot categories: positive, negative, neutral, negated positive, negated negative.
CATEGORY_MIX = np.array(
    [
        [0.06, 0.62, 0.08, 0.22, 0.02],  # 1 star
        [0.12, 0.50, 0.16, 0.20, 0.02],  # 2
        [0.28, 0.22, 0.32, 0.10, 0.08],  # 3
        [0.64, 0.08, 0.14, 0.04, 0.10],  # 4
        [0.78, 0.04, 0.06, 0.02, 0.10],  # 5
    ]
)

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou"]
_CODAS = ["", "", "n", "r", "l", "s", "t", "m", "x"]
_SUFFIXES = ["", ".", ",", "!"]
_VARIANTS = 2 * len(_SUFFIXES)
"""Each base token has a plain and a capitalised form, each with every suffix."""


def _pseudo_words(count: int, taken: set[str]) -> list[str]:
    """`count` pronounceable made-up words, the same on every machine and for every seed."""
    rng = np.random.default_rng(20140601)
    # 17 x 7 x 9 syllables; the empty coda is listed twice to favour open syllables.
    syllables = [o + v + c for o in _ONSETS for v in _VOWELS for c in _CODAS]
    words: list[str] = []
    seen = set(taken)
    while len(words) < count:
        picks = rng.integers(0, len(syllables), size=(2 * count, 3)).tolist()
        three = rng.random(2 * count) < 0.5
        for (a, b, c), long in zip(picks, three.tolist(), strict=True):
            word = syllables[a] + syllables[b] + (syllables[c] if long else "")
            if word not in seen:
                seen.add(word)
                words.append(word)
                if len(words) == count:
                    break
    return words


def _capitalise(token: str) -> str:
    return token[:1].upper() + token[1:]


def _json_form(token: str) -> bytes:
    """JSON string-body bytes of plain text `token` (raw UTF-8, quotes and backslashes escaped)."""
    return token.replace("\\", "\\\\").replace('"', '\\"').encode()


@dataclass(frozen=True, slots=True)
class TokenTable:
    """Every token variant as JSON string-body bytes plus a trailing space, and lengths."""

    tokens: npt.NDArray[np.object_]
    lengths: npt.NDArray[np.int64]
    filler_cdf: npt.NDArray[np.float64]
    category_start: npt.NDArray[np.int64]
    category_size: npt.NDArray[np.int64]
    noise_start: npt.NDArray[np.int64]
    noise_size: npt.NDArray[np.int64]


@functools.cache
def build_table() -> TokenTable:
    """The token table shared by every text (independent of the seed)."""
    head: list[str] = []
    for word in lexicon.COMMON + lexicon.DOMAIN:
        if word not in head:
            head.append(word)
    filler = head + _pseudo_words(FILLER_SIZE - len(head), set(head))
    negated_pos = [f"{n} {w}" for n in lexicon.NEGATIONS for w in lexicon.POSITIVE[:12]]
    negated_neg = [f"{n} {w}" for n in lexicon.NEGATIONS for w in lexicon.NEGATIVE[:8]]
    categories = [
        lexicon.POSITIVE + lexicon.POSITIVE_PHRASES,
        lexicon.NEGATIVE + lexicon.NEGATIVE_PHRASES,
        lexicon.NEUTRAL + lexicon.NEUTRAL_PHRASES,
        negated_pos,
        negated_neg,
    ]
    plain: list[bytes] = [_json_form(w) for w in filler]
    starts: list[int] = []
    for words in categories:
        starts.append(len(plain))
        plain.extend(_json_form(w) for w in words)
    noise_groups = [
        [_json_form(w) for w in lexicon.HTML_NOISE],
        [_json_form(w) for w in lexicon.NON_ASCII_NOISE],
        [w.encode() for w in lexicon.JSON_ESCAPED_NOISE],
    ]
    noise_starts: list[int] = []
    for group in noise_groups:
        noise_starts.append(len(plain))
        plain.extend(group)
    variants: list[bytes] = []
    for token in plain:
        text = token.decode()
        for form in (text, _capitalise(text)):
            variants.extend((form + suffix + " ").encode() for suffix in _SUFFIXES)
    table = np.empty(len(variants), dtype=object)
    table[:] = variants
    ranks = np.arange(FILLER_SIZE, dtype=np.float64)
    weights = (ranks + ZIPF_OFFSET) ** -ZIPF_EXPONENT
    return TokenTable(
        tokens=table,
        lengths=np.fromiter((len(v) for v in variants), dtype=np.int64, count=len(variants)),
        filler_cdf=np.cumsum(weights) / weights.sum(),
        category_start=np.array(starts, dtype=np.int64),
        category_size=np.array([len(c) for c in categories], dtype=np.int64),
        noise_start=np.array(noise_starts, dtype=np.int64),
        noise_size=np.array([len(g) for g in noise_groups], dtype=np.int64),
    )


def draw_lengths(rng: np.random.Generator, count: int) -> npt.NDArray[np.int64]:
    """Slots per text: log-normal around LENGTH_MEDIAN, clipped to 1..MAX_SLOTS."""
    raw = rng.lognormal(np.log(LENGTH_MEDIAN), LENGTH_SIGMA, size=count)
    return np.clip(np.rint(raw), 1, MAX_SLOTS).astype(np.int64)


def make_texts(
    table: TokenTable,
    rng: np.random.Generator,
    ratings: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64] | None = None,
) -> list[bytes]:
    """One JSON string-body (UTF-8, escaped) per rating in `ratings` (values 1..5).

    `lengths` (word slots per text) is drawn from the log-normal when not given.
    """
    count = len(ratings)
    if count == 0:
        return []
    if lengths is None:
        lengths = draw_lengths(rng, count)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    total = int(ends[-1])
    owner = np.repeat(np.arange(count), lengths)
    slot_rating = ratings[owner] - 1
    # Which noise group (0 html, 1 non-ASCII, 2 JSON escapes) a text uses, or -1.
    flag = rng.random(count)
    noise_kind = np.full(count, -1, dtype=np.int64)
    noise_kind[flag < HTML_TEXT_RATE + NON_ASCII_TEXT_RATE + ESCAPED_TEXT_RATE] = 2
    noise_kind[flag < HTML_TEXT_RATE + NON_ASCII_TEXT_RATE] = 1
    noise_kind[flag < HTML_TEXT_RATE] = 0
    slot_noise = noise_kind[owner]

    base = np.searchsorted(table.filler_cdf, rng.random(total)).astype(np.int64)
    base = np.minimum(base, FILLER_SIZE - 1)
    kind_draw = rng.random(total)
    pick = rng.random(total)
    sentiment = kind_draw < np.maximum(SENTIMENT_RATE, SHORT_TEXT_SENTIMENT / lengths)[owner]
    if sentiment.any():
        cdf = np.cumsum(CATEGORY_MIX, axis=1)[slot_rating[sentiment]]
        category = (rng.random(int(sentiment.sum()))[:, None] > cdf).sum(axis=1)
        category = np.minimum(category, len(CATEGORY_MIX[0]) - 1)
        size = table.category_size[category]
        base[sentiment] = table.category_start[category] + (pick[sentiment] * size).astype(np.int64)
    noisy = (slot_noise >= 0) & (kind_draw > 1.0 - NOISE_SLOT_RATE)
    if noisy.any():
        group = slot_noise[noisy]
        base[noisy] = table.noise_start[group] + (pick[noisy] * table.noise_size[group]).astype(
            np.int64
        )

    punct = rng.random(total)
    suffix = np.zeros(total, dtype=np.int64)
    suffix[punct < 1 / 11] = 1
    suffix[(punct >= 1 / 11) & (punct < 1 / 11 + 1 / 16)] = 2
    suffix[punct > 0.995] = 3
    last = ends - 1
    suffix[last] = np.where(rng.random(count) < 0.15, 3, 1)
    capital = np.zeros(total, dtype=bool)
    capital[1:] = (suffix[:-1] == 1) | (suffix[:-1] == 3)
    capital[starts] = True
    ids = base * _VARIANTS + capital * len(_SUFFIXES) + suffix

    blob = b"".join(table.tokens[ids].tolist())
    offsets = np.concatenate(([0], np.cumsum(table.lengths[ids])))
    begin = offsets[starts].tolist()
    stop = (offsets[ends] - 1).tolist()  # drop the trailing space
    return [blob[a:b] for a, b in zip(begin, stop, strict=True)]

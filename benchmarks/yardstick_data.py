"""The yardstick's data: real review files read once, de-duplicated by cleaned text, and folds.

Every text is the engine's cleaned form (`clean_text`: entities decoded, lowercase a-z0-9
words); duplicates inside a category collapse to one text with the engine's label rule (mode
rating, ties to the smaller; 1-3 stars negative, IMDB 1-4 of 10). A fold's training texts never
include a text of its test set (compared after cleaning).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from engine.config import PreprocessConfig
from engine.preprocess.readers import detect_spec, iter_records, open_binary
from engine.preprocess.records import parse_object, rating_of
from engine.preprocess.text import clean_text

CATEGORIES: dict[str, str] = {
    "instruments": "amazon2014_Musical_Instruments_5.jsonl.gz",
    "phones": "amazon2014_Cell_Phones_and_Accessories_5.head4776.jsonl.gz",
    "fashion": "amazon2018_AMAZON_FASHION_5.jsonl.gz",
    "beauty": "amazon2018_All_Beauty_5.jsonl.gz",
    "appliances": "amazon2018_Appliances_5.jsonl.gz",
    "office": "amazon2018_Office_Products_5.balanced9000.jsonl.gz",
    "fine_food": "amazon_fine_food_reviews.head.jsonl.gz",
    "alexa": "amazon_alexa_reviews.dedup.jsonl.gz",
}
"""Amazon product categories (one file each). Fine Food and Alexa are Amazon reviews of other
product kinds with the same 1-5 star scale, so they are categories like the McAuley files."""
IMDB = "imdb_aclImdb_labeled.jsonl.gz"


@dataclass(frozen=True, slots=True)
class LabelledTexts:
    """Distinct cleaned texts with a 0/1 label and a 1-5 (or 1-10) rating each."""

    texts: list[str]
    labels: list[int]
    ratings: list[int]

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def positive_rate(self) -> float:
        """Share of label 1."""
        return sum(self.labels) / max(1, len(self.labels))

    @property
    def majority_rate(self) -> float:
        """Accuracy of always predicting the more frequent label."""
        p = self.positive_rate
        return max(p, 1 - p)


def read_category(path: Path) -> dict[str, Counter[int]]:
    """Cleaned text → its rating counts, for the usable records of one file."""
    cfg = PreprocessConfig(inputs=[str(path)], output="")
    spec = detect_spec(str(path), cfg)
    out: dict[str, Counter[int]] = defaultdict(Counter)
    for record in iter_records(str(path), cfg, spec):
        if record.text:
            out[record.text][record.rating] += 1
    return dict(out)


SUMMARY_FIELDS = ("summary", "Summary")
"""Where a review's title is (McAuley files; Fine Food); Alexa reviews have none."""


def read_summaries(path: Path) -> list[tuple[str, str, int]]:
    """(cleaned review text, cleaned title, rating) of each usable record that has a title."""
    cfg = PreprocessConfig(inputs=[str(path)], output="")
    spec = detect_spec(str(path), cfg)
    out = []
    with open_binary(str(path)) as fh:
        for line in fh:
            obj = parse_object(line, spec)
            if isinstance(obj, str):
                continue
            title = next((obj[f] for f in SUMMARY_FIELDS if isinstance(obj.get(f), str)), "")
            text, rating = obj.get(spec.text_field), rating_of(obj.get(spec.rating_field), spec)
            if not title or not isinstance(text, str) or isinstance(rating, str):
                continue
            review, cleaned = clean_text(text).decode(), clean_text(title).decode()
            if review and cleaned:
                out.append((review, cleaned, rating))
    return out


def title_counts(
    summaries: list[list[tuple[str, str, int]]], keep_review: set[str] | None, exclude: set[str]
) -> dict[str, Counter[int]]:
    """Rating counts of the titles of reviews in ``keep_review`` (None: all), titles equal to
    a text in ``exclude`` (the test texts) left out: training rows made of review titles."""
    out: dict[str, Counter[int]] = defaultdict(Counter)
    for part in summaries:
        for review, title, rating in part:
            if (keep_review is None or review in keep_review) and title not in exclude:
                out[title][rating] += 1
    return dict(out)


def collapse(counts: dict[str, Counter[int]], negative_max: int) -> LabelledTexts:
    """One row per distinct text: the mode rating (ties to the smaller) and its label."""
    texts, labels, ratings = [], [], []
    for text in sorted(counts):
        c = counts[text]
        best = max(sorted(c), key=lambda r: c[r])  # first of the most frequent = smallest
        texts.append(text)
        ratings.append(best)
        labels.append(int(best > negative_max))
    return LabelledTexts(texts, labels, ratings)


def without_ratings(texts: LabelledTexts, ratings: set[int]) -> LabelledTexts:
    """The texts whose rating is not in ``ratings`` (e.g. {3}: a 1-2 vs 4-5 star training set)."""
    return take_rows(texts, [i for i, r in enumerate(texts.ratings) if r not in ratings])


def take_rows(texts: LabelledTexts, rows: list[int]) -> LabelledTexts:
    """The given rows of ``texts``, in that order."""
    return LabelledTexts(
        [texts.texts[i] for i in rows],
        [texts.labels[i] for i in rows],
        [texts.ratings[i] for i in rows],
    )


def merge(parts: list[dict[str, Counter[int]]], exclude: set[str]) -> dict[str, Counter[int]]:
    """Rating counts of several categories added up, texts in ``exclude`` left out."""
    out: dict[str, Counter[int]] = defaultdict(Counter)
    for part in parts:
        for text, c in part.items():
            if text not in exclude:
                out[text].update(c)
    return dict(out)


def in_domain_test(text: str, fraction: float = 0.1) -> bool:
    """The yardstick's own in-domain test split (a salted hash, so it is independent of the
    engine's held-out split, which uses the unsalted BLAKE2b of the same text)."""
    digest = hashlib.blake2b(b"yardstick:" + text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / float(1 << 64) < fraction


@dataclass(frozen=True, slots=True)
class Fold:
    """Train on ``train``, report on ``test``."""

    name: str
    kind: str
    """loco (leave one category out), imdb (all Amazon → IMDB) or in_domain."""
    train: LabelledTexts
    test: LabelledTexts


def load_categories(data_dir: Path, names: list[str]) -> dict[str, dict[str, Counter[int]]]:
    """Rating counts per cleaned text of each named category."""
    return {name: read_category(data_dir / CATEGORIES[name]) for name in names}


def make_folds(
    data_dir: Path,
    names: list[str],
    kinds: list[str],
    only: list[str] | None = None,
    titles: bool = False,
) -> list[Fold]:
    """The folds asked for: one per left-out category, Amazon → IMDB, in-domain. ``titles``:
    the training reviews' titles are training rows of their own too (never a title of a test
    review, nor one equal to a test text); the test texts stay the review texts."""
    cats = load_categories(data_dir, names)
    heads = {n: read_summaries(data_dir / CATEGORIES[n]) if titles else [] for n in names}
    folds = []
    if "loco" in kinds:
        for name in names:
            if only and name not in only:
                continue
            test = collapse(cats[name], 3)
            exclude = set(test.texts)
            others = [cats[n] for n in names if n != name]
            others += [title_counts([heads[n] for n in names if n != name], None, exclude)]
            train = collapse(merge(others, exclude), 3)
            folds.append(Fold(name, "loco", train, test))
    if "imdb" in kinds:
        imdb = read_category(data_dir / IMDB)
        test = collapse(imdb, 4)
        exclude = set(test.texts)
        parts = [*cats.values(), title_counts(list(heads.values()), None, exclude)]
        train = collapse(merge(parts, exclude), 3)
        folds.append(Fold("imdb", "imdb", train, test))
    if "in_domain" in kinds:
        pooled = collapse(merge(list(cats.values()), set()), 3)
        pick = [in_domain_test(t) for t in pooled.texts]
        if titles:  # the titles of training reviews only: a test review's title is its label
            kept = {t for t, p in zip(pooled.texts, pick, strict=True) if not p}
            tested = {t for t, p in zip(pooled.texts, pick, strict=True) if p}
            extra = collapse(title_counts(list(heads.values()), kept, tested), 3)
            pooled = LabelledTexts(
                pooled.texts + extra.texts,
                pooled.labels + extra.labels,
                pooled.ratings + extra.ratings,
            )
            pick += [False] * len(extra)

        train_rows = [i for i, p in enumerate(pick) if not p]
        test_rows = [i for i, p in enumerate(pick) if p]
        train, test = take_rows(pooled, train_rows), take_rows(pooled, test_rows)
        folds.append(Fold("in_domain", "in_domain", train, test))
    return folds


PROBES = Path(__file__).resolve().parent / "data" / "negation_probes.tsv"
HELDOUT_PROBES = PROBES.with_name("negation_probes_heldout.tsv")
"""A second probe set, written before any change aimed at the probes was tried."""


def negation_probes(path: Path = PROBES) -> LabelledTexts:
    """The labelled negation probes (``label<TAB>text`` lines, ``#`` comments), cleaned."""
    from engine.preprocess.text import clean_text

    texts, labels = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            label, text = line.split("\t", 1)
            texts.append(clean_text(text).decode())
            labels.append(int(label))
    return LabelledTexts(texts, labels, [5 if y else 1 for y in labels])

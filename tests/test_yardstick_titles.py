"""The yardstick's --titles folds: review titles become training rows, never a test review's."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from yardstick_data import CATEGORIES, in_domain_test, make_folds  # noqa: E402


def _write(path: Path, rows: list[tuple[str, str | None, float]]) -> None:
    lines = []
    for text, title, stars in rows:
        record: dict[str, object] = {"reviewText": text, "overall": stars}
        if title is not None:
            record["summary"] = title
        lines.append(json.dumps(record))
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


def test_titles_are_training_rows_of_training_reviews_only(tmp_path: Path) -> None:
    names = ["instruments", "phones"]
    texts = [f"review number {i} of the instruments file" for i in range(200)]
    _write(
        tmp_path / CATEGORIES["instruments"],
        [(t, f"Title {i}: Not bad!", 4.0) for i, t in enumerate(texts)],
    )
    _write(
        tmp_path / CATEGORIES["phones"],
        [("a phone review", "Phone title", 1.0), ("untitled phone review", None, 5.0)],
    )
    plain = {f.name: f for f in make_folds(tmp_path, names, ["loco", "in_domain"])}
    titled = {f.name: f for f in make_folds(tmp_path, names, ["loco", "in_domain"], None, True)}
    for name in plain:
        assert titled[name].test == plain[name].test  # the texts scored do not change
        assert not set(titled[name].train.texts) & set(titled[name].test.texts)
    # leave phones out: the instruments titles join its training rows, labelled by their stars
    extra = set(titled["phones"].train.texts) - set(plain["phones"].train.texts)
    assert extra == {f"title {i} not bad" for i in range(200)}
    assert "phone title" not in titled["phones"].train.texts  # the left-out category's own
    # in-domain: a test review's title would give its label away, so only training reviews'
    train = titled["in_domain"].train
    tested = {i for i, t in enumerate(texts) if in_domain_test(f"{t}")}
    assert tested  # the fixture has test reviews
    for i in range(200):
        assert (f"title {i} not bad" in train.texts) == (i not in tested)


def test_without_ratings_drops_training_rows_of_those_stars_only(tmp_path: Path) -> None:
    from yardstick_data import without_ratings

    names = ["instruments", "phones"]
    stars = [1.0, 2.0, 3.0, 4.0, 5.0, 3.0]
    _write(
        tmp_path / CATEGORIES["instruments"],
        [(f"instrument review {i}", None, s) for i, s in enumerate(stars)],
    )
    _write(tmp_path / CATEGORIES["phones"], [("a phone review", None, 3.0)])
    fold = {f.name: f for f in make_folds(tmp_path, names, ["loco"])}["phones"]
    kept = without_ratings(fold.train, {3})
    assert sorted(kept.ratings) == [1, 2, 4, 5]
    for text, label, rating in zip(kept.texts, kept.labels, kept.ratings, strict=True):
        i = int(text.rsplit(" ", 1)[1])
        assert (stars[i], label) == (rating, int(rating > 3))  # rows stay aligned
    assert fold.test.ratings == [3]  # the left-out category's 3★ text is still scored

"""Synthetic reviews: determinism, size, calibration (measured by parsing), learnability, CLI."""

from __future__ import annotations

import ast
import gzip
import hashlib
import itertools
import json
import math
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from engine.errors import InputError
from engine.synth import generate, parse_size
from engine.synth.generate import DUPLICATE_RATE, TARGET_RATINGS
from tui.cli import main

_WORD = re.compile(r"[a-z0-9']+")


@dataclass
class Parsed:
    """What a tolerant reader finds in a synthetic file."""

    valid: list[tuple[str, int]] = field(default_factory=list)
    bad: int = 0
    literal: int = 0
    bad_kinds: Counter[str] = field(default_factory=Counter)


def _parse(path: Path) -> Parsed:
    opener = gzip.open if path.suffix == ".gz" else open
    out = Parsed()
    with opener(path, "rb") as handle:
        for raw in handle:
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                try:
                    record = ast.literal_eval(raw.decode())
                    out.literal += 1
                except (SyntaxError, ValueError):
                    out.bad += 1
                    out.bad_kinds["broken_json"] += 1
                    continue
            text, rating = record.get("reviewText"), record.get("overall")
            if not isinstance(text, str):
                reason = "missing_text"
            elif not text.strip():
                reason = "empty_text"
            elif not isinstance(rating, float | int):
                reason = "rating_not_numeric"
            elif not 1 <= rating <= 5:
                reason = "rating_out_of_range"
            else:
                out.valid.append((text, int(rating)))
                continue
            out.bad += 1
            out.bad_kinds[reason] += 1
    return out


@pytest.fixture(scope="module")
def medium(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Parsed]:
    path = tmp_path_factory.mktemp("synth") / "medium.jsonl"
    stats = generate(path, 12_000_000, seed=11, malformed_rate=0.02)
    return stats, _parse(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50KB", 50_000),
        ("200MB", 200_000_000),
        ("1GB", 1_000_000_000),
        ("1.5gb", 1_500_000_000),
        ("2GiB", 2 * 1024**3),
        ("4096", 4096),
        (" 3 MB ", 3_000_000),
    ],
)
def test_parse_size_reads_units(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1XB", "-5MB", "0", "0KB", "1..5GB"])
def test_parse_size_rejects_bad_sizes_naming_the_argument(text: str) -> None:
    with pytest.raises(InputError) as info:
        parse_size(text, name="--size")
    assert "--size" in info.value.message


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    first, second, other = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    generate(first, 400_000, seed=5)
    generate(second, 400_000, seed=5)
    generate(other, 400_000, seed=6)
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() != other.read_bytes()


def test_gzip_is_deterministic_and_holds_the_plain_bytes(tmp_path: Path) -> None:
    plain, packed, again = tmp_path / "p.jsonl", tmp_path / "p.jsonl.gz", tmp_path / "q.gz"
    stats = generate(packed, 300_000, seed=2, gzip=True)
    generate(again, 300_000, seed=2, gzip=True)
    generate(plain, 300_000, seed=2)
    assert packed.read_bytes() == again.read_bytes()
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    assert stats["file_bytes"] == packed.stat().st_size < stats["bytes"]


@pytest.mark.parametrize("size", [50_000, 700_000, 3_000_000])
def test_size_is_met_within_one_record_never_exceeded(tmp_path: Path, size: int) -> None:
    path = tmp_path / "s.jsonl"
    stats = generate(path, size, seed=1)
    assert path.stat().st_size == stats["bytes"] <= size
    assert stats["bytes"] >= size * 0.97
    assert not list(tmp_path.glob("*.tmp")), "temporary file left behind"


def test_reported_counts_match_the_parsed_file(medium: tuple[dict[str, Any], Parsed]) -> None:
    stats, parsed = medium
    assert stats["records"] == len(parsed.valid) + parsed.bad
    assert stats["malformed"] == parsed.bad
    assert stats["python_literal"] == parsed.literal
    assert stats["distinct_texts"] == len({text for text, _ in parsed.valid})
    histogram = Counter(rating for _, rating in parsed.valid)
    assert stats["ratings"] == {str(r): histogram[r] for r in range(1, 6)}
    by_kind = stats["malformed_by_kind"]
    assert {kind: n for kind, n in by_kind.items() if n} == dict(parsed.bad_kinds)


def test_duplicate_rate_matches_the_real_corpus(medium: tuple[dict[str, Any], Parsed]) -> None:
    _, parsed = medium
    texts = Counter(text for text, _ in parsed.valid)
    rate = 1 - len(texts) / len(parsed.valid)
    assert abs(rate - DUPLICATE_RATE) < 0.02
    counts = sorted(texts.values(), reverse=True)
    assert counts[0] >= 20 * (len(parsed.valid) / len(texts)), "popularity is not heavy-tailed"
    assert sum(1 for c in counts if c == 1) > 0.05 * len(counts), "no singletons"
    by_text: dict[str, set[int]] = {}
    for text, rating in parsed.valid:
        by_text.setdefault(text, set()).add(rating)
    assert any(len(r) > 1 for r in by_text.values()), "copies never disagree on the rating"


def test_rating_histogram_matches_the_real_corpus(
    medium: tuple[dict[str, Any], Parsed],
) -> None:
    _, parsed = medium
    histogram = Counter(rating for _, rating in parsed.valid)
    shares = np.array([histogram[r] for r in range(1, 6)]) / len(parsed.valid)
    assert np.all(np.abs(shares - TARGET_RATINGS) < 0.015), shares


def test_malformed_rate_and_every_kind(medium: tuple[dict[str, Any], Parsed]) -> None:
    stats, parsed = medium
    total = stats["records"]
    assert isinstance(total, int)
    assert abs(parsed.bad / total - 0.02) < 4 * math.sqrt(0.02 * 0.98 / total)
    assert set(parsed.bad_kinds) == {
        "broken_json",
        "missing_text",
        "rating_out_of_range",
        "rating_not_numeric",
        "empty_text",
    }
    assert parsed.literal > 0


def test_zero_malformed_rate_gives_only_good_lines(tmp_path: Path) -> None:
    path = tmp_path / "clean.jsonl"
    stats = generate(path, 1_500_000, seed=4, malformed_rate=0.0)
    parsed = _parse(path)
    assert parsed.bad == stats["malformed"] == 0
    path.read_bytes().decode("utf-8")  # valid UTF-8 throughout


def test_lengths_and_noise_resemble_amazon_2014(medium: tuple[dict[str, Any], Parsed]) -> None:
    _, parsed = medium
    words = np.array([len(text.split()) for text, _ in parsed.valid])
    # Musical Instruments 2014: median 54, p90 194, p99 545 words.
    assert 45 <= np.median(words) <= 65
    assert 150 <= np.percentile(words, 90) <= 260
    assert 400 <= np.percentile(words, 99) <= 800
    distinct = {text for text, _ in parsed.valid}
    entities = sum(1 for t in distinct if re.search(r"&(#\d+|[a-z]+);", t)) / len(distinct)
    non_ascii = sum(1 for t in distinct if not t.isascii()) / len(distinct)
    assert 0.02 < entities < 0.10
    assert 0.01 < non_ascii < 0.08


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def test_sentiment_is_learnable_by_naive_bayes(medium: tuple[dict[str, Any], Parsed]) -> None:
    _, parsed = medium
    first: dict[str, int] = {}
    for text, rating in parsed.valid:
        first.setdefault(text, rating)
    train: list[tuple[list[str], int]] = []
    test: list[tuple[list[str], int]] = []
    for text, rating in first.items():
        split = test if hashlib.md5(text.encode()).digest()[0] < 52 else train
        split.append((_tokens(text), int(rating >= 4)))
    # Binarised multinomial naive Bayes over words seen in at least 5 training texts.
    counts = [Counter[str](), Counter[str]()]
    docs = [0, 0]
    for tokens, label in train:
        counts[label].update(set(tokens))
        docs[label] += 1
    vocab = {w for w, c in (counts[0] + counts[1]).most_common(10_000) if c >= 5}
    totals = [sum(c[w] for w in vocab) + len(vocab) for c in counts]
    llr = {
        w: math.log((counts[1][w] + 1) / totals[1]) - math.log((counts[0][w] + 1) / totals[0])
        for w in vocab
    }
    prior = math.log(docs[1] / docs[0])
    hits = sum(
        int((prior + sum(llr.get(w, 0.0) for w in set(tokens)) > 0) == bool(label))
        for tokens, label in test
    )
    positives = sum(label for _, label in test)
    accuracy = hits / len(test)
    majority = max(positives, len(test) - positives) / len(test)
    assert len(test) > 200
    assert accuracy > majority + 0.05, (accuracy, majority)
    # Negations carry sentiment: "not good" and the like are much commoner in negative texts.
    negators = {"not", "no", "never", "isn't", "wasn't", "doesn't", "don't", "didn't"}
    praise = {"good", "great", "love", "happy", "perfect", "excellent"}
    negated = [0, 0]
    for tokens, label in train:
        negated[label] += sum(a in negators and b in praise for a, b in itertools.pairwise(tokens))
    assert negated[0] / docs[0] > 3 * negated[1] / docs[1], (negated, docs)


def test_filler_vocabulary_is_large_and_zipfian(medium: tuple[dict[str, Any], Parsed]) -> None:
    _, parsed = medium
    words = Counter(w for text in {t for t, _ in parsed.valid} for w in _tokens(text))
    assert len(words) > 10_000
    ranked = np.array(sorted(words.values(), reverse=True), dtype=np.float64)
    slope = np.polyfit(np.log(np.arange(10, 2000)), np.log(ranked[9:1999]), 1)[0]
    assert -1.4 < slope < -0.6


def test_cli_writes_the_file_and_prints_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cli.jsonl.gz"
    code = main(["synth", "--output", str(path), "--size", "120KB", "--seed", "3", "--gzip",
                 "--malformed-rate", "0.01", "--json"])  # fmt: skip
    assert code == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["file_bytes"] == path.stat().st_size
    assert stats["bytes"] == len(gzip.decompress(path.read_bytes())) <= 120_000
    assert stats["seed"] == 3


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--size", "big"], "--size"),
        (["--size", "1MB", "--malformed-rate", "1.5"], "--malformed-rate"),
    ],
)
def test_cli_rejects_bad_arguments_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    code = main(["synth", "--output", str(tmp_path / "x.jsonl"), *argv])
    assert code == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_cli_names_a_missing_output_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["synth", "--output", str(tmp_path / "no" / "x.jsonl"), "--size", "10KB"])
    assert code == 2
    assert str(tmp_path / "no") in capsys.readouterr().err


def test_engine_synth_loads_no_ui_or_cloud_packages() -> None:
    code = "import sys, engine.synth; print(' '.join(sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    )
    names = {name.split(".")[0] for name in loaded.stdout.split()}
    assert not names & {"textual", "asyncssh", "boto3", "torch", "rich"}

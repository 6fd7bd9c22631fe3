"""Preprocessing presets: every word kept by default; `stopwords` drops stopwords but keeps
negations; `seed` reproduces the seed's rules exactly."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from engine.config import PreprocessConfig
from engine.errors import ConfigError
from engine.preprocess.cli import add_arguments, config_from_args
from engine.preprocess.text import NEGATIONS, clean_text, content_words, stopwords
from tests.preprocess.conftest import review, write_lines

Run = Callable[..., dict[str, Any]]


def seed_rules() -> frozenset[bytes]:
    """The seed's stopwords, rebuilt from first principles: the shipped NLTK English list
    (131 words) plus product/would/get, apostrophes removed, nothing taken out."""
    text = resources.files("engine.preprocess").joinpath("nltk_stopwords_english.txt")
    words = [*text.read_text(encoding="utf-8").split(), "product", "would", "get"]
    return frozenset(w.replace("'", "").encode() for w in words)


@pytest.fixture(autouse=True)
def _no_nltk_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Use the shipped NLTK list whatever is installed on this machine."""
    import engine.preprocess.text as text

    monkeypatch.setattr(text, "_nltk_words", lambda: None)
    text.stopwords.cache_clear()
    yield
    text.stopwords.cache_clear()


def test_presets_resolve_negations() -> None:
    assert PreprocessConfig(inputs=["x"], output="o").negations_kept is True
    assert PreprocessConfig(inputs=["x"], output="o", preset="seed").negations_kept is False
    over = PreprocessConfig(inputs=["x"], output="o", preset="seed", keep_negations=True)
    assert over.negations_kept is True
    with pytest.raises(ConfigError, match="preset"):
        PreprocessConfig(inputs=["x"], output="o", preset="bert")  # type: ignore[arg-type]
    every = PreprocessConfig(inputs=["x"], output="o")
    assert every.preset == "default" and every.negations_kept and every.stopwords_kept
    for preset in ("stopwords", "seed"):
        cfg = PreprocessConfig(inputs=["x"], output="o", preset=preset)  # type: ignore[arg-type]
        assert cfg.stopwords_kept is False


def test_default_removes_no_stopword() -> None:
    assert stopwords(True, True) == frozenset()
    # negations dropped on request (the override), every other word kept
    only_negations = stopwords(False, True)
    assert only_negations and only_negations <= {w.encode() for w in NEGATIONS}
    assert {b"not", b"no", b"nor"} <= only_negations
    text = clean_text("But it's not very good, too small and only one")
    assert content_words(text, stopwords(True, True)) == text.split()
    assert content_words(text, stopwords(False, True)) == [w for w in text.split() if w != b"not"]
    # the other presets are unchanged by the new switch's default
    assert stopwords(False) == stopwords(False, False) == seed_rules()


def test_seed_stopwords_are_the_old_list_exactly() -> None:
    seed = stopwords(False)
    assert seed == seed_rules()
    assert {b"not", b"no", b"nor", b"dont", b"wouldnt"} <= seed
    assert stopwords(True) == seed - {w.encode() for w in NEGATIONS}


def test_default_keeps_negations_where_seed_dropped_them() -> None:
    text = clean_text("I would NOT recommend this product, it isn't good and don't buy")
    assert content_words(text, stopwords(False)) == [b"recommend", b"good", b"buy"]
    assert content_words(text, stopwords(True)) == [
        b"not",
        b"recommend",
        b"isnt",
        b"good",
        b"dont",
        b"buy",
    ]


def test_seed_preset_dataset_matches_the_old_rules(tmp_path: Path, preprocess: Run) -> None:
    texts = ["Not good, don't buy", "would not recommend this product", "no no no", "good"]
    path = write_lines(tmp_path / "s.jsonl", [review(t, 1 + 4 * (t == "good")) for t in texts])
    seed = preprocess([path], test_fraction=0.0, preset="seed")
    assert set(seed["vocab"]["settings"]["stopwords"]) == {w.decode() for w in seed_rules()}
    assert seed["vocab"]["settings"]["keep_negations"] is False
    assert seed["vocab"]["settings"]["preset"] == "seed"
    assert seed["vocab"]["itos"][2:] == ["good", "buy", "recommend"]  # "no no no": only stopwords
    assert seed["stats"]["skipped"]["only_stopwords"] == 1
    default = preprocess([path], test_fraction=0.0, preset="stopwords")
    assert {"not", "dont", "no"} <= set(default["vocab"]["itos"])
    assert default["stats"]["skipped"]["only_stopwords"] == 0
    assert default["vocab"]["settings"]["keep_negations"] is True
    assert default["vocab"]["settings"]["keep_stopwords"] is False
    assert seed["vocab"]["settings"]["keep_stopwords"] is False


def test_default_preset_dataset_keeps_every_word(tmp_path: Path, preprocess: Run) -> None:
    texts = ["this is not too good but ok", "would not recommend this product", "no no no", "!!"]
    path = write_lines(tmp_path / "a.jsonl", [review(t, 1 + 4 * ("ok" in t)) for t in texts])
    every = preprocess([path], test_fraction=0.0)
    settings = every["vocab"]["settings"]
    assert settings["preset"] == "default" and settings["stopwords"] == []
    assert settings["keep_negations"] is True and settings["keep_stopwords"] is True
    words = {w for t in texts for w in clean_text(t).decode().split()}
    assert set(every["vocab"]["itos"][2:]) == words
    assert every["stats"]["skipped"]["only_stopwords"] == 0
    assert every["stats"]["skipped"]["empty_text"] == 1  # "!!" is still skipped
    assert every["stats"]["kept"] == 3
    # a sequence holds every word of its text, in order
    itos = every["vocab"]["itos"]
    rows = {
        " ".join(itos[i] for i in row[:n])
        for row, n in zip(every["train/tokens"], every["train/lengths"], strict=True)
    }
    assert rows == {clean_text(t).decode() for t in texts[:3]}


def test_cli_flags() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    base = ["-i", "a.jsonl", "-o", "out"]
    assert config_from_args(parser.parse_args(base)).negations_kept is True
    assert config_from_args(parser.parse_args([*base, "--preset", "seed"])).negations_kept is False
    dropped = config_from_args(parser.parse_args([*base, "--drop-negations"]))
    assert dropped.negations_kept is False and dropped.preset == "default"
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--keep-negations", "--drop-negations"])
    assert config_from_args(parser.parse_args(base)).stopwords_kept
    dropping = config_from_args(parser.parse_args([*base, "--preset", "stopwords"]))
    assert not dropping.stopwords_kept and dropping.negations_kept


def test_seed_reproduction_profile_uses_the_seed_rules() -> None:
    from remote.profile import load_profile

    root = Path(__file__).resolve().parents[2]
    seed = load_profile(root / "profiles" / "aws-seed-g3.yaml").preprocess
    cfg = seed.to_config(["s3://bucket/x.json.gz"], "out")
    assert cfg.preset == "seed" and cfg.negations_kept is False
    local = load_profile(root / "profiles" / "local.yaml").preprocess.to_config(["x"], "out")
    assert local.preset == "default" and local.negations_kept is True

"""Lexicon phrases (train.lexicon_phrases): what a step's phrases hold, how they join the batch,
when a run has none, and a real training run that learns a litote its data never shows."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine.config import ModelConfig, TrainConfig
from engine.errors import ConfigError
from engine.sentiment.lexicon import NEGATED_FACTOR, lexicon
from engine.sentiment.lexicon_phrases import WIDTH, LexiconPhrases, phrases_for
from tests.train.conftest import train_on_reviews

WORDS = ["", "<unk>", "not", "never", "bad", "good", "great", "cable", "the", "at", "fine"]


def test_a_steps_phrases_are_lexicon_words_alone_or_after_a_negation() -> None:
    phrases = LexiconPhrases(WORDS, 0.5, seed=0, rank=0)
    assert phrases.usable
    assert sorted(WORDS[i] for i in phrases.word_ids.tolist()) == ["bad", "good", "great"]
    tokens, lengths, target = phrases.draw(400)
    assert tokens.shape == (400, WIDTH) and set(lengths.tolist()) == {1, 2, 3}
    table = lexicon()
    for row, n, p in zip(tokens.tolist(), lengths.tolist(), target.tolist(), strict=True):
        words = [WORDS[i] for i in row]
        assert all(w == "" for w in words[n:])  # right-padded
        valence = table[words[n - 1]]  # the lexicon word comes last
        if n == 1:
            assert p == pytest.approx(torch.sigmoid(torch.tensor(valence)).item())
        else:
            assert words[0] in ("not", "never") and (n == 2 or words[1] in ("the", "at"))
            flipped = torch.sigmoid(torch.tensor(valence * NEGATED_FACTOR)).item()
            assert p == pytest.approx(flipped)
            assert (p > 0.5) == (valence < 0)  # "not bad" reads positive, "never good" negative
    again, _, _ = LexiconPhrases(WORDS, 0.5, seed=0, rank=0).draw(400)
    other, _, _ = LexiconPhrases(WORDS, 0.5, seed=0, rank=1).draw(400)
    assert torch.equal(tokens, again) and not torch.equal(tokens, other)


def test_a_seeds_phrases_are_the_same_in_every_process() -> None:
    """A run resumed, or a yardstick repeated, draws the same phrases: str hashes are salted
    per process, so the generator's seed must not depend on one."""
    code = (
        "from engine.sentiment.lexicon_phrases import LexiconPhrases as L; "
        f"print(L({WORDS!r}, 0.5, seed=3, rank=1).draw(64)[0].tolist())"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": salt}, cwd=Path(__file__).parents[2],
        ).stdout
        for salt in ("1", "2")
    ]  # fmt: skip
    assert runs[0] == runs[1] and runs[0].startswith("[[")


def test_phrases_join_the_batch_as_extra_rows_of_its_dtype() -> None:
    phrases = LexiconPhrases(WORDS, 2.0, seed=0, rank=0)
    tokens = torch.tensor([[5, 7], [4, 0]], dtype=torch.int32)
    lengths = torch.tensor([2, 1])
    joined, joined_len, target = phrases.extend(tokens, lengths)
    assert joined.dtype == torch.int32 and joined.shape[1] == WIDTH
    assert joined[:2, :2].tolist() == tokens.tolist() and not joined[:2, 2:].any()
    assert joined_len[:2].tolist() == [2, 1] and len(joined) == 2 + len(target)
    logits = torch.zeros(len(target))
    expected = torch.nn.functional.binary_cross_entropy_with_logits(logits, target)
    assert phrases.loss(logits, target).item() == pytest.approx(2.0 * expected.item())


def test_no_phrases_when_off_or_when_the_vocabulary_cannot_build_them(tmp_path: Path) -> None:
    (tmp_path / "vocab.json").write_text(json.dumps({"itos": WORDS}))
    cfg = TrainConfig(data_dir=str(tmp_path), run_dir=str(tmp_path / "run"))
    assert phrases_for(cfg, 0) is None  # off by default
    cfg.lexicon_phrases = 0.5
    assert phrases_for(cfg, 0) is not None
    (tmp_path / "vocab.json").write_text(json.dumps({"itos": ["", "<unk>", "cable", "not"]}))
    assert phrases_for(cfg, 0) is None  # no lexicon word
    with pytest.raises(ConfigError, match=r"train\.lexicon_phrases"):
        TrainConfig(data_dir="d", run_dir="r", lexicon_phrases=-1.0)


@pytest.mark.slow
def test_a_run_with_phrases_reads_a_litote_its_data_never_shows(tmp_path: Path) -> None:
    """Every "not" of the training texts is in a negative review; "not bad" never occurs.
    Without phrases the run reads "not bad" as negative; with them, positive."""
    from engine.sentiment.evaluate import load_run, predict_proba

    rng = random.Random(0)
    reviews = []
    for i in range(600):
        if rng.random() < 0.5:
            reviews.append((f"great cable {i % 41} works, love it", True))
        else:
            pick = rng.choice(["bad cable", "not working", "does not charge", "awful, not good"])
            reviews.append((f"{pick} {i % 41} item", False))
    model = ModelConfig(hidden=8, embedding_dim=8, ngram_buckets=4096, init_embeddings="none")
    scores = {}
    for weight in (0.0, 1.0):
        folder = tmp_path / f"w{weight}"
        folder.mkdir()
        _, run, summary = train_on_reviews(folder, reviews, model, 4, lexicon_phrases=weight)
        assert summary["accuracy"] > 0.9  # the phrases do not spoil the task itself
        scores[weight] = predict_proba(load_run(run), ["not bad", "not bad at all"])
    assert (scores[0.0] < 0.5).all()
    assert (scores[1.0] > 0.5).all()

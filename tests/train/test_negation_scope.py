"""Negation scope of the wide path (model.negation_scope): the marking rule, the feature rows,
model.json round trips, old models unchanged, and a real training run that uses it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from engine.config import ModelConfig
from engine.errors import ConfigError
from engine.sentiment.model import ModelShape, WideNgrams, build_model, model_for, resolve_spec
from engine.sentiment.negation import SCOPE_CLAUSE, SCOPE_NEGATIONS, negated_mask, scope_ids
from tests.train.conftest import train_on_reviews

WORDS = ["", "<unk>", "not", "bad", "at", "all", "but", "good", "never", "again", "buy", "no"]
ID = {w: i for i, w in enumerate(WORDS)}


def reference_marks(words: list[str], scope: int) -> list[bool]:
    """The rule as text marking states it (benchmarks/linear_negation_scope.py's loop)."""
    marks, left = [], 0
    for word in words:
        if word in SCOPE_NEGATIONS:
            marks.append(False)
            left = scope
        elif word in SCOPE_CLAUSE:
            marks.append(False)
            left = 0
        else:
            marks.append(left > 0)
            left = max(0, left - 1)
    return marks


def _mask(texts: list[list[str]], scope: int) -> list[list[bool]]:
    width = max(len(t) for t in texts)
    tokens = torch.zeros((len(texts), width), dtype=torch.long)
    for row, text in enumerate(texts):
        tokens[row, : len(text)] = torch.tensor([ID[w] for w in text])
    neg, clause = scope_ids(WORDS)
    mask = negated_mask(tokens, scope, torch.tensor(neg), torch.tensor(clause))
    return [mask[row, : len(text)].tolist() for row, text in enumerate(texts)]


def test_the_mask_marks_the_words_after_a_negation_up_to_a_clause_word() -> None:
    assert _mask([["not", "bad", "at", "all", "good"]], 3) == [[False, True, True, True, False]]
    assert _mask([["not", "bad", "but", "good"]], 3) == [[False, True, False, False]]
    assert _mask([["never", "buy", "no", "bad", "good"]], 1) == [[False, True, False, True, False]]
    assert _mask([["good", "bad"]], 3) == [[False, False]]


def test_the_mask_equals_the_text_marking_rule_on_random_texts() -> None:
    rng = random.Random(3)
    for scope in (1, 2, 3, 5, 9):
        texts = [[rng.choice(WORDS[2:]) for _ in range(rng.randint(1, 14))] for _ in range(60)]
        assert _mask(texts, scope) == [reference_marks(t, scope) for t in texts]


def test_scope_ids_come_from_the_vocabulary() -> None:
    neg, clause = scope_ids(WORDS)
    assert [WORDS[i] for i in neg] == ["not", "never", "no"]
    assert [WORDS[i] for i in clause] == ["but"]


def _wide(scope: int) -> WideNgrams:
    neg, clause = scope_ids(WORDS)
    wide = WideNgrams(len(WORDS), buckets=1000, negation=(scope, neg, clause))
    torch.manual_seed(0)
    with torch.no_grad():
        wide.weight.weight.normal_()
    return wide


def test_negated_words_have_their_own_rows_and_bigrams() -> None:
    wide, plain = _wide(3), _wide(0)
    v = len(WORDS)
    assert wide.weight.num_embeddings == 2 * v + 1000 and plain.weight.num_embeddings == v + 1000
    text = torch.tensor([[ID["not"], ID["bad"], ID["good"]]])
    rows, mask = wide.ids(text, torch.tensor([3]))
    assert mask.all()
    assert rows[0, :3].tolist() == [ID["not"], v + ID["bad"], v + ID["good"]]
    bad = torch.tensor([[ID["good"], ID["bad"]]])
    bad_rows, _ = wide.ids(bad, torch.tensor([2]))
    assert bad_rows[0, 1] == ID["bad"]  # "bad" outside a scope: the plain row
    assert all(2 * v <= int(r) < 2 * v + 1000 for r in rows[0, 3:])  # bigrams after the unigrams
    # with no negation in the text the two layouts give the same unigram rows
    plain_rows, _ = plain.ids(bad, torch.tensor([2]))
    assert plain_rows[0, :2].tolist() == bad_rows[0, :2].tolist()


def test_padding_past_the_length_counts_nothing_with_a_scope() -> None:
    wide = _wide(3)
    text = torch.tensor([[ID["not"], ID["bad"], ID["good"], 0, 0]])
    longer = torch.tensor([[ID["not"], ID["bad"], ID["good"], ID["not"], ID["bad"]]])
    with torch.no_grad():
        assert torch.allclose(wide(text, torch.tensor([3])), wide(longer, torch.tensor([3])))


def test_resolve_needs_a_wide_path_and_records_the_ids() -> None:
    spec = resolve_spec(ModelConfig(negation_scope=3), len(WORDS), words=WORDS)
    assert spec.negation_scope == 3 and spec.negation_ids == (2, 8, 11)
    assert spec.clause_ids == (6,)
    with pytest.raises(ConfigError, match=r"needs model\.ngram_buckets"):
        resolve_spec(ModelConfig(preset="seed", negation_scope=3), len(WORDS), words=WORDS)
    with pytest.raises(ConfigError, match="negation_scope = -1"):
        resolve_spec(ModelConfig(negation_scope=-1), len(WORDS), words=WORDS)
    assert resolve_spec(ModelConfig(negation_scope=0), len(WORDS)).negation_ids == ()


def test_model_json_round_trip_rebuilds_the_same_model() -> None:
    spec = resolve_spec(ModelConfig(negation_scope=2, ngram_buckets=64), len(WORDS), words=WORDS)
    back = ModelShape.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert back == spec
    torch.manual_seed(0)
    first = build_model(spec).eval()
    second = build_model(back).eval()
    second.load_state_dict(first.state_dict())
    assert first.wide is not None
    with torch.no_grad():
        first.wide.weight.weight.normal_()
        second.wide.weight.weight.copy_(first.wide.weight.weight)
        tokens = torch.tensor([[ID["not"], ID["bad"], ID["at"], ID["all"]]])
        assert torch.equal(first(tokens, torch.tensor([4])), second(tokens, torch.tensor([4])))


def test_an_old_model_json_loads_without_a_scope() -> None:
    old = resolve_spec(ModelConfig(), len(WORDS)).to_dict()
    for key in ("negation_scope", "negation_ids", "clause_ids"):
        del old[key]
    spec = ModelShape.from_dict(old)
    assert spec.negation_scope == 0
    wide = build_model(spec).wide
    assert wide is not None and wide.weight.num_embeddings == len(WORDS) + spec.ngram_buckets


def test_model_for_reads_the_datasets_vocabulary(tmp_path: Path) -> None:
    (tmp_path / "vocab.json").write_text(json.dumps({"itos": WORDS}))
    cfg = ModelConfig(negation_scope=3, init_embeddings="none")  # (no dataset.h5 to read)
    spec, model, _ = model_for(cfg, len(WORDS), str(tmp_path), 0)
    assert spec.negation_ids == (2, 8, 11)
    assert model.wide is not None and model.wide.scope == 3


@pytest.mark.slow
def test_a_trained_run_learns_negated_words_and_predict_reloads_it(tmp_path: Path) -> None:
    """Preprocess real text, train with a scope, reload the run as `sentitop predict` does."""
    from engine.sentiment.evaluate import load_run, predict_proba

    rng = random.Random(0)
    reviews = []
    for i in range(800):
        pos = rng.random() < 0.5
        flip = rng.random() < 0.5  # half the texts say it through a negation
        word = ("bad" if pos else "good") if flip else ("good" if pos else "bad")
        reviews.append(
            (f"{'not really ' if flip else ''}{word} cable {i} item number {i % 37}", pos)
        )
    model = ModelConfig(hidden=8, embedding_dim=8, ngram_buckets=4096, negation_scope=3)
    data, run, summary = train_on_reviews(tmp_path, reviews, model, epochs=6)
    assert summary["accuracy"] > 0.9
    saved = json.loads((run / "model.json").read_text())
    words = json.loads((data / "vocab.json").read_text())["itos"]
    assert saved["negation_scope"] == 3 and [words[i] for i in saved["negation_ids"]] == ["not"]
    loaded = load_run(run)
    wide = loaded.model.wide
    assert wide is not None and wide.scope == 3
    v, good, bad = len(words), words.index("good"), words.index("bad")
    weights = wide.weight.weight.detach()[:, 0]
    assert weights[v + good] < 0 < weights[good]  # "not … good" learned apart from "good"
    assert weights[v + bad] > 0 > weights[bad]
    proba = predict_proba(loaded, ["not really good cable", "not really bad cable"])
    assert proba[0] < 0.5 < proba[1]


def test_the_default_preset_has_a_scope_that_goes_with_its_wide_path() -> None:
    spec = resolve_spec(ModelConfig(), len(WORDS), words=WORDS)
    assert spec.negation_scope == 3 and spec.negation_ids == (2, 8, 11)
    assert resolve_spec(ModelConfig(ngram_buckets=0), len(WORDS), words=WORDS).negation_scope == 0
    assert resolve_spec(ModelConfig(negation_scope=0), len(WORDS), words=WORDS).negation_ids == ()
    assert resolve_spec(ModelConfig(preset="seed"), len(WORDS), words=WORDS).negation_scope == 0

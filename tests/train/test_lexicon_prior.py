"""Lexicon prior (model.lexicon_prior, model.lexicon_tokens): the shipped lexicon, the features with
and without a negation, the config rules, saved runs reloading it, and a real training run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from engine.config import ModelConfig
from engine.errors import ConfigError
from engine.preprocess.text import clean_text
from engine.sentiment.lexicon import (
    NEGATED_FACTOR,
    TOKEN_FEATURES,
    lexicon,
    lexicon_features,
    token_lexicon_features,
    valences,
)
from engine.sentiment.model import ModelShape, build_model, model_for, resolve_spec
from engine.sentiment.negation import negated_mask, scope_ids
from tests.train.conftest import train_on_reviews

WORDS = ["", "<unk>", "not", "bad", "at", "all", "but", "good", "great", "cable", "no"]
ID = {w: i for i, w in enumerate(WORDS)}


def _features(texts: list[list[str]], scope: int = 3) -> torch.Tensor:
    width = max(len(t) for t in texts)
    tokens = torch.zeros((len(texts), width), dtype=torch.long)
    for row, text in enumerate(texts):
        tokens[row, : len(text)] = torch.tensor([ID[w] for w in text])
    lengths = torch.tensor([len(t) for t in texts])
    inside = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)
    neg, clause = scope_ids(WORDS)
    negated = None
    if scope:
        negated = negated_mask(tokens, scope, torch.tensor(neg), torch.tensor(clause))
    return lexicon_features(tokens, inside, negated, torch.tensor(valences(WORDS)))


def test_the_shipped_lexicon_is_in_the_cleaned_spelling_and_knows_common_words() -> None:
    table = lexicon()
    assert len(table) > 7000
    assert table["bad"] < 0 < table["good"] and table["great"] > table["good"]
    assert table["disappointed"] < 0 and table["regret"] < 0
    assert all(clean_text(word).decode() == word for word in table)  # e.g. "dont", no "don't"
    assert all(-4.0 <= value <= 4.0 for value in table.values())
    assert valences(["good", "no-such-word", ""]) == [table["good"], 0.0, 0.0]


def test_a_negation_turns_a_negative_word_positive_and_padding_counts_nothing() -> None:
    bad, not_bad, not_bad_at_all, padded = _features(
        [["bad"], ["not", "bad"], ["not", "bad", "at", "all"], ["bad", "cable"]]
    )
    assert bad[0] < 0 < not_bad[0]  # the normalised sum changes sign
    assert bad[2] > 0 == bad[1] and not_bad[1] > 0 == not_bad[2]  # the shares swap
    assert torch.allclose(not_bad, not_bad_at_all)  # function words have no valence
    assert torch.allclose(bad, padded)  # "cable" is not listed
    without_scope = _features([["not", "bad"]], scope=0)[0]
    assert without_scope[0] < 0  # no scope, no flip
    but = _features([["not", "good", "but", "bad"]])[0]
    assert but[0] < 0  # the clause word ends the scope: "bad" stays negative
    assert torch.all(_features([["cable"]])[0] == 0)  # no listed word: all zero, no NaN


def test_the_prior_is_in_the_default_preset_and_goes_with_its_wide_path() -> None:
    assert resolve_spec(ModelConfig(), len(WORDS), words=WORDS).lexicon_prior
    assert not resolve_spec(ModelConfig(lexicon_prior=False), len(WORDS)).lexicon_prior
    assert not resolve_spec(ModelConfig(ngram_buckets=0), len(WORDS)).lexicon_prior
    assert not resolve_spec(ModelConfig(preset="seed"), len(WORDS)).lexicon_prior
    with pytest.raises(ConfigError, match=r"lexicon_prior .* needs model\.ngram_buckets"):
        resolve_spec(ModelConfig(preset="seed", lexicon_prior=True), len(WORDS))
    plain = build_model(resolve_spec(ModelConfig(lexicon_prior=False), len(WORDS)))
    assert plain.wide is not None and plain.wide.lexicon is None
    assert not any("valence" in key or "lexicon" in key for key in plain.state_dict())


def test_model_for_looks_the_datasets_words_up_and_a_saved_model_reloads_them(
    tmp_path: Path,
) -> None:
    (tmp_path / "vocab.json").write_text(json.dumps({"itos": WORDS}))
    cfg = ModelConfig(lexicon_prior=True, ngram_buckets=64, init_embeddings="none")  # no dataset.h5
    spec, model, _ = model_for(cfg, len(WORDS), str(tmp_path), 0)
    assert model.wide is not None and model.wide.lexicon is not None
    assert model.wide.valence.tolist() == pytest.approx(valences(WORDS))
    with torch.no_grad():
        model.wide.lexicon.weight.fill_(1.0)
    state = model.state_dict()
    assert "wide.valence" in state  # saved with the weights: model.pt needs no lexicon file
    back = ModelShape.from_dict(json.loads(json.dumps(spec.to_dict())))
    reloaded = build_model(back)  # as load_run builds it: valences zero until loaded
    assert reloaded.wide is not None and not reloaded.wide.valence.any()
    reloaded.load_state_dict(state)
    tokens = torch.tensor([[ID["not"], ID["bad"], ID["cable"]]])
    model.eval(), reloaded.eval()
    with torch.no_grad():
        assert torch.equal(model(tokens, torch.tensor([3])), reloaded(tokens, torch.tensor([3])))
        assert reloaded.wide(tokens, torch.tensor([3])) > 0  # "not bad" scores positive


def test_an_old_model_json_loads_without_the_prior() -> None:
    old = resolve_spec(ModelConfig(), len(WORDS)).to_dict()
    del old["lexicon_prior"]
    wide = build_model(ModelShape.from_dict(old)).wide
    assert wide is not None and wide.lexicon is None


@pytest.mark.slow
def test_a_trained_run_learns_to_trust_the_prior_and_predict_reloads_it(tmp_path: Path) -> None:
    """Preprocess text whose labels follow the lexicon, train with the prior, reload the run."""
    from engine.sentiment.evaluate import load_run, predict_proba

    rng = random.Random(0)
    table = lexicon()
    positive = [w for w, v in sorted(table.items()) if v >= 2.0][:60]
    negative = [w for w, v in sorted(table.items()) if v <= -2.0][:60]
    reviews = []
    for i in range(600):
        pos = rng.random() < 0.5
        word = rng.choice(positive if pos else negative)
        reviews.append((f"the {word} cable {i} item number {i % 37}", pos))
    model = ModelConfig(hidden=8, embedding_dim=8, ngram_buckets=4096, lexicon_prior=True)
    _, run, summary = train_on_reviews(tmp_path, reviews, model, epochs=4)
    assert summary["accuracy"] > 0.9
    assert json.loads((run / "model.json").read_text())["lexicon_prior"] is True
    loaded = load_run(run)
    wide = loaded.model.wide
    assert wide is not None and wide.lexicon is not None
    assert wide.lexicon.weight[0, 0] > 0  # a higher normalised valence means more positive
    proba = predict_proba(loaded, [f"the {positive[0]} cable", f"the {negative[0]} cable"])
    assert proba[0] > 0.5 > proba[1]


def test_token_features_mark_the_negated_words_and_flip_their_valence() -> None:
    tokens = torch.tensor([[ID["not"], ID["bad"], ID["cable"], 0], [ID["good"], 0, 0, 0]])
    neg, clause = scope_ids(WORDS)
    negated = negated_mask(tokens, 3, torch.tensor(neg), torch.tensor(clause))
    feats = token_lexicon_features(tokens, negated, torch.tensor(valences(WORDS)))
    assert feats.shape == (2, 4, TOKEN_FEATURES)
    bad, good = lexicon()["bad"], lexicon()["good"]
    assert feats[0, 1].tolist() == pytest.approx([bad / 4, 1.0, bad / 4 * NEGATED_FACTOR])
    assert feats[0, 1, 2] > 0  # "not bad": the occurrence reads positive
    assert feats[1, 0].tolist() == pytest.approx([good / 4, 0.0, good / 4])
    assert feats[0, 2, 1] == 1.0 and feats[0, 2, 0] == 0  # "cable": negated, no valence
    assert not feats[1, 1:].any()  # padding: nothing


def test_lexicon_tokens_feed_the_lstm_and_need_the_prior() -> None:
    base = dict(ngram_buckets=64, init_embeddings="none", embedding_dim=8, hidden=8)
    with pytest.raises(ConfigError, match=r"lexicon_tokens .* needs model\.lexicon_prior"):
        resolve_spec(ModelConfig(lexicon_tokens=True, lexicon_prior=False, **base), len(WORDS))
    assert not resolve_spec(ModelConfig(**base), len(WORDS), words=WORDS).lexicon_tokens
    spec = resolve_spec(ModelConfig(lexicon_tokens=True, **base), len(WORDS), words=WORDS)
    torch.manual_seed(0)
    model = build_model(spec, words=WORDS).eval()
    assert model.lstm.input_size == 8 + TOKEN_FEATURES
    with torch.no_grad():
        model.embedding.weight.zero_()  # every word looks alike to the LSTM but for the lexicon
    tokens = torch.tensor(
        [[ID["cable"], ID["bad"]], [ID["cable"], ID["good"]], [ID["not"], ID["bad"]]]
    )
    lengths = torch.tensor([2, 2, 2])
    with torch.no_grad():
        deep, _ = model.parts(tokens, lengths)
        model.packing = "padded"
        padded, _ = model.parts(tokens, lengths)
    assert torch.allclose(deep, padded, atol=1e-6)  # the GPU path reads them too
    assert len({round(v, 6) for v in deep.tolist()}) == 3  # bad, good and "not bad" differ
    old = spec.to_dict()
    del old["lexicon_tokens"]  # a run saved before the setting: the LSTM reads embeddings only
    assert build_model(ModelShape.from_dict(old)).lstm.input_size == 8

"""The linear companion: its features are NB-weighted binary word and pair features (checked
against scikit-learn's counts), its fit is scikit-learn's logistic regression, the module scores
what the fit scored, and a real training run fits, blends, saves and reloads it (or says why
not)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import normalize

from engine.config import ModelConfig
from engine.errors import InputError
from engine.events import read_events
from engine.sentiment.after_training import refit_saved_run
from engine.sentiment.companion import (
    ALPHA,
    MIN_DF,
    Marking,
    _fit_lr,
    _matrix,
    fit_companion,
    ngram_keys,
    training_blocks,
)
from engine.sentiment.data import Batch
from tests.train.conftest import train_on_reviews, write_dataset


def _rows(n: int, width: int, ids: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, width + 1, n)
    tokens = np.zeros((n, width), np.int64)
    for i, length in enumerate(lengths):
        tokens[i, :length] = rng.zipf(1.6, length).clip(max=ids - 3) + 1  # ids 2.., some unk 1
    return torch.from_numpy(tokens), torch.from_numpy(lengths)


def _words(tokens: torch.Tensor, lengths: torch.Tensor) -> list[list[str]]:
    """Each row as scikit-learn would see it: its unigrams and bigrams as strings."""
    out = []
    for row, n in zip(tokens.tolist(), lengths.tolist(), strict=True):
        ids = [str(t) for t in row[:n]]
        out.append(ids + [f"{a} {b}" for a, b in itertools.pairwise(ids)])
    return out


def test_features_are_nb_weighted_binary_word_and_pair_ids() -> None:
    tokens, lengths = _rows(400, 30, 60, seed=0)
    labels = torch.from_numpy((np.random.default_rng(5).random(400) < 0.6).astype(np.float32))
    marking = Marking(num_ids=60)
    fit = fit_companion(lambda: [Batch(tokens, lengths, labels)], [], marking)
    assert fit is not None
    vec = CountVectorizer(analyzer=lambda row: row, binary=True, min_df=MIN_DF)
    counts = vec.fit_transform(_words(tokens, lengths))
    assert fit.features == len(vec.vocabulary_)

    def key(feature: str) -> int:
        parts = [int(p) for p in feature.split()]
        return parts[0] if len(parts) == 1 else 60 + parts[0] * 60 + parts[1]

    order = np.argsort([key(f) for f in vec.get_feature_names_out()])
    assert np.array_equal(fit.vocab, np.sort([key(f) for f in vec.get_feature_names_out()]))
    y = labels.numpy() > 0.5
    p = np.asarray(counts[y].sum(axis=0)).ravel()[order] + ALPHA
    q = np.asarray(counts[~y].sum(axis=0)).ravel()[order] + ALPHA
    ratio = np.log((p / p.sum()) / (q / q.sum()))  # Wang & Manning's r
    assert np.allclose(fit.ratio, ratio, rtol=1e-5, atol=1e-6)
    expected = normalize(counts[:, order].multiply(ratio).tocsr())
    ours, _ = _matrix(
        [Batch(tokens, lengths, labels)], marking, torch.from_numpy(fit.vocab),
        torch.from_numpy(ratio),
    )  # fmt: skip
    assert np.allclose(ours.toarray(), expected.toarray(), atol=1e-6)


def test_negated_words_and_their_pairs_are_features_of_their_own() -> None:
    # ids: 2 not, 3 bad, 4 good, 5 but; scope 3: "not bad good but good" marks bad and good
    tokens, lengths = torch.tensor([[2, 3, 4, 5, 4]]), torch.tensor([5])
    rows, keys = ngram_keys(tokens, lengths, Marking(10, 3, (2,), (5,)))
    unigrams = sorted(keys[:5].tolist())
    assert unigrams == sorted([2, 10 + 3, 10 + 4, 5, 4])  # the words in scope moved up by 10
    base = 20
    assert keys[5:].tolist() == [
        base + 2 * base + 13, base + 13 * base + 14, base + 14 * base + 5, base + 5 * base + 4
    ]  # fmt: skip
    assert rows.tolist() == [0] * 9
    plain_rows, plain = ngram_keys(tokens, torch.tensor([2]), Marking(10))  # length 2: 3 keys
    assert plain.tolist() == [2, 3, 10 + 2 * 10 + 3] and plain_rows.tolist() == [0, 0, 0]


def test_the_fit_is_scikit_learns_logistic_regression() -> None:
    rng = np.random.default_rng(1)
    x = rng.random((300, 40)) * (rng.random((300, 40)) < 0.2)
    y = (x @ rng.normal(size=40) + rng.normal(0, 0.3, 300) > 0.2).astype(np.float32)
    from scipy import sparse

    theta = _fit_lr(sparse.csr_matrix(x.astype(np.float32)), y, 4.0, np.zeros(41))
    ref = LogisticRegression(C=4.0, tol=1e-10, max_iter=5000).fit(x, y)
    assert theta[:-1] == pytest.approx(ref.coef_[0], abs=2e-3)
    assert theta[-1] == pytest.approx(ref.intercept_[0], abs=2e-3)


def test_the_module_scores_what_the_fit_scored(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d", n_train=600, n_test=200, seq_len=16, vocab_size=40)
    marking = Marking(num_ids=42, scope=2, negation_ids=(5,), clause_ids=(6,))
    blocks = list(training_blocks(data))
    assert sum(len(b.labels) for b in blocks) == 600
    assert sum(len(b.labels) for b in training_blocks(data, max_rows=250)) == 250
    valid = [next(iter(training_blocks(data, max_rows=200)))]
    fit = fit_companion(lambda: blocks, valid, marking)
    assert fit is not None and fit.rows == 600 and set(fit.accuracies) == {"1", "4", "16", "64"}
    assert fit.valid_accuracy > 0.9  # word 2 vs word 3 decides the label
    module = fit.module(marking)
    tokens, lengths = blocks[0].tokens[:50], blocks[0].lengths[:50]
    x, _ = _matrix(
        [Batch(tokens, lengths, torch.zeros(50))], marking, torch.from_numpy(fit.vocab),
        torch.from_numpy(fit.ratio.astype(np.float64)),
    )  # fmt: skip
    expected = x @ fit.weight.astype(np.float64) + fit.bias
    assert module(tokens, lengths).numpy() == pytest.approx(expected, abs=1e-4)
    empty = fit_companion(lambda: [Batch(tokens[:1], lengths[:1], torch.ones(1))], [], marking)
    assert empty is None  # no feature in MIN_DF rows


def _pair_reviews(n: int, seed: int) -> list[tuple[str, bool]]:
    """Reviews whose label turns on a word pair: "not good" is negative, "good" alone positive."""
    rng = np.random.default_rng(seed)
    fillers = [f"thing{i}" for i in range(40)]
    out = []
    for i in range(n):
        pos = bool(rng.random() < 0.6)
        words = [*list(rng.choice(fillers, 6)), f"item{i}"]
        phrase = ["very", "good"] if pos else ["not", "good"]
        at = int(rng.integers(0, len(words)))
        out.append((" ".join([*words[:at], *phrase, *words[at:]]), pos))
    return out


@pytest.mark.slow
def test_a_training_run_fits_blends_saves_and_reloads_the_companion(tmp_path: Path) -> None:
    from engine.sentiment.evaluate import load_run, predict_proba

    model = ModelConfig(hidden=4, embedding_dim=8, ngram_buckets=4, negation_scope=0,
                        lexicon_prior=False, init_embeddings="none")  # fmt: skip
    reviews = _pair_reviews(3000, seed=0)
    _, run, summary = train_on_reviews(
        tmp_path, reviews, model, epochs=1, lr=1e-3, events_file=True
    )
    events = [e for e in read_events(run / "events.jsonl") if e["type"] == "after_training"]
    assert [(e["fits"], e["companion_rows"]) for e in events] == [
        (["blend", "companion"], summary["n_train"])
    ]
    facts = summary["companion"]
    assert facts["applied"], facts
    assert facts["rows"] == summary["n_train"] and facts["features"] > 0
    spec = json.loads((run / "model.json").read_text())
    assert spec["companion_features"] == facts["features"] and len(spec["blend"]) == 4
    assert spec["blend"][2] > 0  # the companion's weight in the logit
    loaded = load_run(run)
    assert loaded.model.companion is not None
    texts = ["i found it very good indeed", "honestly not good at all"]
    proba = predict_proba(loaded, texts)
    assert proba[0] > 0.5 > proba[1]
    saved = json.loads((run / "summary.json").read_text())
    assert saved["companion"] == facts and saved["accuracy"] == summary["accuracy"]
    # fitting them again on the saved run (refit_saved_run) gives what the trainer fitted
    # a stale outcome (accuracy, a below-majority warning) is replaced; other warnings stay
    stale = {**saved, "accuracy": 0.0, "majority_rate": 0.99}
    stale["warnings"] = [
        {"code": "below_majority", "message": "old"},
        {"code": "other", "message": "kept"},
    ]
    (run / "summary.json").write_text(json.dumps(stale))
    fit, again = refit_saved_run(run)
    assert fit is not None and again is not None
    assert {**again, "seconds": 0} == {**facts, "seconds": 0}
    redone = json.loads((run / "summary.json").read_text())
    assert redone["accuracy"] == pytest.approx(summary["accuracy"], abs=1e-9)
    assert redone["majority_rate"] == pytest.approx(summary["majority_rate"])
    assert redone["confusion"] == summary["confusion"] and redone["n_test"] == summary["n_test"]
    assert redone["warnings"] == [{"code": "other", "message": "kept"}]
    assert json.loads((run / "model.json").read_text()) == spec
    assert predict_proba(load_run(run), texts) == pytest.approx(proba, abs=1e-6)
    # weights from a past companion (it had an idf vector): a clear error, and a refit mends it
    state = torch.load(run / "model.pt")
    state["companion.idf"] = state.pop("companion.ratio")
    torch.save(state, run / "model.pt")
    with pytest.raises(InputError, match=r"model\.pt: the saved weights do not fit model\.json"):
        load_run(run)
    refit_saved_run(run)
    assert predict_proba(load_run(run), texts) == pytest.approx(proba, abs=1e-6)
    # model.pt gone (a run killed before its end): the checkpoint's network, and it says so
    assert list((run / "checkpoints").glob("*.pt"))  # every epoch's end writes one
    (run / "model.pt").unlink()
    network = load_run(run)
    assert network.model.companion is None and network.from_checkpoint is not None
    assert "model.pt is missing" in network.from_checkpoint
    assert predict_proba(network, texts).shape == (2,)


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["off", "weighted"])
def test_no_companion_when_off_or_when_there_is_no_blend(tmp_path: Path, setting: str) -> None:
    model = ModelConfig(hidden=4, embedding_dim=8, ngram_buckets=64, init_embeddings="none",
                        companion=setting != "off")  # fmt: skip
    extra = {"pos_weight": "auto"} if setting == "weighted" else {}
    _, run, summary = train_on_reviews(tmp_path, _pair_reviews(400, 1), model, 1, **extra)
    spec = json.loads((run / "model.json").read_text())
    assert spec["companion_features"] == 0
    if setting == "off":
        assert summary["companion"] is None
    else:
        assert not summary["companion"]["applied"]
        assert "pos_weight" in summary["companion"]["reason"]
        # no blend to fit (pos_weight): a refit scores the plain network, as the trainer did
        (run / "summary.json").write_text(json.dumps({**summary, "accuracy": 0.0}))
        fit, _ = refit_saved_run(run)
        redone = json.loads((run / "summary.json").read_text())
        assert fit is None and redone["blend"] is None
        assert redone["accuracy"] == pytest.approx(summary["accuracy"], abs=1e-9)
        assert redone["test_loss"] == pytest.approx(summary["test_loss"], rel=1e-5)

"""`sentitop embed --mode svd`: pair counts, PPMI and the randomized SVD checked against dense
numpy, and the run folder a classifier initialises from."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from engine.embeddings.corpus import Corpus
from engine.embeddings.svd import cooccurrence, ppmi, randomized_svd, svd_vectors
from engine.sentiment.pretrained import align, load_pretrained
from tui.cli import main as sentitop


def _corpus(lengths: list[int], vocab: int = 6, seed: int = 3) -> Corpus:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, sum(lengths)).astype(np.int32)
    return Corpus(
        ids=ids,
        doc_starts=np.cumsum([0, *lengths]),
        itos=[f"w{i}" for i in range(vocab)],
        counts=np.bincount(ids, minlength=vocab).astype(np.int64),
        raw_tokens=sum(lengths),
    )


def _dense_pairs(corpus: Corpus, window: int) -> np.ndarray:
    out = np.zeros((corpus.vocab_size, corpus.vocab_size))
    for d0, d1 in zip(corpus.doc_starts[:-1], corpus.doc_starts[1:], strict=True):
        doc = corpus.ids[d0:d1]
        for i in range(len(doc)):
            for j in range(i + 1, min(len(doc), i + window + 1)):
                w = (window - (j - i) + 1) / window
                out[doc[i], doc[j]] += w
                out[doc[j], doc[i]] += w
    return out


@pytest.mark.parametrize("chunk", [1_000_000, 4])  # chunks end inside documents
def test_pair_counts_stay_inside_documents_and_decay_with_distance(chunk: int) -> None:
    corpus = _corpus([7, 1, 0, 12, 5])
    got = cooccurrence(corpus, window=3, chunk=chunk).toarray()
    assert np.allclose(got, _dense_pairs(corpus, 3))
    assert np.allclose(got, got.T)


def test_ppmi_matches_the_dense_formula() -> None:
    counts = cooccurrence(_corpus([30, 25, 40]), window=2)
    dense = counts.toarray()
    word = dense.sum(axis=1)
    ctx = word**0.75
    with np.errstate(divide="ignore"):
        expected = np.log(dense) + np.log(ctx.sum()) - np.log(word)[:, None] - np.log(ctx)[None]
    expected = np.maximum(expected, 0.0)
    assert np.allclose(ppmi(counts).toarray(), expected)


def test_randomized_svd_finds_the_top_singular_directions() -> None:
    counts = cooccurrence(_corpus([400, 300], vocab=40, seed=1), window=4)
    matrix = ppmi(counts)
    u, s = randomized_svd(matrix, 5, seed=0)
    s_exact = np.linalg.svd(matrix.toarray(), compute_uv=False)[:5]
    assert np.allclose(s, s_exact, rtol=1e-6)
    assert np.allclose(u.T @ u, np.eye(5), atol=1e-8)


def test_vectors_have_unit_scale_and_survive_a_tiny_or_empty_corpus() -> None:
    vectors, nonzeros = svd_vectors(_corpus([50, 50], vocab=8), window=3, dim=20, seed=0)
    assert vectors.shape == (8, 20) and vectors.dtype == np.float32
    assert nonzeros > 0 and abs(float(vectors.std()) - 1.0) < 1e-5
    assert not vectors[:, 8:].any()  # directions past the rank of an 8 x 8 matrix are zero
    empty, nonzeros = svd_vectors(_corpus([1, 1, 0], vocab=3), window=3, dim=4, seed=0)
    assert nonzeros == 0 and not empty.any()  # no pair at all: zeros, not NaN


def _topic_reviews(path: Path) -> None:
    rng = random.Random(0)
    fruit, tools = ["apple", "pear", "plum"], ["hammer", "saw", "drill"]
    rows = []
    for _ in range(400):
        topic, context = rng.choice(
            [
                (fruit, ["eat", "sweet", "ripe", "juicy"]),
                (tools, ["build", "wood", "nail", "steel"]),
            ]
        )
        words = [rng.choice(topic), *rng.choices(context, k=5)]
        rng.shuffle(words)
        rows.append(json.dumps({"reviewText": " ".join(words), "overall": 5.0}))
    path.write_text("\n".join(rows) + "\n")


def test_embed_mode_svd_leaves_a_run_a_classifier_initialises_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reviews, run = tmp_path / "reviews.jsonl", tmp_path / "emb"
    _topic_reviews(reviews)
    argv = ["embed", "--mode", "svd", "--input", str(reviews), "--run-dir", str(run)]
    argv += ["--dim", "4", "--min-count", "2", "--eval-words", "14", "--negatives", "1"]
    assert sentitop(argv) == 0
    out = capsys.readouterr().out
    assert "SVD of the PPMI matrix" in out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["mode"] == "svd" and summary["status"] == "ok" and summary["vocab"] == 14
    # the reference (the SVD of the unshifted SPPMI rows, --negatives 1) is nearly the same
    assert 0 <= summary["pip_loss"] < 0.3
    pre = load_pretrained(run)
    index = {w: i for i, w in enumerate(pre.words)}
    unit = pre.vectors / np.linalg.norm(pre.vectors, axis=1, keepdims=True)
    cos = unit @ unit.T
    assert cos[index["apple"], index["pear"]] > cos[index["apple"], index["saw"]] + 0.5
    table = align(pre, ["", "<unk>", "pear", "never_seen"], seed=0, dim=4).table
    assert np.allclose(table[2], pre.vectors[index["pear"]])
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert ("stage_end", "svd", "ok") in {
        (e["type"], e.get("stage"), e.get("status")) for e in events
    }


def test_embed_mode_svd_refuses_several_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reviews = tmp_path / "reviews.jsonl"
    _topic_reviews(reviews)
    argv = ["embed", "--mode", "svd", "--input", str(reviews), "--run-dir", str(tmp_path / "r")]
    assert sentitop([*argv, "--nproc", "2"]) == 2
    assert "--mode svd runs in one process" in capsys.readouterr().err
    assert not (tmp_path / "r" / "embeddings.npy").exists()

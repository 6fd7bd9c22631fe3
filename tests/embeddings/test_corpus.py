"""Corpus building, sub-sampling, sharding, skip-gram pairs and the negative sampler."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from engine.embeddings.corpus import (
    Corpus,
    NegativeSampler,
    build_corpus,
    epoch_pairs,
    keep_probabilities,
    read_dataset_docs,
    shard_docs,
    skipgram_pairs,
)
from engine.errors import InputError
from tests.train.conftest import write_dataset


def _toy() -> Corpus:
    docs = [["a", "b", "a", "c"], ["b", "a", "d"], [], ["a", "e", "e"]]
    return build_corpus(docs, min_count=2, max_vocab=10)


def test_vocab_is_ranked_by_frequency_and_rare_words_are_dropped() -> None:
    corpus = _toy()
    assert corpus.itos == ["a", "b", "e"]  # c and d occur once
    assert corpus.counts.tolist() == [4, 2, 2]
    assert corpus.raw_tokens == 10
    assert corpus.doc_starts.tolist() == [0, 3, 5, 5, 8]
    assert corpus.ids.tolist() == [0, 1, 0, 1, 0, 0, 2, 2]


def test_too_little_text_names_the_fix() -> None:
    with pytest.raises(InputError, match="only 0 word") as info:
        build_corpus([["x", "y"]], min_count=2, max_vocab=10)
    assert info.value.hint is not None and "--min-count" in info.value.hint
    assert "--max-docs" not in info.value.hint  # it only limits reading: not the fix here
    with pytest.raises(InputError, match="only 0 word") as capped:
        build_corpus([["x", "y"], ["x", "y"]], min_count=2, max_vocab=10, max_docs=1)
    assert capped.value.hint is not None and "--max-docs 1 stopped reading" in capped.value.hint


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    corpus = _toy()
    corpus.save(tmp_path / "c.npz")
    back = Corpus.load(tmp_path / "c.npz")
    assert back.itos == corpus.itos and back.raw_tokens == corpus.raw_tokens
    assert np.array_equal(back.ids, corpus.ids) and np.array_equal(back.counts, corpus.counts)


@pytest.mark.parametrize("window", [1, 2, 5])
def test_pairs_stay_inside_documents_and_count_every_distance(window: int) -> None:
    rng = np.random.default_rng(window)
    lengths = [7, 1, 0, 12, 3]
    ids = rng.integers(0, 50, size=sum(lengths))
    doc = np.repeat(np.arange(len(lengths)), lengths)
    centres, contexts = skipgram_pairs(ids, doc, window)
    expected = sum(2 * max(0, n - off) for n in lengths for off in range(1, window + 1))
    assert len(centres) == len(contexts) == expected
    # every pair is some (i, j) with 0 < |i - j| <= window inside one document
    allowed = {
        (int(ids[i]), int(ids[j]))
        for i in range(len(ids))
        for j in range(len(ids))
        if i != j and abs(i - j) <= window and doc[i] == doc[j]
    }
    assert set(zip(centres.tolist(), contexts.tolist(), strict=True)) <= allowed


def test_subsampling_keeps_rare_words_and_thins_frequent_ones() -> None:
    counts = np.array([100_000, 1000, 10, 1])
    keep = keep_probabilities(counts, 1e-3)
    assert keep[-1] == 1.0 and keep[-2] == 1.0
    assert keep[0] < 0.2 and np.all(np.diff(keep) >= 0)


def test_epoch_pairs_are_resampled_per_seed_and_thin_frequent_words(imdb_corpus: Corpus) -> None:
    full = (0, imdb_corpus.num_docs)
    c1, _, raw = epoch_pairs(imdb_corpus, full, window=5, subsample=1e-4, seed=1)
    c2, _, _ = epoch_pairs(imdb_corpus, full, window=5, subsample=1e-4, seed=2)
    assert raw == imdb_corpus.raw_tokens
    assert not np.array_equal(np.sort(c1), np.sort(c2))
    top_share_before = (imdb_corpus.ids == 0).mean()
    assert (c1 == 0).mean() < top_share_before / 2  # "the" loses most of its pairs


def test_shards_cover_every_document_once(imdb_corpus: Corpus) -> None:
    for count in (1, 2, 3, 7):
        ranges = [shard_docs(imdb_corpus, i, count) for i in range(count)]
        assert ranges[0][0] == 0 and ranges[-1][1] == imdb_corpus.num_docs
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
        tokens = [imdb_corpus.doc_starts[hi] - imdb_corpus.doc_starts[lo] for lo, hi in ranges]
        assert max(tokens) - min(tokens) < 0.1 * len(imdb_corpus.ids) / count + 2000


def test_negatives_follow_unigram_to_the_three_quarters() -> None:
    counts = np.array([8000, 1000, 125, 1])
    sampler = NegativeSampler(counts, seed=0, table_size=100_000)
    drawn = sampler.sample(20_000, 10).flatten().numpy()
    share = np.bincount(drawn, minlength=4) / len(drawn)
    expected = counts**0.75 / (counts**0.75).sum()
    assert np.allclose(share[:3], expected[:3], atol=0.01)
    assert share[3] > 0  # the rarest word is still drawn


def test_dataset_h5_corpus_drops_padding_and_unknown(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "data", n_train=64, n_test=8, vocab_size=20)
    docs = list(read_dataset_docs(str(folder)))
    assert len(docs) == 64
    assert all(w not in ("<pad>", "<unk>") for d in docs for w in d)
    corpus = build_corpus(docs, min_count=1, max_vocab=100)
    assert corpus.itos[0] in ("good", "bad")  # the marker words are the most frequent

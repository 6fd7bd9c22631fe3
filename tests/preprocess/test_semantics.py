"""Dedupe (mode, ties → smaller), split, vocabulary ids and ties, padding/truncation."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from engine.preprocess.dedupe import (
    add_counts,
    is_test,
    mode_rating,
    order_key,
    pack_counts,
    partition_of,
    unpack_counts,
)
from engine.preprocess.reduce import (
    LabelRule,
    encode_texts,
    reduce_texts,
    select_vocab,
    token_dtype,
    word_index,
)

RULE = LabelRule(1, 5, 3)


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ([0, 0, 0, 0, 1], 5),
        ([1, 0, 0, 0, 3], 5),
        ([2, 0, 0, 0, 2], 1),  # tie → smaller
        ([0, 3, 3, 0, 3], 2),
        ([0, 0, 5, 4, 0], 3),
        ([0, 0, 0, 7, 9], 5),
    ],
)
def test_mode_rating_ties_go_to_the_smaller(counts: list[int], expected: int) -> None:
    assert mode_rating(pack_counts(counts), 1, 5) == (expected, sum(counts))


def test_packed_counts_round_trip_and_add() -> None:
    a, b = [3, 0, 1 << 33, 2, 1], [1, 1, 1, 1, 1]
    assert unpack_counts(pack_counts(a) + pack_counts(b), 5) == [
        x + y for x, y in zip(a, b, strict=True)
    ]


def test_add_counts_sums_shared_keys_and_inserts_the_rest() -> None:
    into = {b"a": pack_counts([1, 0, 0, 0, 2]), b"b": pack_counts([0, 1, 0, 0, 0])}
    other = {b"b": pack_counts([0, 2, 0, 0, 1]), b"c": pack_counts([0, 0, 4, 0, 0])}
    add_counts(into, other)
    assert {k: unpack_counts(v, 5) for k, v in into.items()} == {
        b"a": [1, 0, 0, 0, 2],
        b"b": [0, 3, 0, 0, 1],
        b"c": [0, 0, 4, 0, 0],
    }


def test_split_is_stable_and_near_the_fraction() -> None:
    texts = [f"review number {i}".encode() for i in range(20_000)]
    flags = [is_test(t, 0.1) for t in texts]
    assert flags == [is_test(t, 0.1) for t in texts]
    assert 0.09 < sum(flags) / len(flags) < 0.11
    assert not any(is_test(t, 0.0) for t in texts[:100])
    # a larger fraction only moves texts into test, never out
    assert all(is_test(t, 0.3) for t, f in zip(texts, flags, strict=True) if f)


def test_partitions_are_contiguous_key_ranges() -> None:
    keys = sorted(order_key(f"t{i}".encode()) for i in range(1000))
    for parts in (1, 2, 3, 8):
        assigned = [partition_of(k, parts) for k in keys]
        assert assigned == sorted(assigned) and set(assigned) <= set(range(parts))


def test_reduce_dedupes_labels_and_counts() -> None:
    items = [
        (b"great strings", pack_counts([0, 0, 0, 1, 2])),  # 3 copies, mode 5
        (b"broke fast", pack_counts([1, 1, 0, 0, 0])),  # tie 1/2 → 1
        (b"the it is", pack_counts([0, 0, 1, 0, 0])),  # only stopwords
        (b"ok i guess", pack_counts([0, 0, 1, 0, 0])),  # 3 → negative
    ]
    stop = frozenset({b"the", b"it", b"is", b"i"})
    part = reduce_texts(items, RULE, stop, 0.0)
    labels = {row[1]: row[2] for row in part.rows}
    assert labels == {b"great strings": 1, b"broke fast": 0, b"ok i guess": 0}
    c = part.counts
    assert (c.distinct, c.duplicates, c.only_stopwords, c.positive, c.negative) == (4, 3, 1, 1, 2)
    assert (c.train, c.test) == (3, 0)
    assert part.train_words == Counter(
        {b"great": 1, b"strings": 1, b"broke": 1, b"fast": 1, b"ok": 1, b"guess": 1}
    )
    assert [r[0] for r in part.rows] == sorted(r[0] for r in part.rows)


def test_vocab_most_frequent_first_ties_alphabetical() -> None:
    counts = Counter({b"b": 5, b"a": 5, b"c": 7, b"d": 1, b"e": 5})
    assert select_vocab(counts, 3) == ["c", "a", "b"]
    assert word_index(select_vocab(counts, 3)) == {b"c": 2, b"a": 3, b"b": 4}
    assert select_vocab(counts, 100) == ["c", "a", "b", "e", "d"]
    rng = np.random.default_rng(3)  # many ties: equal to ranking by (-count, word)
    words = [bytes(rng.integers(97, 100, 4).tolist()) for _ in range(80)]
    many = Counter({w: int(rng.integers(1, 6)) for w in words})
    ranked = sorted(many.items(), key=lambda item: (-item[1], item[0]))
    assert select_vocab(many, 50) == [w.decode() for w, _ in ranked[:50]]


def test_encode_drops_stopwords_pads_truncates_and_marks_unknown() -> None:
    index = {b"good": 2, b"bad": 3}
    stop = frozenset({b"the", b"not"})
    texts = [b"the good bad zzz", b"bad " * 7 + b"good", b"not good", b"the not", b"bad"] * 9000
    tokens, lengths = encode_texts(texts, index, stop, 5, np.uint16)
    assert tokens.dtype == np.uint16 and tokens.shape == (45_000, 5)
    expected = [[2, 3, 1, 0, 0], [3, 3, 3, 3, 3], [2, 0, 0, 0, 0], [0, 0, 0, 0, 0], [3, 0, 0, 0, 0]]
    assert tokens.tolist() == expected * 9000  # spans several batches
    assert lengths.tolist() == [3, 5, 1, 0, 1] * 9000


def test_token_dtype() -> None:
    assert token_dtype(65_536) == np.uint16
    assert token_dtype(65_537) == np.int32


def test_reduce_batches_give_the_same_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.preprocess import reduce as reduce_mod

    items = [
        (f"w{i % 13} common the".encode(), pack_counts([0, 0, i % 2, 0, 1])) for i in range(300)
    ]
    items.append((b"the", pack_counts([1, 0, 0, 0, 0])))
    whole = reduce_texts(items, RULE, frozenset({b"the"}), 0.3)
    monkeypatch.setattr(reduce_mod, "BATCH_TEXTS", 7)
    batched = reduce_texts(items, RULE, frozenset({b"the"}), 0.3)
    assert batched.rows == whole.rows and batched.counts == whole.counts
    assert batched.train_words == whole.train_words
    assert whole.train_words[b"common"] == whole.counts.train and b"the" not in whole.train_words
    assert whole.counts.only_stopwords == 1


def test_batched_part_tokens_match_reference_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.preprocess import reduce as reduce_mod
    from engine.preprocess.writer import write_part

    rng = np.random.default_rng(5)
    vocab_words = [f"w{i}" for i in range(40)] + ["the", "not", "a"]
    items = []
    for i in range(500):
        words = rng.choice(vocab_words, size=int(rng.integers(1, 30)))
        items.append(
            (" ".join(words).encode() + b" x%d" % (i % 7), pack_counts([1, 0, 0, 0, i % 3]))
        )
    items.append((b"the a not", pack_counts([1, 0, 0, 0, 0])))
    stop = frozenset({b"the", b"not", b"a"})
    monkeypatch.setattr(reduce_mod, "BATCH_TEXTS", 64)
    part = reduce_texts(items, RULE, stop, 0.25, seq_len=9)
    index = word_index(select_vocab(part.train_words, 30))
    write_part(tmp_path / "fast.h5", part, index, stop, 9, np.uint16)
    part.local_tokens = None
    write_part(tmp_path / "ref.h5", part, index, stop, 9, np.uint16)
    import h5py

    with h5py.File(tmp_path / "fast.h5") as fast, h5py.File(tmp_path / "ref.h5") as ref:
        for split in ("train", "test"):
            for name in ("tokens", "labels", "lengths"):
                assert np.array_equal(fast[split][name][()], ref[split][name][()]), (split, name)
                assert fast[split][name].dtype == ref[split][name].dtype
        assert fast["train"]["labels"].shape[0] > 300


@pytest.mark.parametrize("slot", range(5))
@pytest.mark.parametrize("n", [1, 2, 3, 4, 1 << 20])
def test_mode_rating_of_a_single_rating(slot: int, n: int) -> None:
    counts = [0] * 5
    counts[slot] = n
    assert mode_rating(pack_counts(counts), 1, 5) == (slot + 1, n)


def test_row_gathering_and_id_translation_equal_the_whole_matrix_forms() -> None:
    """The blockwise forms that keep 256-token preprocessing's peak memory down give exactly
    what the whole-matrix numpy expressions give."""
    from engine.preprocess.reduce import _gather_rows
    from engine.preprocess.writer import _translate_rows

    rng = np.random.default_rng(0)
    blocks = [rng.integers(-1, 50, size=(n, 7), dtype=np.int32) for n in (5, 0, 11, 3)]
    whole = np.concatenate(blocks)
    picked = rng.permutation(len(whole))[:13]
    gathered = _gather_rows([b.copy() for b in blocks], picked, 7)
    assert gathered.dtype == np.int32 and np.array_equal(gathered, whole[picked])
    lut = rng.integers(0, 60_000, size=51).astype(np.uint16)
    rows = np.flatnonzero(rng.random(len(whole)) < 0.5)
    before = whole.copy()
    assert np.array_equal(_translate_rows(whole, rows, lut), lut.take(whole[rows] + 1))
    assert np.array_equal(whole, before)  # the part's ids are not changed in place

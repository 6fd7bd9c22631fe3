"""PIP loss properties, the SPPMI matrix, the SVD reference and nearest neighbours."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.embeddings.corpus import Corpus, build_corpus
from engine.embeddings.evaluate import (
    cooccurrence,
    nearest_neighbours,
    pip_loss,
    reference_embedding,
    sppmi,
    sppmi_reference,
)


def _orthogonal(d: int, rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(d, d)))
    return np.asarray(q * np.sign(np.diag(r)))


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 40),
    d=st.integers(1, 12),
    seed=st.integers(0, 2**31),
    norm=st.booleans(),
    center=st.booleans(),
)
def test_pip_of_a_copy_is_zero_and_rotations_do_not_change_it(
    n: int, d: int, seed: int, norm: bool, center: bool
) -> None:
    rng = np.random.default_rng(seed)
    e = rng.normal(size=(n, d)) * rng.uniform(0.01, 10)
    other = rng.normal(size=(n, d + 1))
    q = _orthogonal(d, rng)
    scale = np.linalg.norm(e.T @ e)
    assert pip_loss(e, e.copy(), normalize=norm, center=center) <= 1e-6 * (1 if norm else scale)
    assert pip_loss(e @ q, e, normalize=norm, center=center) <= 1e-6 * (1 if norm else scale)
    before = pip_loss(e, other, normalize=norm, center=center)
    after = pip_loss(e @ q, other, normalize=norm, center=center)
    assert after == pytest.approx(before, rel=1e-6, abs=1e-6)  # sqrt amplifies round-off at 0


def test_pip_matches_the_explicit_matrices_and_tells_embeddings_apart() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(30, 5)), rng.normal(size=(30, 8))
    explicit = np.linalg.norm(a @ a.T - b @ b.T)
    assert pip_loss(a, b, normalize=False, center=False) == pytest.approx(explicit, rel=1e-9)
    ac, bc = a - a.mean(0), b - b.mean(0)
    pa, pb = ac @ ac.T, bc @ bc.T
    unit = np.linalg.norm(pa / np.linalg.norm(pa) - pb / np.linalg.norm(pb))
    assert pip_loss(a, b) == pytest.approx(unit, rel=1e-9)
    assert 0.1 < pip_loss(a, b) <= 2.0
    assert pip_loss(a, 3.0 * a) == pytest.approx(0.0, abs=1e-7)  # scale is ignored
    assert pip_loss(a, a + 5.0) == pytest.approx(0.0, abs=1e-7)  # so is a common shift
    with pytest.raises(ValueError, match="cannot be compared"):
        pip_loss(a, b[:10])


def test_sppmi_is_positive_for_words_seen_together_and_zero_otherwise() -> None:
    docs = [["cat", "purr"] * 5, ["dog", "bark"] * 5, ["cat", "dog"]] * 3
    corpus = build_corpus(docs, min_count=1, max_vocab=10)
    index = {w: i for i, w in enumerate(corpus.itos)}
    pairs = cooccurrence(corpus, corpus.vocab_size, window=1)
    assert (pairs == pairs.T).all()  # a symmetric window counts both directions
    m = sppmi(pairs, corpus.counts, shift_k=1)
    assert m[index["cat"], index["purr"]] > 0
    assert m[index["purr"], index["bark"]] == 0  # never within the window


def test_reference_equals_a_dense_svd_up_to_rotation(imdb_corpus: Corpus) -> None:
    pairs = cooccurrence(imdb_corpus, 200, window=5)
    m = sppmi(pairs, imdb_corpus.counts, shift_k=10)
    u, s, _ = np.linalg.svd(m, full_matrices=False)
    dense = u[:, :20] * np.sqrt(s[:20])
    ours = reference_embedding(m, 20)
    assert ours.shape == (200, 20)
    assert pip_loss(ours, dense, normalize=False, center=False) < 1e-6 * np.linalg.norm(
        dense.T @ dense
    )
    assert np.allclose(ours, sppmi_reference(imdb_corpus, 200, 5, 10, 20))


def test_nearest_neighbours_by_cosine() -> None:
    vectors = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [-1.0, 0.0]])
    itos = ["good", "great", "plot", "bad"]
    near = nearest_neighbours(vectors * [[1], [5], [2], [3]], itos, ["good", "missing"], k=2)
    assert near == {"good": ["great", "plot"]}

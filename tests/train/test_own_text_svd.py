"""train.model.init_embeddings: svd — the table from the training split's own text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import numpy as np
import pytest

from engine.config import ModelConfig
from engine.sentiment.model import model_for
from engine.sentiment.own_text import own_text_table, read_corpus
from tests.run.conftest import sentitop
from tests.train.conftest import write_dataset


def _rows(data: Path, split: str) -> list[list[int]]:
    with h5py.File(data / "dataset.h5", "r") as fh:
        tokens, lengths = fh[f"{split}/tokens"][:], fh[f"{split}/lengths"][:]
    return [[int(t) for t in row[:n]] for row, n in zip(tokens, lengths, strict=True)]


def test_corpus_is_the_train_rows_without_padding_or_unknown_ids(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d", n_train=300, n_test=50, vocab_size=20, chunk_rows=32)
    with h5py.File(data / "dataset.h5", "r+") as fh:  # some unknown ids (1) inside the rows
        tokens = fh["train/tokens"]
        tokens[5, 0], tokens[7, 1] = 1, 1
    rows = [[t - 2 for t in row if t >= 2] for row in _rows(data, "train")]
    corpus = read_corpus(data, vocab_size=22, max_tokens=10**9)
    assert corpus.vocab_size == 20 and corpus.num_docs == 300
    assert corpus.ids.tolist() == [t for row in rows for t in row]
    assert np.diff(corpus.doc_starts).tolist() == [len(row) for row in rows]
    assert corpus.counts.tolist() == np.bincount(corpus.ids, minlength=20).tolist()
    # a token budget stops at a row boundary, never inside a row, and reads no test row
    cut = read_corpus(data, vocab_size=22, max_tokens=100)
    whole = np.cumsum([len(row) for row in rows])
    kept = int((whole <= 100).sum())
    assert cut.num_docs == kept and len(cut.ids) == whole[kept - 1] <= 100


def _topic_dataset(folder: Path, seed: int = 0) -> Path:
    """Rows of one topic each: ids 2-5 always appear together, ids 6-9 together; ids 10-11
    never appear in training (only in the test split)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    n, seq = 400, 10
    tokens = np.zeros((n, seq), np.uint16)
    for i in range(n):
        topic = np.arange(2, 6) if i % 2 else np.arange(6, 10)
        tokens[i] = rng.choice(topic, size=seq)
    with h5py.File(folder / "dataset.h5", "w") as fh:
        for split, rows in (("train", tokens), ("test", np.full((4, seq), 10, np.uint16))):
            group = fh.create_group(split)
            group.create_dataset("tokens", data=rows)
            group.create_dataset("labels", data=np.arange(len(rows)) % 2)
            group.create_dataset("lengths", data=np.full(len(rows), seq, np.int32))
        fh.attrs.update(vocab_size=10, seq_len=seq, pad_id=0, unk_id=1, format_version=1)
    words = {"<pad>": 0, "<unk>": 1, **{f"w{i}": i for i in range(2, 12)}}
    (folder / "vocab.json").write_text(json.dumps({"words": words, "settings": {}}))
    return folder


def test_words_of_one_context_get_close_vectors_and_unseen_words_start_random(
    tmp_path: Path,
) -> None:
    data = _topic_dataset(tmp_path / "d")
    got = own_text_table(data, vocab_size=12, dim=4, seed=0)
    table = got.table
    assert table.shape == (12, 4) and table.dtype == np.float32
    assert (got.found, got.missing) == (8, 2)  # ids 10, 11 only in the test split
    assert not table[0].any()  # padding
    np.testing.assert_allclose(table[1], table[2:10].mean(axis=0), rtol=1e-5)  # unknown: mean
    unit = table / np.linalg.norm(table, axis=1, keepdims=True).clip(1e-9)
    same = [unit[a] @ unit[b] for a in range(2, 6) for b in range(2, 6) if a < b]
    across = [unit[a] @ unit[b] for a in range(2, 6) for b in range(6, 10)]
    assert min(same) > max(across) + 0.5
    assert 0.2 < table[10:].std() < 5  # random, at the vectors' scale
    again = own_text_table(data, vocab_size=12, dim=4, seed=0)
    np.testing.assert_array_equal(again.table, table)  # seeded


def test_only_the_main_rank_computes_the_table(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d", n_train=64, n_test=16, vocab_size=20)
    cfg = ModelConfig(init_embeddings="svd", embedding_dim=8, hidden=4)
    spec, model, init = model_for(cfg, 22, str(data), seed=0, main=True)
    assert init is not None and init.table.shape == (22, 8) and spec.embedding_dim == 8
    np.testing.assert_array_equal(model.embedding.weight.detach().numpy(), init.table)
    other_spec, other, none = model_for(cfg, 22, str(data), seed=0, main=False)
    assert none is None and other_spec == spec  # same shape: DDP hands it rank 0's weights
    assert other.embedding.weight.shape == model.embedding.weight.shape


@pytest.mark.slow
def test_two_process_gloo_run_starts_from_the_own_text_table(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d")  # 512 rows, 50 words: the default model learns it
    run = tmp_path / "run"
    args = ["train", "--data", str(data), "--run-dir", str(run), "--nproc", "2", "--epochs", "2"]
    args += ["--batch-size", "64", "--lr", "0.01", "--json", "--model-init-embeddings", "svd"]
    out = sentitop(*args, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["world_size"] == 2 and summary["accuracy"] > 0.8
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    start = next(e for e in events if e["type"] == "train_start")
    assert start["init_embeddings"]["found"] == 50  # every word occurs in the training rows


def test_the_default_preset_starts_from_own_text_and_none_turns_it_off() -> None:
    from engine.sentiment.presets import init_embeddings_of

    assert init_embeddings_of(ModelConfig()) == "svd"
    assert init_embeddings_of(ModelConfig(preset="seed")) is None  # the old system: random
    assert init_embeddings_of(ModelConfig(init_embeddings="none")) is None
    assert init_embeddings_of(ModelConfig(preset="seed", init_embeddings="svd")) == "svd"
    assert init_embeddings_of(ModelConfig(init_embeddings="runs/emb")) == "runs/emb"


def test_a_split_with_no_known_word_gives_a_random_table_not_nan(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d", n_train=16, n_test=4, vocab_size=3)
    with h5py.File(data / "dataset.h5", "r+") as fh:
        tokens = fh["train/tokens"]
        tokens[...] = np.where(tokens[...] > 0, 1, 0)  # every word unknown
    got = own_text_table(data, vocab_size=5, dim=8, seed=0)
    assert (got.found, got.missing) == (0, 3)
    assert np.isfinite(got.table).all() and not got.table[0].any()
    assert own_text_table(data, vocab_size=2, dim=8, seed=0).table.shape == (2, 8)  # no words

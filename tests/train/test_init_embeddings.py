"""train.model.init_embeddings: vectors of an embeddings run, aligned to the dataset by word."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.config import ModelConfig, TrainConfig
from engine.errors import ConfigError
from engine.events import Emitter
from engine.sentiment.pretrained import align, dataset_itos, initial_table, load_pretrained
from tests.train.conftest import write_dataset

ROOT = Path(__file__).resolve().parents[2]


def write_embed_run(folder: Path, words: list[str], dim: int, seed: int = 1) -> np.ndarray:
    """What a finished `sentitop embed` run leaves: embeddings.npy and corpus.npz."""
    from engine.embeddings.corpus import Corpus

    folder.mkdir(parents=True, exist_ok=True)
    vectors = np.random.default_rng(seed).normal(0, 0.3, (len(words), dim)).astype(np.float32)
    np.save(folder / "embeddings.npy", vectors)
    Corpus(
        ids=np.zeros(1, np.int32),
        doc_starts=np.array([0, 1]),
        itos=words,
        counts=np.ones(len(words), np.int64),
        raw_tokens=1,
    ).save(folder / "corpus.npz")
    return vectors


def test_rows_are_aligned_by_word_and_unknown_words_start_random(tmp_path: Path) -> None:
    vectors = write_embed_run(tmp_path / "emb", ["bad", "movie", "good"], dim=4)
    itos = ["<pad>", "<unk>", "good", "bad", "cable", "tuner"]
    got = align(load_pretrained(tmp_path / "emb"), itos, seed=0)
    assert got.table.shape == (6, 4) and got.dim == 4
    assert (got.found, got.missing) == (2, 2)
    np.testing.assert_array_equal(got.table[2], vectors[2])  # "good" is row 2 of the run
    np.testing.assert_array_equal(got.table[3], vectors[0])  # "bad" is row 0
    assert not got.table[0].any()  # padding
    np.testing.assert_allclose(got.table[1], vectors.mean(axis=0))  # unknown id: mean vector
    unknown = got.table[4:]
    assert not np.isin(unknown, vectors).any()  # not copied from another word
    assert 0.05 < unknown.std() < 1.0  # drawn at the run's scale (σ = 0.3), not N(0, 1)
    again = align(load_pretrained(tmp_path / "emb"), itos, seed=0)
    np.testing.assert_array_equal(again.table, got.table)  # seeded
    other = align(load_pretrained(tmp_path / "emb"), itos, seed=1)
    assert not np.array_equal(other.table[4:], unknown)


def test_dimension_mismatch_names_the_file_and_the_field(tmp_path: Path) -> None:
    write_embed_run(tmp_path / "emb", ["good"], dim=8)
    with pytest.raises(ConfigError, match=r"embedding_dim = 100 .*embeddings\.npy.*dimension 8"):
        align(load_pretrained(tmp_path / "emb"), ["<pad>", "<unk>", "good"], seed=0, dim=100)


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        ("no_dir", "no such folder"),
        ("a_file", "a file, not a run folder"),
        ("no_vectors", r"embeddings\.npy not found"),
        ("no_corpus", r"corpus\.npz not found"),
        ("garbage_vectors", r"embeddings\.npy is not a numpy array"),
        ("garbage_corpus", r"corpus\.npz has no readable `itos`"),
        ("one_dim", r"embeddings\.npy has shape \(3,\)"),
        ("rows", r"lists 3 words but .*embeddings\.npy has 2 rows"),
        ("nan", "not all finite"),
    ],
)
def test_bad_run_dirs_are_config_errors_naming_the_file(
    tmp_path: Path, damage: str, match: str
) -> None:
    run = tmp_path / "emb"
    write_embed_run(run, ["a", "b", "c"], dim=2)
    if damage == "no_dir":
        run = tmp_path / "missing"
    elif damage == "a_file":
        run = run / "embeddings.npy"
    elif damage == "no_vectors":
        (run / "embeddings.npy").unlink()
    elif damage == "no_corpus":
        (run / "corpus.npz").unlink()
    elif damage == "garbage_vectors":
        (run / "embeddings.npy").write_bytes(b"not numpy")
    elif damage == "garbage_corpus":
        (run / "corpus.npz").write_bytes(b"PK garbage")
    elif damage == "one_dim":
        np.save(run / "embeddings.npy", np.zeros(3, np.float32))
    elif damage == "rows":
        np.save(run / "embeddings.npy", np.zeros((2, 2), np.float32))
    elif damage == "nan":
        np.save(run / "embeddings.npy", np.full((3, 2), np.nan, np.float32))
    with pytest.raises(ConfigError, match=match) as info:
        load_pretrained(run)
    assert info.value.exit_code == 2
    assert "init_embeddings" in info.value.user_message()


def test_dataset_vocab_in_either_layout(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d", vocab_size=4)  # vocab.json with a `words` map
    assert dataset_itos(data)[:4] == ["<pad>", "<unk>", "good", "bad"]
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "vocab.json").write_text(json.dumps({"itos": ["<pad>", "<unk>", "x"]}))
    assert dataset_itos(tmp_path / "e") == ["<pad>", "<unk>", "x"]
    assert initial_table(None, None, str(data), 0) is None  # no folder: nothing loaded


class _Events:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def write(self, event: dict[str, Any]) -> None:
        self.events.append(dict(event))

    def close(self) -> None:
        pass


@pytest.mark.slow
def test_training_starts_from_the_run_vectors(tmp_path: Path) -> None:
    from engine.sentiment.model import build_model, resolve_spec
    from engine.sentiment.trainer import DistEnv, Trainer

    data = write_dataset(tmp_path / "data", n_train=64, n_test=32, vocab_size=20)
    itos = dataset_itos(data)
    vectors = write_embed_run(tmp_path / "emb", ["bad", "good", *itos[6:]], dim=6)
    model_cfg = ModelConfig(init_embeddings=str(tmp_path / "emb"), hidden=4)
    init = initial_table(model_cfg.init_embeddings, None, str(data), seed=0)
    assert init is not None and init.missing == 2  # w4, w5
    spec = resolve_spec(model_cfg, len(itos), init.dim)
    assert spec.embedding_dim == 6  # follows the run, not the preset's 100
    model = build_model(spec, init.table)
    np.testing.assert_array_equal(model.embedding.weight.detach().numpy()[2], vectors[1])
    with pytest.raises(ConfigError, match="shape"):
        build_model(resolve_spec(model_cfg, len(itos) + 1, 6), init.table)

    sink = _Events()
    cfg = TrainConfig(
        data_dir=str(data),
        run_dir=str(tmp_path / "run"),
        epochs=1,
        batch_size=32,
        model=model_cfg,
        checkpoint_every_min=0,
        events_file=False,
    )
    Trainer(cfg, emitter=Emitter(sink), env=DistEnv()).fit()
    start = next(e for e in sink.events if e["type"] == "train_start")
    facts = {"found": len(itos) - 4, "missing": 2, "source": str(tmp_path / "emb")}
    assert start["init_embeddings"] == {
        **facts,
        "coverage": round((len(itos) - 4) / 20, 4),
        "top_found": len(itos) - 4,  # all 20 words are among the 1,000 most frequent
        "top_total": 20,
    }
    assert start["spec"]["embedding_dim"] == 6
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["model"]["embedding_dim"] == 6
    assert summary["init_embeddings"] == start["init_embeddings"]  # recorded with the result


@pytest.mark.slow
def test_train_command_exits_2_naming_the_missing_file(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data", n_train=64, n_test=32)
    (tmp_path / "emb").mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "engine.sentiment.train", "--data", str(data), "--run-dir",
         str(tmp_path / "run"), "--model-init-embeddings", str(tmp_path / "emb"), "--epochs", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "embeddings.npy not found" in proc.stdout + proc.stderr


def _sentitop_train(data: Path, run: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    from tests.run.conftest import sentitop

    args = ["train", "--data", str(data), "--run-dir", str(run), *flags]
    return sentitop(*args, env=dict(os.environ), timeout=120)


def test_sentitop_train_refuses_a_missing_run_before_any_rank_starts(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data", n_train=64, n_test=32)
    run = tmp_path / "run"
    proc = _sentitop_train(
        data, run, "--model-init-embeddings", str(tmp_path / "missing"), "--nproc", "2"
    )
    assert proc.returncode == 2, proc.stderr
    assert "init_embeddings" in proc.stderr and "no such folder" in proc.stderr
    assert "launch" not in proc.stdout + proc.stderr  # refused here, not by a failing rank
    assert not (run / "train_config.json").exists()
    write_embed_run(tmp_path / "emb", ["good"], dim=4)
    proc = _sentitop_train(
        data, run, "--model-init-embeddings", str(tmp_path / "emb"), "--model-embedding-dim", "8"
    )
    assert proc.returncode == 2, proc.stderr
    assert "embedding_dim = 8" in proc.stderr and "dimension 4" in proc.stderr
    assert not (run / "train_config.json").exists()

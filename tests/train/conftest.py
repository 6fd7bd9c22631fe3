"""Fixtures: tiny learnable datasets written directly with h5py in the preprocess layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest


def write_dataset(
    folder: Path,
    *,
    n_train: int = 512,
    n_test: int = 128,
    seq_len: int = 12,
    vocab_size: int = 50,
    chunk_rows: int = 64,
    seed: int = 0,
    dtype: str = "uint16",
) -> Path:
    """A dataset.h5 + vocab.json whose label is decided by word 2 vs word 3 counts.

    Positive texts hold more id 2 ("good") than id 3 ("bad"); lengths vary, padding is 0.
    """
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    ids = vocab_size + 2
    with h5py.File(folder / "dataset.h5", "w") as fh:
        for split, n in (("train", n_train), ("test", n_test)):
            lengths = rng.integers(1, seq_len + 1, size=n)
            labels = (rng.random(n) < 0.7).astype(np.uint8)
            tokens = np.zeros((n, seq_len), dtype=dtype)
            for i in range(n):
                row = rng.integers(4, ids, size=lengths[i])
                mark = 2 if labels[i] else 3
                row[rng.random(lengths[i]) < 0.4] = mark
                row[0] = mark
                tokens[i, : lengths[i]] = row
            group = fh.create_group(split)
            group.create_dataset("tokens", data=tokens, chunks=(min(chunk_rows, n), seq_len))
            group.create_dataset("labels", data=labels, chunks=(min(chunk_rows, n),))
            group.create_dataset(
                "lengths", data=lengths.astype(np.int32), chunks=(min(chunk_rows, n),)
            )
        fh.attrs.update(
            vocab_size=vocab_size, seq_len=seq_len, pad_id=0, unk_id=1, format_version=1
        )
    words = {"<pad>": 0, "<unk>": 1, "good": 2, "bad": 3}
    words.update({f"w{i}": i for i in range(4, ids)})
    (folder / "vocab.json").write_text(json.dumps({"words": words, "settings": {}}))
    return folder


def train_on_reviews(
    folder: Path, reviews: list[tuple[str, bool]], model: Any, epochs: int, **train: Any
) -> tuple[Path, Path, dict[str, Any]]:
    """Preprocess (text, positive) reviews and train a small model on them in one process:
    (data folder, run folder, the fit's summary); ``train``: more TrainConfig settings."""
    from engine.config import PreprocessConfig, TrainConfig
    from engine.preprocess import run_preprocess
    from engine.sentiment.trainer import DistEnv, Trainer

    raw = folder / "reviews.jsonl"
    raw.write_text(
        "".join(json.dumps({"text": t, "rating": 5 if pos else 1}) + "\n" for t, pos in reviews)
    )
    data, run = folder / "data", folder / "run"
    run_preprocess(PreprocessConfig(inputs=[str(raw)], output=str(data), workers=1))
    settings: dict[str, Any] = {
        "batch_size": 32, "lr": 2e-2, "warmup_steps": 1, "seed": 1, "events_file": False
    }  # fmt: skip
    cfg = TrainConfig(
        data_dir=str(data),
        run_dir=str(run),
        epochs=epochs,
        lr_schedule="constant",
        model=model,
        checkpoint_every_min=0,
        **{**settings, **train},
    )
    return data, run, Trainer(cfg, env=DistEnv()).fit()


@pytest.fixture
def tiny_data(tmp_path: Path) -> Path:
    """A 512/128-sample dataset folder."""
    return write_dataset(tmp_path / "data")


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    """Tests run beside other jobs on 2 cores; spinning OpenMP threads then crawl."""
    import torch

    torch.set_num_threads(1)

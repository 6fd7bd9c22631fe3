"""Helpers for preprocessing tests: write review files, run the job, read the outputs."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from engine.config import PreprocessConfig
from engine.preprocess import run_preprocess

DATA = Path(
    os.environ.get("SENTITOP_TEST_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")
)
"""The real review files (/work/shared/data; SENTITOP_TEST_DATA names another folder)."""
MUSICAL = DATA / "amazon2014_Musical_Instruments_5.jsonl.gz"
needs_spark = pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or shutil.which("java") is None,
    reason="pyspark and java are needed for the spark runner",
)
"""Skips a test of the spark runner where pyspark or java is missing."""


def review(text: Any, rating: Any = 5.0, **extra: Any) -> bytes:
    """One McAuley-style JSON line (no newline)."""
    return json.dumps({"reviewerID": "A1", "reviewText": text, "overall": rating, **extra}).encode()


def write_lines(
    path: Path, lines: Iterable[bytes], *, gz: bool = False, end_newline: bool = True
) -> Path:
    """Write raw lines joined by newlines (gzip when asked)."""
    data = b"\n".join(lines) + (b"\n" if end_newline else b"")
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def load_dataset(out: Path) -> dict[str, Any]:
    """Every array and attribute of OUT/dataset.h5, plus vocab.json and stats.json."""
    result: dict[str, Any] = {}
    with h5py.File(out / "dataset.h5", "r") as h5:
        result["attrs"] = {k: (v.item() if hasattr(v, "item") else v) for k, v in h5.attrs.items()}
        for split in ("train", "test"):
            for name in ("tokens", "labels", "lengths"):
                result[f"{split}/{name}"] = h5[split][name][()]
            result[f"{split}/chunks"] = h5[split]["tokens"].chunks
    result["vocab"] = json.loads((out / "vocab.json").read_text())
    result["stats"] = json.loads((out / "stats.json").read_text())
    return result


def assert_same_dataset(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Arrays, attributes and vocabulary identical."""
    assert a["attrs"] == b["attrs"]
    assert a["vocab"] == b["vocab"]
    for split in ("train", "test"):
        for name in ("tokens", "labels", "lengths"):
            key = f"{split}/{name}"
            assert a[key].dtype == b[key].dtype, key
            assert np.array_equal(a[key], b[key]), key


@pytest.fixture
def preprocess(tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """Run preprocessing into a fresh folder and return the loaded outputs."""
    counter = iter(range(1000))

    def run(inputs: list[Path], **kwargs: Any) -> dict[str, Any]:
        options = {k: kwargs.pop(k) for k in ("rating_max", "negative_max") if k in kwargs}
        out = tmp_path / f"out{next(counter)}"
        kwargs.setdefault("workers", 1)
        cfg = PreprocessConfig(inputs=[str(p) for p in inputs], output=str(out), **kwargs)
        stats = run_preprocess(cfg, **options)
        loaded = load_dataset(out)
        assert loaded["stats"] == stats
        loaded["out"] = out
        return loaded

    return run

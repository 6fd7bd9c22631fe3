"""Training refuses a dataset whose train or test split is empty or holds one class (torch-free,
so launchers check before they start ranks); the majority-rate check of a finished run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import DatasetError

DATASET_FILE = "dataset.h5"


def check_split(path: str | Path, split: str, labels: np.ndarray) -> None:
    """DatasetError (exit 2) naming ``path`` when ``labels`` (0/1) is empty or one class."""
    n = len(labels)
    if n == 0:
        raise DatasetError(
            f"{path}: the {split} split is empty, nothing to "
            + ("train on" if split == "train" else "measure accuracy on"),
            hint="preprocess more reviews (or a larger --test-fraction)",
        )
    positive = int(np.count_nonzero(labels))
    if positive in (0, n):
        have = "positive" if positive else "negative"
        raise DatasetError(
            f"{path}: all {n:,} reviews of the {split} split are {have}; training needs both "
            "classes",
            hint="preprocess reviews of both classes (see stats.json: positive/negative)",
        )


def check_splits(path: str | Path, train: np.ndarray, test: np.ndarray) -> None:
    """:func:`check_split` of both splits' labels."""
    check_split(path, "train", train)
    check_split(path, "test", test)


def check_dataset(data_dir: str | Path, max_train_samples: int | None = None) -> None:
    """Check both splits of ``data_dir/dataset.h5`` (its labels only; a missing file is left
    to the loader's own error)."""
    import h5py

    path = Path(data_dir) / DATASET_FILE
    if not path.is_file():
        return
    with h5py.File(path, "r") as fh:
        for split in ("train", "test"):
            if f"{split}/labels" not in fh:
                return  # the loader names the missing part
            limit = max_train_samples if split == "train" else None
            check_split(path, split, fh[f"{split}/labels"][:limit])


def majority_check(
    confusion: Sequence[Sequence[int]] | None, accuracy: float | None
) -> dict[str, Any]:
    """Summary fields: ``majority_rate`` (share of the test split's commoner class; None without
    a test result) and ``warnings``: [a ``below_majority`` {code, message}] when the accuracy
    does not beat it, else []."""
    n = sum(sum(row) for row in confusion) if confusion else 0
    if not confusion or accuracy is None or not n:
        return {"majority_rate": None, "warnings": []}
    (tn, fp), (fn, tp) = confusion
    negatives, positives = tn + fp, fn + tp
    rate = max(negatives, positives) / n
    if accuracy > rate:
        return {"majority_rate": rate, "warnings": []}
    always = "positive" if positives >= negatives else "negative"
    message = (
        f"test accuracy {accuracy:.4f} does not beat the majority rate {rate:.4f} (always "
        f"answering {always}): the model learned nothing useful"
    )
    return {"majority_rate": rate, "warnings": [{"code": "below_majority", "message": message}]}

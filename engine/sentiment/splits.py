"""Training refuses an unreadable dataset.h5, another layout, or a split empty or of one class
(torch-free, so launchers check before they start ranks); the majority check of a finished run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import DatasetError

DATASET_FILE = "dataset.h5"
SUPPORTED_FORMAT_VERSIONS = (1,)
LAYOUT = tuple(f"{s}/{p}" for s in ("train", "test") for p in ("tokens", "labels", "lengths"))
"""The datasets every dataset.h5 holds (engine/sentiment/data.py describes them)."""


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


def open_dataset(path: Path) -> Any:
    """``path`` opened read-only with h5py, its layout and format_version checked; DatasetError
    (exit 2) naming it when it cannot be read (truncated, not HDF5) or holds another layout."""
    import h5py

    try:
        fh = h5py.File(path, "r")
    except OSError as exc:
        raise DatasetError(
            f"{path}: not a readable HDF5 file (truncated or corrupt?): {exc}",
            hint="re-run preprocessing into an empty folder",
        ) from None
    try:
        for name in LAYOUT:
            if name not in fh:
                raise DatasetError(
                    f"{path}: dataset /{name} is missing",
                    hint="re-run preprocessing into an empty folder",
                )
        version = int(fh.attrs.get("format_version", -1))
        if version not in SUPPORTED_FORMAT_VERSIONS:
            raise DatasetError(
                f"{path}: format_version {version} is not supported "
                f"(this sentitop reads {', '.join(map(str, SUPPORTED_FORMAT_VERSIONS))})",
                hint="re-run preprocessing with this sentitop",
            )
    except BaseException:
        fh.close()
        raise
    return fh


def check_dataset(data_dir: str | Path, max_train_samples: int | None = None) -> None:
    """Check ``data_dir/dataset.h5`` before any rank starts: readable, the expected layout and
    format_version, and both splits' labels (a missing file is left to the loader's own
    error)."""
    path = Path(data_dir) / DATASET_FILE
    if not path.is_file():
        return
    with open_dataset(path) as fh:
        for split in ("train", "test"):
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

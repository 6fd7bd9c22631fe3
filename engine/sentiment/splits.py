"""Training refuses an unreadable dataset.h5, another layout, a vocab.json not its own, or a
split empty or of one class (torch-free, so launchers check before they start ranks); the
majority check of a finished run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import ConfigError, DatasetError

DATASET_FILE = "dataset.h5"
VOCAB_FILE = "vocab.json"
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
    format_version, the vocab.json beside it its own (:func:`check_vocab`), and both splits'
    labels (a missing dataset.h5 is left to the loader's own error)."""
    path = Path(data_dir) / DATASET_FILE
    if not path.is_file():
        return
    with open_dataset(path) as fh:
        check_vocab(path, dict(fh.attrs))
        for split in ("train", "test"):
            width = check_shapes(path, fh, split)
            limit = max_train_samples if split == "train" else None
            labels, lengths = fh[f"{split}/labels"][:limit], fh[f"{split}/lengths"][:limit]
            check_rows(path, split, labels, lengths, width)
            check_split(path, split, labels)


REDO = "re-run preprocessing (or synth --dataset) into an empty folder"


def check_shapes(path: str | Path, fh: Any, split: str) -> int:
    """The row width of ``split``; DatasetError unless its tokens, labels and lengths hold
    one row per review (and the split's ``rows`` attribute says as many)."""
    tokens = fh[f"{split}/tokens"]
    if len(tokens.shape) != 2:
        raise DatasetError(f"{path}: /{split}/tokens has shape {tokens.shape}, not (rows, "
                           "columns)", hint=REDO)  # fmt: skip
    rows = int(tokens.shape[0])
    for name in ("labels", "lengths"):
        shape = tuple(fh[f"{split}/{name}"].shape)
        if shape != (rows,):
            raise DatasetError(
                f"{path}: /{split}/{name} has shape {shape} but /{split}/tokens {rows:,} rows: "
                "each array of a split holds one row per review (a damaged or hand-edited file?)",
                hint=REDO,
            )
    said = fh[split].attrs.get("rows")
    if said is not None and int(said) != rows:
        raise DatasetError(f"{path}: /{split} says it holds {int(said):,} rows (its rows "
                           f"attribute) but its arrays hold {rows:,}", hint=REDO)  # fmt: skip
    return int(tokens.shape[1])


def check_rows(
    path: str | Path, split: str, labels: np.ndarray, lengths: np.ndarray, width: int
) -> None:
    """DatasetError unless every label is 0 or 1 and every length within the row width (a
    label 2 trained to a negative loss and an "ok" run)."""
    check_values(path, f"{split}/labels", labels, 0, 1, "a label is 0 (negative) or 1 (positive)")
    rule = f"a length counts the row's tokens, at most its {width} columns"
    check_values(path, f"{split}/lengths", lengths, 0, width, rule)


def check_values(
    path: str | Path, name: str, values: np.ndarray, low: int, high: int, rule: str
) -> None:
    """DatasetError naming the first row of ``values`` outside [low, high] and how many are."""
    bad = np.flatnonzero((values < low) | (values > high))
    if bad.size:
        first = int(bad[0])
        raise DatasetError(
            f"{path}: /{name} holds {bad.size:,} value(s) outside {low}..{high} (row {first:,}: "
            f"{values[first]}); {rule}",
            hint=REDO,
        )


def train_rows(data_dir: str | Path, max_train_samples: int | None = None) -> int:
    """The training samples a run on ``data_dir`` uses (its train split, at most
    ``max_train_samples``)."""
    with open_dataset(Path(data_dir) / DATASET_FILE) as fh:
        rows = int(fh["train/labels"].shape[0])
    return rows if max_train_samples is None else min(rows, max_train_samples)


def check_batch_size(data_dir: str | Path, cfg: Any) -> None:
    """Refuse a batch size (a TrainConfig's ``batch_size``) above both the training samples and
    ``lr_reference_batch`` (ConfigError, exit 2): every step would be the whole split, at a
    learning rate scaled up to the batch asked for (lr × batch / lr_reference_batch), and
    training diverged (loss 12.5 at 1,000,000 on 1,318 samples) yet "finished". A small
    dataset at the default batch only takes one step an epoch, at lr itself."""
    rows = train_rows(data_dir, cfg.max_train_samples)
    if cfg.batch_size <= max(rows, cfg.lr_reference_batch):
        return
    scaled = cfg.lr * cfg.batch_size / cfg.lr_reference_batch
    raise ConfigError(
        f"batch size {cfg.batch_size:,} (--batch-size; train.batch_size in a profile) is larger "
        f"than the {rows:,} training samples of {Path(data_dir) / DATASET_FILE}: each step "
        f"would be the whole split, at a learning rate scaled to that batch ({scaled:.3g} = "
        "lr × batch / lr_reference_batch)",
        hint=f"use a batch size of {max(rows, cfg.lr_reference_batch):,} or less",
    )


def check_vocab(dataset: Path, attrs: dict[str, Any]) -> None:
    """DatasetError (exit 2) unless the vocab.json beside ``dataset`` is the vocabulary its
    token ids were encoded with: same hash of its content as the dataset's ``vocab_sha256``
    (written by preprocess and synth), else, for a dataset without one, as many ids. The run
    folder keeps a copy for eval and predict: another dataset's would read every text as
    other words, and its negation and lexicon ids would mark other words while training."""
    path = dataset.parent / VOCAB_FILE
    redo = "copy in the vocab.json written with this dataset.h5, or re-run preprocessing"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(
            f"{path} not found: eval and predict need the vocabulary {dataset.name} was "
            "encoded with",
            hint=redo,
        ) from None
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: unreadable ({exc})", hint=redo) from None
    if not isinstance(doc, dict):
        raise DatasetError(f"{path}: not a vocabulary (a JSON object)", hint=redo)
    expected = attrs.get("vocab_sha256")
    if expected is not None:
        content = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
        if content == str(expected):
            return
        raise DatasetError(
            f"{path} is not the vocabulary {dataset} was encoded with (its content differs "
            f"from the dataset's vocab_sha256; {_ids(doc)} ids here, "
            f"{int(attrs.get('vocab_size', -2)) + 2:,} in the dataset): a vocab.json of "
            "another dataset?",
            hint=redo,
        )
    words = doc.get("itos", doc.get("words"))
    ids = int(attrs.get("vocab_size", -2)) + 2
    if isinstance(words, list | dict) and "vocab_size" in attrs and len(words) != ids:
        raise DatasetError(
            f"{path} holds {len(words):,} ids but {dataset} was encoded with {ids:,}: a "
            "vocab.json of another dataset?",
            hint=redo,
        )


def _ids(doc: dict[str, Any]) -> str:
    words = doc.get("itos", doc.get("words"))
    return f"{len(words):,}" if isinstance(words, list | dict) else "no"


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

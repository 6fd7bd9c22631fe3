"""Inputs no result can come from (empty, garbage bytes, one class, every line skipped), shared
by the data-quality tests of preprocess, train and run."""

from __future__ import annotations

import gzip
import json
import zipfile
from pathlib import Path

import h5py
import numpy as np


def _reviews(path: Path, rows: list[tuple[str, object]]) -> Path:
    lines = [json.dumps({"reviewText": text, "overall": rating}) for text, rating in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def empty_file(folder: Path) -> Path:
    """A file of zero bytes."""
    path = folder / "empty.jsonl"
    path.write_bytes(b"")
    return path


def garbage_bytes(folder: Path) -> Path:
    """Random bytes (seeded), no valid line in them."""
    path = folder / "garbage.jsonl"
    path.write_bytes(np.random.default_rng(7).bytes(4000))
    return path


def one_class(folder: Path) -> Path:
    """200 well-formed, distinct reviews, every one rated 5 (all positive)."""
    words = ["good", "great", "fine", "love", "solid", "works", "sound", "cable", "nice", "best"]
    rows = [(f"{words[i % 10]} {words[i // 10 % 10]} item number {i}", 5.0) for i in range(200)]
    return _reviews(folder / "one-class.jsonl", rows)


def all_skipped(folder: Path) -> Path:
    """200 review lines whose rating is outside 1..5: every line is skipped."""
    return _reviews(folder / "all-skipped.jsonl", [(f"great item {i}", 9.0) for i in range(200)])


def truncated_gzip(folder: Path) -> Path:
    """A gzip file of 400 good reviews cut off half-way (an interrupted download)."""
    lines = "".join(
        json.dumps({"reviewText": f"good sturdy item {i}", "overall": 1 + i % 5}) + "\n"
        for i in range(400)
    )
    whole = gzip.compress(lines.encode())
    path = folder / "truncated.jsonl.gz"
    path.write_bytes(whole[: len(whole) // 2])
    return path


def damaged_gzip(folder: Path) -> Path:
    """The gzip magic bytes followed by junk."""
    path = folder / "damaged.jsonl.gz"
    path.write_bytes(b"\x1f\x8b" + np.random.default_rng(8).bytes(2000))
    return path


BAD_INPUTS = {
    "truncated gzip": truncated_gzip,
    "damaged gzip": damaged_gzip,
    "empty file": empty_file,
    "garbage bytes": garbage_bytes,
    "all one class": one_class,
    "100% skipped lines": all_skipped,
}
"""Name -> writer(folder) -> path of the written input."""


def labelled_dataset(folder: Path, train: list[int], test: list[int], seq_len: int = 4) -> Path:
    """A dataset.h5 + vocab.json in the preprocess layout with the given 0/1 labels (what the
    preprocessing before the quality gate wrote for such inputs: empty or one-class splits)."""
    folder.mkdir(parents=True, exist_ok=True)
    with h5py.File(folder / "dataset.h5", "w") as fh:
        for split, labels in (("train", train), ("test", test)):
            n = len(labels)
            group = fh.create_group(split)
            group.create_dataset("tokens", data=np.full((n, seq_len), 2, dtype=np.uint16))
            group.create_dataset("labels", data=np.asarray(labels, dtype=np.uint8))
            group.create_dataset("lengths", data=np.ones(n, dtype=np.int32))
        fh.attrs.update(vocab_size=1, seq_len=seq_len, pad_id=0, unk_id=1, format_version=1)
    (folder / "vocab.json").write_text(json.dumps({"itos": ["<pad>", "<unk>", "good"]}))
    return folder


def torch_like_zip(path: Path, pickle: bytes = b"") -> Path:
    """A zip laid out as torch.save writes one (``archive/data.pkl``): what the torch-free
    checkpoint check (remote.resume.looks_like_checkpoint) takes for a checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as saved:
        saved.writestr("archive/data.pkl", pickle)
    return path

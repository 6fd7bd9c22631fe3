"""Write a large synthetic dataset.h5 (+ vocab.json, stats.json) directly, for benchmarks."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.config import MAX_SEQ_LEN
from engine.errors import InputError, StorageError
from engine.preprocess.h5_write import written_h5
from engine.preprocess.output_folder import make_stage, swap_in
from engine.preprocess.reduce import PAD_ID, UNK_ID, token_dtype
from engine.preprocess.writer import (
    FORMAT_VERSION,
    SPLITS,
    create_split,
    publish_dataset,
)
from engine.synth.size import format_size

BLOCK_ROWS = 1 << 15
"""Rows generated and written per step (bounds memory: 32 Ki × seq_len tokens)."""
POSITIVE_SHARE = 0.7
"""Share of positive rows (the real files' balance after de-duplication)."""
MEAN_LENGTH = 45.0
"""Mean content words per review before truncation (geometric lengths, at least 1)."""
MAX_VOCAB = 2_000_000
"""Largest --vocab-size: the vocabulary file lists every word, and a model trained on it holds
an embedding row per word in every rank (2 M × 128 floats = 1 GB). 10 G words ran the box out
of memory building the word list."""
SENTIMENT_WORDS = 64
"""Word ids per label that carry sentiment (moderately rare ones, from vocab_size / 10 on):
a positive row draws some of its words from the first SENTIMENT_WORDS, a negative one from the
next SENTIMENT_WORDS."""
SENTIMENT_RATE = 0.1
"""Share of a row's tokens drawn from its label's sentiment words (the learnable signal)."""
LABEL_NOISE = 0.08
"""Share of rows whose label is flipped after their tokens were drawn (no model gets 100 %)."""
UNK_RATE = 0.02
"""Share of tokens written as the unknown id."""


def _block(
    rng: np.random.Generator, n: int, seq_len: int, vocab_size: int, dtype: Any
) -> tuple[npt.NDArray[Any], npt.NDArray[np.uint8], npt.NDArray[np.int32]]:
    """(tokens n × seq_len, labels n, lengths n) of n synthetic rows, padded with PAD_ID."""
    labels = (rng.random(n, dtype=np.float32) < POSITIVE_SHARE).astype(np.uint8)
    lengths = np.minimum(rng.geometric(1.0 / MEAN_LENGTH, n), seq_len).astype(np.int32)
    filled = np.arange(seq_len)[None, :] < lengths[:, None]  # (n, L) word positions
    total = int(lengths.sum())
    # Zipf-like word ids: log-uniform over the vocabulary (density ∝ 1/rank), 2 .. vocab_size+1
    u = rng.random(total, dtype=np.float32)
    ids = np.exp(u * np.float32(np.log(vocab_size))).astype(np.int32) + 1
    np.minimum(ids, vocab_size + 1, out=ids)
    signal = rng.random(total, dtype=np.float32)
    half = min(SENTIMENT_WORDS, max(1, vocab_size // 2))
    base = 2 + min(vocab_size // 10, vocab_size - 2 * half)
    negative = np.repeat(1 - labels.astype(np.int32), lengths)
    lean = base + rng.integers(0, half, total, dtype=np.int32) + half * negative
    ids = np.where(signal < SENTIMENT_RATE, lean, ids)
    ids[signal > 1.0 - UNK_RATE] = UNK_ID
    tokens = np.zeros((n, seq_len), dtype=dtype)
    tokens[filled] = ids
    flip = rng.random(n, dtype=np.float32) < LABEL_NOISE
    labels[flip] ^= 1
    return tokens, labels, lengths


def write_synthetic_dataset(
    out_dir: str | Path,
    n_train: int,
    n_test: int,
    seq_len: int = 100,
    vocab_size: int = 10_000,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Write out_dir/dataset.h5, vocab.json and stats.json in the preprocessor's layout (same
    groups, dtypes, chunking and attributes) holding random rows with a learnable sentiment
    signal; no raw text is generated. The same arguments give the same arrays. A split of two
    rows or more holds both labels (should every row draw one label, row 0's is flipped).
    `progress` gets the rows written so far, after each block and once more just before the
    files are published; an exception it raises (a stop: Ctrl-C, SIGTERM) ends the call like any
    failure. Returns the stats written to stats.json.

    The set is built in a stage folder beside out_dir and swapped in whole (as preprocessing's
    output is): InputError (naming the option) when out_dir is a file, holds other files or its
    disk lacks the space; on any failure or interruption nothing is left behind (no folder this
    call created) and a dataset already in out_dir stays as it was."""
    for name, value in (("n_train", n_train), ("n_test", n_test)):
        if value < 0:
            raise InputError(f"{name}: must be >= 0, got {value}")
    if n_train + n_test <= 0:
        raise InputError("n_train + n_test: at least one row is needed")
    if not 1 <= seq_len <= MAX_SEQ_LEN:
        raise InputError(f"--seq-len: must be 1 to {MAX_SEQ_LEN:,} tokens, got {seq_len:,}")
    if not 2 <= vocab_size <= MAX_VOCAB:
        raise InputError(
            f"--vocab-size: must be 2 to {MAX_VOCAB:,} words, got {vocab_size:,}",
            hint="the real corpus's default vocabulary is 30,000 words",
        )
    if seed < 0:
        raise InputError(f"--seed: must be >= 0, got {seed}")
    out = Path(out_dir)
    num_ids = vocab_size + 2
    dtype = token_dtype(num_ids)
    need = (n_train + n_test) * (seq_len * np.dtype(dtype).itemsize + 5)
    missing = _check_space(out, need)
    stage: Path | None = None
    try:
        stage = make_stage(out, "--dataset")  # the new set is built beside the old one
        try:
            stats = _write(stage, n_train, n_test, seq_len, vocab_size, seed, dtype, progress)
        except OSError as exc:  # a full disk or a file-size limit, while HDF5 wrote
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            raise StorageError(
                f"writing the dataset beside {out} failed: {why}",
                hint=f"it needs about {format_size(need)} free there; the previous dataset, "
                "if any, is unchanged",
            ) from None
        try:
            swap_in(stage, out, "--dataset")  # the previous set (if any) now sits at `stage`
        except OSError as exc:
            raise StorageError(
                f"could not put the new dataset in place at {out}: {exc.strerror or exc}",
                hint="the previous dataset, if any, is unchanged",
            ) from exc
    except BaseException:  # Ctrl-C, SIGTERM (see the CLI), a full disk: no folder left behind
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        for folder in reversed(missing):  # parents this call created, innermost first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    shutil.rmtree(stage, ignore_errors=True)
    return stats


def _check_space(out: Path, need: int) -> list[Path]:
    """Check `out` is no file and the disk it will be on holds `need` bytes (InputError
    otherwise); returns the folders of `out`'s path that do not exist yet, outermost first."""
    if out.exists() and not out.is_dir():
        raise InputError(
            f"--dataset: {str(out)!r} is a file, not a folder",
            hint="give a folder (created when missing; an older dataset in it is replaced)",
        )
    missing = [p for p in (out, *out.parents) if not p.exists()][::-1]
    existing = next(p for p in (out, *out.parents) if p.exists())
    free = shutil.disk_usage(existing).free
    if free < need:
        raise InputError(
            f"--reviews: the dataset needs {format_size(need)} but {str(existing)!r} has only "
            f"{format_size(free)} free",
            hint="give fewer --reviews, a shorter --seq-len or a folder on a larger disk",
        )
    return missing


def _write(
    out: Path,
    n_train: int,
    n_test: int,
    seq_len: int,
    vocab_size: int,
    seed: int,
    dtype: Any,
    progress: Callable[[int], None] | None,
) -> dict[str, Any]:
    """The body of write_synthetic_dataset: the three files, written into the stage folder
    `out`."""
    started = time.perf_counter()
    num_ids = vocab_size + 2
    itos = ["<pad>", "<unk>", *(f"w{i}" for i in range(vocab_size))]
    vocab_doc = {
        "format_version": FORMAT_VERSION,
        "pad_id": PAD_ID,
        "unk_id": UNK_ID,
        "vocab_size": vocab_size,
        "itos": itos,
        "settings": {
            "seq_len": seq_len,
            "vocab_size_requested": vocab_size,
            "keep_negations": False,
            "append_summary": False,
            "format": "synthetic",
            "text_field": None,
            "rating_field": None,
            "test_fraction": n_test / (n_train + n_test),
            "max_line_bytes": 0,
            "specs": [],
            "stopwords": [],
            "synthetic": {"seed": seed},
        },
    }
    vocab_bytes = json.dumps(vocab_doc, sort_keys=True).encode()
    tmp_h5 = out / "dataset.h5.partial"
    attrs: dict[str, Any] = {
        "vocab_size": vocab_size,
        "num_ids": num_ids,
        "seq_len": seq_len,
        "pad_id": PAD_ID,
        "unk_id": UNK_ID,
        "format_version": FORMAT_VERSION,
        "vocab_sha256": hashlib.sha256(vocab_bytes).hexdigest(),
    }
    with written_h5(tmp_h5) as h5:  # a full disk: StorageError, not a crashed interpreter
        positive, done = _fill(h5, attrs, (n_train, n_test), seq_len, vocab_size, seed, dtype,
                               progress)  # fmt: skip
    seconds = time.perf_counter() - started
    total = n_train + n_test
    stats: dict[str, Any] = {
        "read": total,
        "kept": total,
        "skipped_total": 0,
        "skipped": {},
        "skipped_examples": {},
        "duplicates": 0,
        "distinct": total,
        "positive": positive,
        "negative": total - positive,
        "train": n_train,
        "test": n_test,
        "vocab_size": vocab_size,
        "input_bytes": 0,
        "seconds": round(seconds, 3),
        "mb_per_s": 0.0,
        "runner": "synthetic",
        "workers": None,
        "cpu_seconds": None,
        "inputs": [],
        "lines_per_file": [],
        "empty_files": [],
        "synthetic": {
            "seed": seed,
            "token_bytes": total * seq_len * np.dtype(dtype).itemsize,
            "rows_per_s": round(total / max(seconds, 1e-9)),
        },
    }
    docs = {out / "vocab.json": vocab_doc, out / "stats.json": stats}
    if progress is not None:  # once more just before publishing: a stop it raises leaves
        progress(done)  # nothing, even one that reached Python after its last call
    publish_dataset(tmp_h5, out / "dataset.h5", docs)
    return stats


def _fill(
    h5: Any,
    attrs: dict[str, Any],
    sizes: tuple[int, int],
    seq_len: int,
    vocab_size: int,
    seed: int,
    dtype: Any,
    progress: Callable[[int], None] | None,
) -> tuple[int, int]:
    """Write the attributes and both splits' random rows; (positive labels, rows written)."""
    positive = done = 0
    for key, attr in attrs.items():
        h5.attrs[key] = attr
    for split_no, (split, n) in enumerate(zip(SPLITS, sizes, strict=True)):
        group = h5.create_group(split)
        create_split(group, n, seq_len, dtype)
        rng = np.random.default_rng([seed, split_no])
        split_positive = 0
        for start in range(0, n, BLOCK_ROWS):
            stop = min(n, start + BLOCK_ROWS)
            tokens, labels, lengths = _block(rng, stop - start, seq_len, vocab_size, dtype)
            group["tokens"][start:stop] = tokens
            group["labels"][start:stop] = labels
            group["lengths"][start:stop] = lengths
            positive += int(labels.sum())
            split_positive += int(labels.sum())
            done += stop - start
            if progress is not None:
                progress(done)
        if n >= 2 and split_positive in (0, n):  # training needs both labels per split
            group["labels"][0] = 1 - group["labels"][0]
            positive += 1 if split_positive == 0 else -1
    return positive, done

"""Encode new raw text exactly as a preprocessed dataset was encoded (for eval/predict)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import DatasetError
from engine.preprocess.records import RecordSpec
from engine.preprocess.reduce import encode_texts, token_dtype
from engine.preprocess.text import clean_text
from engine.preprocess.writer import FORMAT_VERSION


@dataclass(frozen=True, slots=True)
class Encoder:
    """Cleaning, stopwords, vocabulary and sequence length of one dataset."""

    index: dict[bytes, int]
    """word → id (ids from 2; 0 = padding, 1 = unknown)."""
    stop: frozenset[bytes]
    """Stopwords removed before encoding (as recorded when the dataset was built)."""
    seq_len: int
    """Tokens per sequence."""
    specs: tuple[RecordSpec, ...]
    """Record specs of the dataset's inputs (fields and label rule), for reading raw files."""
    settings: dict[str, Any]
    """Everything recorded under vocab.json's `settings`."""

    @property
    def num_ids(self) -> int:
        """Embedding rows needed: vocabulary + padding + unknown."""
        return len(self.index) + 2

    def encode_texts(
        self, texts: list[str], counted: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(tokens N×seq_len, lengths N) of raw texts; a text with no content word gets
        length 0 (all padding). ``counted`` (N integers), when given, receives each text's
        content words before the seq_len cut (more than seq_len: the rest is not read)."""
        cleaned = [clean_text(t) for t in texts]
        dtype = token_dtype(self.num_ids)
        return encode_texts(cleaned, self.index, self.stop, self.seq_len, dtype, counted)


def load_encoder(data_dir: str | Path) -> Encoder:
    """The Encoder recorded in DATA_DIR/vocab.json (raises DatasetError if missing/unknown)."""
    path = Path(data_dir) / "vocab.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(
            f"{path} not found", hint="run `sentitop preprocess` for this folder first"
        ) from None
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: unreadable ({exc})") from None
    if doc.get("format_version") != FORMAT_VERSION:
        raise DatasetError(
            f"{path}: format_version {doc.get('format_version')!r}, expected {FORMAT_VERSION}",
            hint="re-run `sentitop preprocess` with this version of sentitop",
        )
    settings = doc["settings"]
    itos = doc["itos"]
    return Encoder(
        index={w.encode(): i for i, w in enumerate(itos) if i >= 2},
        stop=frozenset(w.encode() for w in settings["stopwords"]),
        seq_len=int(settings["seq_len"]),
        specs=tuple(RecordSpec(**s) for s in settings["specs"]),
        settings=settings,
    )

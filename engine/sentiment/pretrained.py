"""Initialise a classifier's embedding table from an embeddings run, aligned word by word.

An embeddings run (``sentitop embed``) leaves ``embeddings.npy`` (V × d float32) and
``corpus.npz`` (its ``itos``: row i is the vector of word i). The dataset's vocabulary
(``vocab.json`` ``itos``: 0 = padding, 1 = unknown, then words) is matched by word: a word the
run knows gets its vector; a word it does not know gets a random vector drawn from N(0, σ²),
σ = the standard deviation of the run's vectors (so known and unknown rows share one scale),
from a generator seeded with the training seed; the unknown id gets the mean vector; padding
stays zero. Torch-free (numpy only) so the config check can run before any rank starts.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.config import ModelConfig
from engine.errors import ConfigError
from engine.sentiment.presets import embeddings_folder_of

VECTORS_FILE = "embeddings.npy"
CORPUS_FILE = "corpus.npz"
LOW_COVERAGE = 0.5
"""Share of the dataset's words an embeddings run must know for its table to start quietly."""


@dataclass(frozen=True, slots=True)
class Pretrained:
    """Vectors of an embeddings run and the word of each row."""

    vectors: np.ndarray
    """(V, d) float32."""
    words: list[str]
    """Word of each row."""
    path: Path

    @property
    def dim(self) -> int:
        """Vector size d."""
        return int(self.vectors.shape[1])


def load_pretrained(run_dir: str | Path) -> Pretrained:
    """The vectors and words of an embeddings run folder (ConfigError naming the file when it
    is missing, unreadable or inconsistent)."""
    run = Path(run_dir)
    field = "train.model.init_embeddings"
    if not run.is_dir():
        raise ConfigError(
            f"{field} = {str(run)!r}: "
            + ("a file, not a run folder" if run.exists() else "no such folder"),
            hint="pass the --run-dir of a finished `sentitop embed` run",
        )
    vec_path, corpus_path = run / VECTORS_FILE, run / CORPUS_FILE
    for path in (vec_path, corpus_path):
        if not path.is_file():
            raise ConfigError(
                f"{field}: {path} not found — {run} is not a finished embeddings run",
                hint="pass the --run-dir of a finished `sentitop embed` run",
            )
    try:
        vectors = np.load(vec_path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{field}: {vec_path} is not a numpy array file ({exc})") from None
    if vectors.ndim != 2 or vectors.shape[0] < 1 or vectors.shape[1] < 1:
        raise ConfigError(
            f"{field}: {vec_path} has shape {vectors.shape}; expected (words, dim)",
        )
    if not np.issubdtype(vectors.dtype, np.floating) or not np.isfinite(vectors).all():
        raise ConfigError(f"{field}: {vec_path} holds {vectors.dtype} values that are not all "
                          "finite floats")  # fmt: skip
    try:
        with np.load(corpus_path, allow_pickle=False) as z:
            words = list(json.loads(str(z["itos"])))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"{field}: {corpus_path} has no readable `itos` ({exc})") from None
    if len(words) != vectors.shape[0]:
        raise ConfigError(
            f"{field}: {corpus_path} lists {len(words)} words but {vec_path} has "
            f"{vectors.shape[0]} rows",
            hint="the two files come from different runs; re-run `sentitop embed`",
        )
    return Pretrained(vectors.astype(np.float32), [str(w) for w in words], run)


@dataclass(frozen=True, slots=True)
class Aligned:
    """An embedding table for a dataset vocabulary and how much of it the run covered."""

    table: np.ndarray
    """(len(itos), d) float32: row 0 zero (padding), row 1 the mean vector (unknown)."""
    found: int
    """Vocabulary words that got the run's vector."""
    missing: int
    """Vocabulary words the run does not know (random rows)."""
    source: str = ""
    """The embeddings run folder."""
    top_found: int = 0
    """Of the dataset's TOP_WORDS most frequent words (vocab.json lists them first), those
    that got the run's vector: most running text is made of them."""

    @property
    def dim(self) -> int:
        """Vector size."""
        return int(self.table.shape[1])

    def facts(self) -> dict[str, Any]:
        """What a run's summary records of its start: source, found, missing, coverage."""
        total = self.found + self.missing
        coverage = round(self.found / total, 4) if total else None
        return {"source": self.source, "found": self.found, "missing": self.missing,
                "coverage": coverage, "top_found": self.top_found,
                "top_total": min(TOP_WORDS, total)}  # fmt: skip


def align(pre: Pretrained, itos: list[str], seed: int, dim: int | None = None) -> Aligned:
    """Rows for ``itos`` (0 = padding, 1 = unknown, then words) from ``pre``; ``dim`` is the
    model's embedding size when it is fixed (ConfigError when it differs from the run's)."""
    _check_dim(pre, dim)
    index = {w: i for i, w in enumerate(pre.words)}
    sigma = float(pre.vectors.std()) or 1.0
    rng = np.random.default_rng(seed)
    table = rng.normal(0.0, sigma, size=(len(itos), pre.dim)).astype(np.float32)
    table[0] = 0.0
    if len(itos) > 1:
        table[1] = pre.vectors.mean(axis=0)
    found = top = 0
    for i, word in enumerate(itos[2:], start=2):
        row = index.get(word)
        if row is not None:
            table[i] = pre.vectors[row]
            found += 1
            top += i < 2 + TOP_WORDS
    return Aligned(table, found, max(0, len(itos) - 2) - found, str(pre.path), top)


TOP_WORDS = 1_000
"""The most frequent words a coverage warning counts apart (vocab.json lists them first)."""


def coverage_warning(
    found: int, missing: int, folder: str | Path, top: tuple[int, int] | None = None
) -> str | None:
    """A warning when the embeddings run knows under LOW_COVERAGE of the dataset's words;
    ConfigError when it knows none (the table would be all random: a start in name only).
    ``top``: (known, of) the dataset's most frequent words, said beside the share: a run
    that knows a third of the words but nearly all frequent ones covers most of the text."""
    total = found + missing
    if not total:
        return None
    if not found:
        raise ConfigError(
            f"train.model.init_embeddings = {str(folder)!r}: none of the dataset's {total:,} "
            "words is in that embeddings run",
            hint="train the embeddings on this dataset's text (`sentitop embed --data "
            "DATASET`), or leave init_embeddings unset",
        )
    if found / total >= LOW_COVERAGE:
        return None
    said = (
        f"the embeddings run {folder} knows only {found:,} of the dataset's {total:,} words "
        f"({found / total:.0%}); the others start random"
    )
    if top is not None and top[1]:
        said += (
            f" (of its {top[1]:,} most frequent words it knows {top[0]:,}, {top[0] / top[1]:.0%}: "
            "those make up most of the text)"
        )
    return said


def initial_table(folder: str | None, dim: int | None, data_dir: str, seed: int) -> Aligned | None:
    """The table aligned from the embeddings run in ``folder`` (``train.model.init_embeddings``;
    None: nothing to load); ``dim`` is ``train.model.embedding_dim`` when set."""
    if not folder:
        return None
    aligned = align(load_pretrained(folder), dataset_itos(data_dir), seed, dim)
    coverage_warning(aligned.found, aligned.missing, folder)  # none known: ConfigError (the
    return aligned  # launcher said the warning already; the summary says it again)


def _check_dim(pre: Pretrained, dim: int | None) -> None:
    if dim is not None and dim != pre.dim:
        raise ConfigError(
            f"train.model.embedding_dim = {dim} but {pre.path / VECTORS_FILE} holds vectors of "
            f"dimension {pre.dim}",
            hint=f"leave embedding_dim unset (it follows the run) or set it to {pre.dim}",
        )


def check_init_embeddings(model: ModelConfig, data_dir: str | Path | None = None) -> str | None:
    """Before any rank starts: the embeddings run folder `model.init_embeddings` names, if
    any, holds readable vectors of the model's size and (with ``data_dir``) knows some of the
    dataset's words (ConfigError naming the file, exit 2); returns a warning when it knows
    few of them."""
    folder = embeddings_folder_of(model)
    if not folder:
        return None
    pre = load_pretrained(folder)
    _check_dim(pre, model.embedding_dim)
    if data_dir is None or not (Path(data_dir) / "vocab.json").is_file():
        return None
    known = set(pre.words)
    words = dataset_itos(data_dir)[2:]
    found = sum(1 for word in words if word in known)
    top = sum(1 for word in words[:TOP_WORDS] if word in known)
    return coverage_warning(found, len(words) - found, folder, (top, min(TOP_WORDS, len(words))))


def dataset_itos(data_dir: str | Path) -> list[str]:
    """The id → word list of a preprocessed dataset (vocab.json `itos`, or a `words` map)."""
    from engine.errors import DatasetError

    path = Path(data_dir) / "vocab.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if "itos" in doc:
            return [str(w) for w in doc["itos"]]
        words: dict[str, int] = doc["words"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DatasetError(f"{path}: neither `itos` nor `words` is readable ({exc})") from None
    itos = [""] * (max(words.values(), default=1) + 1)
    for word, i in words.items():
        itos[i] = word
    return itos

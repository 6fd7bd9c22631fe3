"""Torch-free settings of an embeddings run (validated on creation)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.balance.args import MAX_STRAGGLE
from engine.config import config_from_dict, config_to_dict
from engine.errors import ConfigError

Mode = Literal["sync", "async", "svd"]
Encoder = Literal["word", "char"]
Device = Literal["auto", "cpu", "cuda"]
CONFIG_FILE = "embed_config.json"
"""The run's settings in its folder (what the ranks and `sentitop eval` read)."""
DEFAULT_WINDOW = 5
"""Context window (words either side) unless a run sets its own."""
MIN_EVAL_WORDS = 3
"""Fewest words the PIP loss is taken over: over two it is 0 whatever the vectors."""
MAX_SEED = 2**32 - 1
"""Largest seed: ranks derive generator seeds from it (torch takes at most 2**64 - 1)."""


def _check(condition: bool, field_name: str, allowed: str, value: object) -> None:
    if not condition:
        raise ConfigError(f"embed.{field_name} = {value!r} is not allowed; expected {allowed}")


@dataclass(kw_only=True, slots=True)
class EmbedConfig:
    """Settings of one embeddings run (read by every rank from RUN_DIR/embed_config.json)."""

    run_dir: str
    """Run folder: corpus.npz, reference.npz, events.jsonl, embeddings.npy, summary.json. A
    re-run into it replaces the vectors, summary and events (reusing the corpus when the input
    files and their settings are unchanged); a run stopped early leaves neither vectors nor
    summary."""
    input: str | list[str] | None = None
    """Raw JSON-lines reviews (plain or .gz; McAuley 2014/2018, IMDB, Fine Food, Alexa, or any
    records with a text field; ratings not needed), or folders of them: one path or several,
    read in turn as one corpus, cleaned as preprocessing cleans."""
    data_dir: str | None = None
    """Or a preprocessed folder (dataset.h5 + vocab.json); its /train/tokens are the corpus."""
    mode: Mode = "sync"
    """sync = DDP all-reduce every step; async = parameter server on rank 0, workers 1..N-1;
    svd = no training: the truncated SVD of the corpus's PPMI matrix, seconds on one CPU process
    (engine/embeddings/svd.py)."""
    device: Device = "auto"
    """Where sync ranks train: cuda (rank r on GPU r, NCCL), cpu (gloo), or auto = cuda when
    every local rank can have a GPU of its own, else cpu. Async mode is CPU-only."""
    encoder: Encoder = "word"
    """word = an embedding table; char = a character LSTM whose last hidden state is the vector."""
    dim: int = 50
    """Embedding size d."""
    batch: int = 1024
    """Positive (centre, context) pairs per step per worker (each with `negatives` negatives)."""
    epochs: int = 3
    """Passes over the corpus."""
    window: int = DEFAULT_WINDOW
    """Context words on each side (skip-gram pairs and the SPPMI counts)."""
    negatives: int = 10
    """Negative samples per positive pair, drawn from unigram^0.75 (also the SPPMI shift k)."""
    subsample: float = 1e-4
    """Sub-sampling threshold t: a word of frequency f is kept with p = sqrt(t/f) + t/f."""
    min_count: int = 5
    """Words seen fewer times are dropped from the corpus."""
    max_vocab: int = 10_000
    """Keep at most this many of the most frequent words."""
    max_docs: int | None = None
    """Read only the first N documents (smoke runs, benchmarks)."""
    lr: float = 0.01
    """Adam learning rate (the server's optimizer in async mode)."""
    char_dim: int = 32
    """Character embedding size of the char encoder."""
    max_word_len: int = 16
    """Characters kept per word by the char encoder."""
    eval_words: int = 1000
    """PIP loss on this many most frequent words (a fixed subset, so it is cheap)."""
    probe_words: list[str] = field(
        default_factory=lambda: ["good", "bad", "movie", "actor", "funny", "boring"]
    )
    """Words whose nearest neighbours go into the summary (those in the vocabulary)."""
    dedupe: bool = False
    """Drop repeated documents (identical after cleaning), e.g. one review on many variants."""
    seed: int = 0
    """Seed of init, sub-sampling and negatives."""
    threads: int | None = None
    """torch threads per rank (None = cores / ranks)."""
    log_every: int = 50
    """Emit a `step` event every k steps (sync) or k server updates (async)."""
    straggle: dict[int, float] = field(default_factory=dict)
    """Injected slowness: rank -> factor (the rank sleeps (factor-1) x its compute each step)."""
    events_file: bool = True
    """Write events to RUN_DIR/events.jsonl (a re-run starts it afresh)."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # inf or nan trains nothing and breaks the events
            value = getattr(self, f.name)
            if isinstance(value, float):
                _check(math.isfinite(value), f.name, "a finite number", value)
        _check(
            (self.input is None) != (self.data_dir is None),
            "input/data_dir",
            "exactly one of --input FILE or --data DIR",
            (self.input, self.data_dir),
        )
        if isinstance(self.input, str):
            self.input = [self.input]
        _check(
            self.input is None or (bool(self.input) and all(self.input)),
            "input",
            "one or more paths",
            self.input,
        )
        _check(self.mode in ("sync", "async", "svd"), "mode", "sync|async|svd", self.mode)
        _check(self.device in ("auto", "cpu", "cuda"), "device", "auto|cpu|cuda", self.device)
        if self.mode == "async" and self.device == "cuda":
            raise ConfigError(
                "embed.device = cuda is not supported with mode = async (the parameter server "
                "exchanges CPU tensors)",
                hint="use --mode sync on a GPU, or --device cpu",
            )
        _check(self.encoder in ("word", "char"), "encoder", "word|char", self.encoder)
        names = ("dim", "batch", "epochs", "window", "negatives", "min_count", "log_every")
        for name in (*names, "char_dim", "max_word_len"):
            value = getattr(self, name)
            _check(value >= 1, name, "an integer >= 1", value)
        _check(self.max_vocab >= 10, "max_vocab", ">= 10", self.max_vocab)
        # centred, two words' PIP matrices are both [[1, -1], [-1, 1]] (scaled): loss 0.0000
        _check(
            self.eval_words >= MIN_EVAL_WORDS, "eval_words", f">= {MIN_EVAL_WORDS}", self.eval_words
        )
        _check(0 < self.subsample <= 1, "subsample", "0 < t <= 1", self.subsample)
        _check(self.lr > 0, "lr", "> 0", self.lr)
        _check(self.max_docs is None or self.max_docs >= 1, "max_docs", ">= 1", self.max_docs)
        _check(self.threads is None or self.threads >= 1, "threads", ">= 1", self.threads)
        _check(0 <= self.seed <= MAX_SEED, "seed", f"an integer from 0 to {MAX_SEED}", self.seed)
        for rank, factor in self.straggle.items():
            _check(
                rank >= 0 and 1 <= factor <= MAX_STRAGGLE,  # NaN fails, inf would sleep forever
                "straggle",
                f"RANK>=0:FACTOR from 1 to {MAX_STRAGGLE:g}",
                (rank, factor),
            )
        if self.straggle and self.mode == "svd":  # it would be accepted and do nothing
            raise ConfigError(
                "embed.straggle: --mode svd trains nothing, so there is no rank to slow down",
                hint="leave --straggle out, or use --mode sync|async",
            )
        if self.mode == "async" and 0 in self.straggle:
            raise ConfigError(
                "embed.straggle: rank 0 is the parameter server in --mode async; it computes no "
                "gradients, so slowing it is not a straggling worker",
                hint="name a worker, rank 1 or above (e.g. --straggle 1:4)",
            )

    @property
    def inputs(self) -> list[str]:
        """The --input paths as a list (empty with --data)."""
        if self.input is None:
            return []
        return [self.input] if isinstance(self.input, str) else list(self.input)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (straggle keys become strings)."""
        return config_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EmbedConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error naming them."""
        return config_from_dict(cls, data, "embed config")

    def corpus_key(self) -> dict[str, Any]:
        """The settings the prepared corpus and reference depend on (cache key)."""
        names = ("data_dir", "min_count", "max_vocab", "max_docs", "window", "negatives")
        key = {n: getattr(self, n) for n in (*names, "eval_words", "dim")}
        key["input"] = self.inputs or None
        if self.dedupe:
            key["dedupe"] = True
        return key

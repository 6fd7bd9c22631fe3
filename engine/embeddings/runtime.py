"""What every rank of an embeddings run shares: setup, the SGNS step, evaluation, the summary.

Both training modes (:mod:`engine.embeddings.sync`, :mod:`engine.embeddings.param_server`)
build one :class:`EmbedRun` and drive it. The corpus and the SPPMI reference were prepared
once by the launcher (:mod:`engine.embeddings.prepare`) and are read from the run folder.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from engine.embeddings.config import EmbedConfig
from engine.embeddings.corpus import (
    Corpus,
    DevicePairs,
    NegativeSampler,
    epoch_pairs,
    pair_seed,
    shard_docs,
)
from engine.embeddings.evaluate import nearest_neighbours, pip_loss
from engine.embeddings.models import SGNS, build_model
from engine.embeddings.prepare import (
    CORPUS_FILE,
    REFERENCE_FILE,
    drop_previous,
    input_warnings,
)
from engine.errors import ConfigError, TrainError
from engine.events import Emitter
from engine.sentiment.dist_env import DistEnv

SUMMARY_FILE = "summary.json"
MIN_PIP_GAIN = 0.005
"""Share of the initial PIP loss a run must gain to count as having learned something."""
VECTORS_FILE = "embeddings.npy"


@dataclass(slots=True)
class EpochStats:
    """One worker's totals over one epoch."""

    epoch: int
    steps: int = 0
    pairs: int = 0
    loss_sum: float = 0.0
    words: float = 0.0
    """Raw corpus tokens the processed pairs stand for (words/s counts these)."""
    compute: float = 0.0
    """Forward + backward seconds."""
    comm: float = 0.0
    """Seconds outside forward+backward spent on the update: async = push, wait, pull; sync =
    the optimizer step (DDP's all-reduce overlaps backward and counts as compute)."""
    straggle: float = 0.0
    """Injected sleep seconds."""
    seconds: float = 0.0
    sampling: float = 0.0
    """Seconds building the epoch's pairs and drawing negatives (host work on CPU; on a GPU
    both run there and this counts launch time only)."""

    def add(self, pairs: int, loss: float, words: float) -> None:
        """Count one step."""
        self.steps += 1
        self.pairs += pairs
        self.loss_sum += loss * pairs
        self.words += words


@dataclass(slots=True)
class EmbedRun:
    """One rank's model, data and evaluation for an embeddings run."""

    cfg: EmbedConfig
    env: DistEnv
    emitter: Emitter
    corpus: Corpus = field(init=False)
    reference: np.ndarray = field(init=False)
    model: SGNS = field(init=False)
    negatives: NegativeSampler = field(init=False)
    device: torch.device = field(init=False)
    device_pairs: DevicePairs | None = field(init=False, default=None)
    history: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        run_dir = Path(self.cfg.run_dir)
        self.corpus = Corpus.load(run_dir / CORPUS_FILE)
        with np.load(run_dir / REFERENCE_FILE) as z:
            self.reference = z["reference"]
        self.device = self.env.device
        torch.manual_seed(self.cfg.seed)  # identical initial weights on every rank
        self.model = build_model(
            self.cfg.encoder, self.corpus.itos, self.cfg.dim, self.cfg.char_dim,
            self.cfg.max_word_len,
        ).to(self.device)  # fmt: skip
        self.negatives = NegativeSampler(
            self.corpus.counts, self.cfg.seed * 1000 + self.env.rank, device=self.device
        )

    # ------------------------------------------------------------------ data
    def shard_pairs(
        self, epoch: int, shard: int, shards: int
    ) -> tuple[torch.Tensor, torch.Tensor, float]:
        """(centres, contexts) of this worker's documents for ``epoch``, on the run's device,
        and the raw words per pair (sub-sampling is redrawn every epoch). On a GPU the pairs
        are built there (:class:`DevicePairs`), on CPU with numpy (:func:`epoch_pairs`)."""
        doc_range = shard_docs(self.corpus, shard, shards)
        seed = pair_seed(self.cfg.seed, epoch, shard)
        if self.device.type != "cpu":
            if self.device_pairs is None:
                self.device_pairs = DevicePairs(self.corpus, doc_range, self.device)
            c, x, raw = self.device_pairs.epoch(
                window=self.cfg.window, subsample=self.cfg.subsample, seed=seed
            )
            return c, x, raw / max(1, len(c))
        centres, contexts, raw = epoch_pairs(
            self.corpus,
            doc_range,
            window=self.cfg.window,
            subsample=self.cfg.subsample,
            seed=seed,
        )
        words_per_pair = raw / max(1, len(centres))
        return torch.from_numpy(centres), torch.from_numpy(contexts), words_per_pair

    def check_steps(self, epoch: int, pairs: int, workers: str) -> None:
        """ConfigError when ``pairs`` (the fewest skip-gram pairs a worker drew for ``epoch``)
        do not fill one batch: no step would train, and the run ended `ok` with an SGNS loss of
        0.0000 and its random start written as the vectors."""
        if pairs >= self.cfg.batch:
            return
        raise ConfigError(
            f"--batch {self.cfg.batch} is more than the {pairs:,} skip-gram pairs {workers} "
            f"drew for epoch {epoch + 1} (after sub-sampling): not one step would train",
            hint=f"use a --batch well below {pairs:,}, fewer processes (--nproc), or more text",
        )

    def check_loss(self, loss: float, epoch: int) -> None:
        """TrainError when the SGNS loss is no longer finite (the weights diverged): the vectors
        are NaN, and the run crashed writing its next event."""
        if math.isfinite(loss):
            return
        raise TrainError(
            f"the SGNS loss became {loss} in epoch {epoch + 1}: training diverged, the vectors "
            "are no longer numbers",
            hint=f"lower --lr (now {self.cfg.lr:g}; 0.01 is the default)",
        )

    # ------------------------------------------------------------------ one step
    def loss(
        self,
        module: torch.nn.Module,
        centres: torch.Tensor,
        contexts: torch.Tensor,
        negatives: torch.Tensor | None = None,
    ) -> Any:
        """The SGNS loss of a batch through ``module`` (the model or its DDP wrapper);
        negatives are drawn here unless given."""
        if negatives is None:
            negatives = self.negatives.sample(len(centres), self.cfg.negatives)
        return module(centres, contexts, negatives)

    def straggle(self, compute_s: float) -> float:
        """Sleep (factor - 1) x ``compute_s`` when this rank is told to straggle; the seconds."""
        factor = self.cfg.straggle.get(self.env.rank, 1.0)
        if factor <= 1.0:
            return 0.0
        pause = (factor - 1.0) * compute_s
        time.sleep(pause)
        return pause

    # ------------------------------------------------------------------ evaluation
    def eval_vectors(self) -> np.ndarray:
        """(n, d) vectors of the fixed evaluation words (ids 0..n-1, the most frequent)."""
        self.model.eval()
        ids = torch.arange(len(self.reference), device=self.device)
        vectors = self.model.vectors(ids).cpu().numpy()
        self.model.train()
        return vectors

    def pip(self) -> float:
        """PIP loss of the current vectors against the SPPMI reference."""
        return pip_loss(self.eval_vectors(), self.reference)

    def epoch_event(self, epoch: int, ranks: list[EpochStats], pip: float) -> dict[str, Any]:
        """Emit `phase` per worker and the `epoch` record (rank 0); return the record."""
        seconds = max(r.seconds for r in ranks)
        pairs = sum(r.pairs for r in ranks)
        record = {
            "epoch": epoch,
            "train_loss": sum(r.loss_sum for r in ranks) / max(1, pairs),
            "pip_loss": pip,
            "seconds": seconds,
            "words_per_s": sum(r.words for r in ranks) / seconds if seconds > 0 else 0.0,
            "samples_per_s": pairs / seconds if seconds > 0 else 0.0,
            "pairs": pairs,
            "rank_seconds": [r.seconds for r in ranks],
        }
        for rank, r in self.worker_ranks(ranks):
            self.emitter.emit(
                "phase",
                rank=rank,
                epoch=epoch,
                compute=r.compute,
                comm=r.comm,
                straggle=r.straggle,
                seconds=r.seconds,
                sampling=r.sampling,
                steps=r.steps,
                samples=r.pairs,
            )
        self.emitter.emit("epoch", **record)
        self.history.append(record)
        return record

    def worker_ranks(self, ranks: list[EpochStats]) -> list[tuple[int, EpochStats]]:
        """(rank, stats) pairs: every rank in sync mode, ranks 1.. in async mode."""
        first = 1 if self.cfg.mode == "async" else 0
        return [(first + i, r) for i, r in enumerate(ranks)]

    def start_event(self, workers: int, pip0: float) -> None:
        """The `stage_start` event of training (rank 0)."""
        self.emitter.emit(
            "stage_start",
            stage="train",
            workload="embeddings",
            mode=self.cfg.mode,
            encoder=self.cfg.encoder,
            device=str(self.device),
            world_size=self.env.world,
            workers=workers,
            dim=self.cfg.dim,
            batch=self.cfg.batch,
            epochs=self.cfg.epochs,
            vocab=self.corpus.vocab_size,
            corpus_tokens=len(self.corpus.ids),
            params=sum(p.numel() for p in self.model.parameters()),
            pip_loss=pip0,
            threads=torch.get_num_threads(),
        )

    def finish(self, pip0: float, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Rank 0: write the vectors and summary.json, emit `summary` and `stage_end`."""
        cfg = self.cfg
        self.model.eval()
        ids = torch.arange(self.corpus.vocab_size, device=self.device)
        vectors = self.model.vectors(ids).cpu().numpy()
        if not np.isfinite(vectors).all():  # never written as a usable result
            self.check_loss(math.nan, max(0, len(self.history) - 1))
        train_s = sum(r["seconds"] for r in self.history)
        words = sum(r["words_per_s"] * r["seconds"] for r in self.history)
        summary: dict[str, Any] = {
            "status": "ok",
            "workload": "embeddings",
            "mode": cfg.mode,
            "encoder": cfg.encoder,
            "device": str(self.device),
            "dim": cfg.dim,
            "batch": cfg.batch,
            "world_size": self.env.world,
            "epochs": len(self.history),
            "pip_loss_initial": pip0,
            "pip_loss": self.history[-1]["pip_loss"] if self.history else pip0,
            "train_loss": self.history[-1]["train_loss"] if self.history else None,
            "wall_s": time.time() - self.started,
            "train_s": train_s,
            "s_per_epoch": train_s / max(1, len(self.history)),
            "words_per_s": words / train_s if train_s > 0 else 0.0,
            "vocab": self.corpus.vocab_size,
            "eval_words": len(self.reference),
            "neighbours": nearest_neighbours(vectors, self.corpus.itos, cfg.probe_words),
            "reference_neighbours": nearest_neighbours(
                self.reference, self.corpus.itos, cfg.probe_words
            ),
            "per_epoch": self.history,
            **(extra or {}),
        }
        own = _warnings(summary)
        for warning in own:
            self.emitter.emit("warning", stage="train", **warning)
        summary["warnings"] = [
            *input_warnings(cfg.run_dir),  # said (and emitted) when the input was read
            *({"stage": "train", **w} for w in own),
        ]
        run_dir = Path(cfg.run_dir)
        np.save(run_dir / VECTORS_FILE, vectors.astype(np.float32))
        tmp = run_dir / (SUMMARY_FILE + ".tmp")
        tmp.write_text(json.dumps(summary, indent=2), encoding="utf-8")
        tmp.replace(run_dir / SUMMARY_FILE)
        drop_previous(run_dir)  # the finished run a re-run kept until now
        self.emitter.emit("summary", stage="train", **summary)
        self.emitter.emit("stage_end", stage="train", status="ok", seconds=summary["wall_s"])
        return summary


def _warnings(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """A finished run whose vectors are hardly closer to the reference than their random start
    (PIP loss down by under :data:`MIN_PIP_GAIN` of it; BENCHMARKS.md's 3-epoch runs that
    learned gained 1-8 %) learned nothing measurable: it still ends ``ok``, but says so."""
    start, end = summary["pip_loss_initial"], summary["pip_loss"]
    if not summary["epochs"] or end < start * (1.0 - MIN_PIP_GAIN):
        return []
    return [
        {
            "code": "pip_not_improved",
            "message": f"PIP loss {start:.4f} → {end:.4f}: the vectors are hardly closer to "
            "the reference than their random start (more text or epochs, a smaller --batch, or "
            "--mode svd)",
        }
    ]

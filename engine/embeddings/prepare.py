"""Once per run, before the ranks start: the corpus (corpus.npz) and the SPPMI reference
(reference.npz) in the run folder, reused when the settings they depend on are unchanged."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.embeddings.config import EmbedConfig
from engine.embeddings.corpus import Corpus, build_corpus, read_dataset_docs
from engine.embeddings.evaluate import sppmi_reference
from engine.embeddings.sources import Sources, SourceStats
from engine.errors import ConfigError, InputError
from engine.events import Emitter

CORPUS_FILE = "corpus.npz"
REFERENCE_FILE = "reference.npz"
KEY_FILE = "prepare.json"


def load_docs_corpus(
    cfg: EmbedConfig,
    sources: list[SourceStats] | None = None,
    warnings: list[dict[str, str]] | None = None,
) -> Corpus:
    """Build the corpus from ``cfg.input`` (raw JSON-lines files or folders, read in turn) or
    ``cfg.data_dir`` (dataset.h5); ``sources``, when given, receives each input file's counts,
    ``warnings`` the ``{code, message}`` of the files the folders held but gave nothing."""
    docs: Any
    if cfg.inputs:
        docs = Sources(cfg.inputs, dedupe=cfg.dedupe)
        if sources is not None:
            sources.clear()
            docs.stats = sources
        if warnings is not None:
            warnings.clear()
            docs.warnings = warnings
    else:
        assert cfg.data_dir is not None  # EmbedConfig checks exactly one is set
        docs = read_dataset_docs(cfg.data_dir)
    return build_corpus(
        docs,
        min_count=cfg.min_count,
        max_vocab=cfg.max_vocab,
        max_docs=cfg.max_docs,
        source=", ".join(cfg.inputs) or cfg.data_dir or "the input",
    )


def prepare(cfg: EmbedConfig, emitter: Emitter) -> dict[str, Any]:
    """Write (or reuse) corpus.npz and reference.npz in the run folder; return their stats."""
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    key = cfg.corpus_key()
    key_path = run_dir / KEY_FILE
    if key_path.is_file() and (run_dir / REFERENCE_FILE).is_file():
        recorded = json.loads(key_path.read_text(encoding="utf-8"))
        if recorded.get("key") == key:
            for warning in recorded["stats"].get("warnings") or []:  # reused, still true
                emitter.emit("warning", stage="prepare", **warning)
            emitter.emit("stage_end", stage="prepare", status="cached", seconds=0.0)
            return dict(recorded["stats"])
    start = time.perf_counter()
    emitter.emit("stage_start", stage="prepare", input=cfg.input or cfg.data_dir)
    sources: list[SourceStats] = []
    warnings: list[dict[str, str]] = []
    corpus = load_docs_corpus(cfg, sources, warnings)
    for warning in warnings:  # files a folder held but gave nothing
        emitter.emit("warning", stage="prepare", **warning)
    if cfg.dim >= corpus.vocab_size:  # vectors longer than the vocabulary: nothing to learn
        raise ConfigError(
            f"embed.dim = {cfg.dim} is not below the corpus's vocabulary of "
            f"{corpus.vocab_size:,} words",
            hint="use a smaller --dim (50-300 is usual) or more text",
        )
    corpus.save(run_dir / CORPUS_FILE)
    t_ref = time.perf_counter()
    reference = sppmi_reference(corpus, cfg.eval_words, cfg.window, cfg.negatives, cfg.dim)
    if not np.any(reference):  # every SPPMI entry is 0: the PIP loss would read 1.0 whatever
        raise InputError(
            f"{', '.join(cfg.inputs) or cfg.data_dir}: no two of its {corpus.vocab_size:,} words "
            f"occur together more than {cfg.negatives} times as often as chance, so there is "
            "nothing to learn and nothing to judge embeddings against",
            hint="use more, and more varied, text (or a lower --negatives)",
        )
    np.savez(run_dir / REFERENCE_FILE, reference=reference)
    stats: dict[str, Any] = {
        "docs": corpus.num_docs,
        "raw_tokens": corpus.raw_tokens,
        "tokens": len(corpus.ids),
        "vocab": corpus.vocab_size,
        "eval_words": len(reference),
        "reference_s": time.perf_counter() - t_ref,
        "read_s": t_ref - start,
    }
    if sources:
        stats["sources"] = [
            {"path": s.path, "docs": s.docs, "skipped": s.skipped, "duplicates": s.duplicates}
            for s in sources
        ]
    if warnings:
        stats["warnings"] = warnings
    key_path.write_text(json.dumps({"key": key, "stats": stats}), encoding="utf-8")
    emitter.emit("summary", stage="prepare", **stats)
    emitter.emit("stage_end", stage="prepare", status="ok", seconds=time.perf_counter() - start)
    return stats

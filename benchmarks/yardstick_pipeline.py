"""The yardstick's contender: sentitop's own pipeline (preprocess → train → score raw texts).

A fold's training texts are written as JSON lines, preprocessed by ``run_preprocess`` (its
held-out split is the validation split), trained in this process by the engine's ``Trainer``
(one rank), and the finished run scores the fold's test texts the way ``sentitop eval`` does:
the run's own cleaning, stopwords, vocabulary, length and decision threshold.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from yardstick_data import HELDOUT_PROBES, PROBES, LabelledTexts, negation_probes
from yardstick_metrics import adapted_scores, scores
from yardstick_significance import per_text

from engine.config import ModelConfig, PreprocessConfig, TrainConfig
from engine.events import Emitter


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs with JSON values where they parse (numbers, true/false, null)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def write_jsonl(texts: LabelledTexts, path: Path) -> None:
    """One {"text", "rating"} line per distinct text (the generic layout preprocessing reads)."""
    with open(path, "w", encoding="utf-8") as fh:
        for text, rating in zip(texts.texts, texts.ratings, strict=True):
            fh.write(json.dumps({"text": text, "rating": rating}) + "\n")


def preprocess_texts(train: LabelledTexts, work: Path, preprocess: dict[str, Any]) -> Path:
    """Write ``train`` as JSON lines under ``work`` and preprocess it; returns the data folder."""
    from engine.preprocess import run_preprocess

    work.mkdir(parents=True, exist_ok=True)
    raw, data = work / "train.jsonl", work / "data"
    write_jsonl(train, raw)
    run_preprocess(PreprocessConfig(inputs=[str(raw)], output=str(data), **preprocess))
    return data


def train_on(data: Path, run: Path, train_cfg: dict[str, Any], model: dict[str, Any]) -> Path:
    """Train one rank in this process on a preprocessed folder; returns the run folder."""
    from engine.sentiment.trainer import Trainer

    cfg = TrainConfig(
        data_dir=str(data),
        run_dir=str(run),
        checkpoint_every_min=0,
        events_file=False,
        model=ModelConfig(**model),
        **train_cfg,
    )
    Trainer(cfg, emitter=Emitter(None)).fit()
    return run


def train_pipeline(
    train: LabelledTexts,
    work: Path,
    preprocess: dict[str, Any],
    train_cfg: dict[str, Any],
    model: dict[str, Any],
) -> Path:
    """Preprocess and train on ``train``; returns the run folder."""
    return train_on(preprocess_texts(train, work, preprocess), work / "run", train_cfg, model)


def _without_companion(
    loaded: Any, test: LabelledTexts, summary: dict[str, Any], threshold: float
) -> dict[str, Any]:
    """A run with a TF-IDF companion scored once more as the network alone (its own blend of
    the deep and wide paths, as the run fitted it before adding the companion): the paired
    figure that tells what the companion added. Empty for a run without one."""
    from dataclasses import replace

    from engine.sentiment.evaluate import predict_proba

    facts = summary.get("companion") or {}
    if not facts.get("applied"):
        return {"companion": facts or None}
    model = loaded.model
    kept = (model.companion, model.spec)
    blend = facts.get("network_blend")
    model.companion = None
    model.spec = replace(model.spec, blend=None if blend is None else tuple(blend))
    try:
        alone = scores(predict_proba(loaded, test.texts), np.asarray(test.labels), threshold)
        probe_scores = {}
        for name, path in (("probes", PROBES), ("probes_heldout", HELDOUT_PROBES)):
            probes = negation_probes(path)
            right = (predict_proba(loaded, probes.texts) > threshold) == np.asarray(probes.labels)
            probe_scores[name] = round(float(right.mean()), 4)
    finally:
        model.companion, model.spec = kept
    return {"companion": facts, "network_alone": {**alone, **probe_scores}}


def score_run(run_dir: Path, test: LabelledTexts, device: str = "cpu") -> dict[str, Any]:
    """Metrics of a finished run on raw test texts at the run's own decision threshold (the
    model scores on ``device``: cpu, or cuda for a GPU)."""
    from engine.sentiment.evaluate import load_run, predict_proba

    loaded = load_run(run_dir)
    loaded.model.to(device)
    start = time.perf_counter()
    proba = predict_proba(loaded, test.texts)
    threshold = float(getattr(loaded, "threshold", 0.5))
    summary = json.loads((run_dir / "summary.json").read_text())
    probe_scores = {}
    for name, path in (("negation_probes", PROBES), ("negation_probes_heldout", HELDOUT_PROBES)):
        probes = negation_probes(path)
        right = (predict_proba(loaded, probes.texts) > threshold) == np.asarray(probes.labels)
        probe_scores[name] = round(float(right.mean()), 4)
    from engine.errors import InputError
    from engine.sentiment.evaluate import source_rate

    labels = np.asarray(test.labels)
    try:
        prior = adapted_scores(proba, labels, source_rate(loaded))
    except InputError as exc:  # a run that learned nothing has no prior to adapt
        prior = {"error": str(exc)}
    return {
        **scores(proba, labels, threshold),
        "per_text": per_text(proba > threshold, labels),
        **_without_companion(loaded, test, summary, threshold),
        "prior_adapted": prior,
        "threshold": round(threshold, 4),
        "valid_accuracy": summary.get("accuracy"),
        "epochs": summary.get("epochs"),
        "best_epoch": summary.get("best_epoch"),
        "train_s": round(summary.get("train_s", 0.0), 1),
        "n_train": summary.get("n_train"),
        "predict_s": round(time.perf_counter() - start, 1),
        **probe_scores,
    }

"""Blend the deep and wide paths: their weights and a bias, fitted on the validation split.

The default model adds a linear bag of n-grams (the wide path) to the LSTM's logit and trains
both at once; the epoch that is best on validation usually comes before the wide path has
learned all it can (its weights start at zero), so the plain sum under-weights it. After
training, a logistic regression of the validation labels on the two paths' logits (three
numbers: deep weight, wide weight, bias; Newton's method) fixes their mix and the decision
threshold. It is kept only where it lowers the validation log-loss with both weights positive.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from engine.sentiment import checkpoint as ckpt
from engine.sentiment.metrics import Confusion
from engine.sentiment.model import SentimentLSTM

MIN_SAMPLES = 200
"""Fewest validation samples a blend is fitted on."""
MIN_PER_CLASS = 20
"""Fewest samples of each label among them."""
RIDGE = 1e-3
"""L2 penalty on the two weights (per sample), keeping the fit finite on separable data."""


@dataclass(slots=True)
class BlendFit:
    """The fitted blend and what it did on the validation split."""

    applied: bool
    reason: str
    """Why the blend is used or not (a sentence for summary.json)."""
    weights: tuple[float, float, float] | None = None
    """(deep weight, wide weight, bias)."""
    n: int = 0
    log_loss_before: float | None = None
    log_loss_after: float | None = None
    accuracy_before: float | None = None
    accuracy_after: float | None = None
    metrics: dict[str, Any] | None = None
    """Validation metrics of the blended model (Confusion.metrics), when applied."""

    def summary(self) -> dict[str, Any]:
        """For summary.json (without the metrics, which replace the run's own)."""
        out = asdict(self)
        out.pop("metrics")
        out["weights"] = None if self.weights is None else list(self.weights)  # as JSON has it
        return out


def path_logits(
    model: SentimentLSTM, batches: Iterable[Any], device: torch.device
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(deep logits, wide logits, labels) of ``model`` (a SentimentLSTM with a wide path) on
    the batches (engine.sentiment.data.Batch), as float64 arrays."""
    deep, wide, labels = [], [], []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for batch in batches:
            d, w = model.parts(batch.tokens.to(device), batch.lengths)
            if w is None:
                raise ValueError("path_logits needs a model with a wide path")
            deep.append(d.float().cpu().numpy())
            wide.append(w.float().cpu().numpy())
            labels.append(batch.labels.float().cpu().numpy())
    model.train(was_training)
    if not labels:
        empty = np.zeros(0)
        return empty, empty, empty
    cat = np.concatenate
    return (
        cat(deep).astype(np.float64),
        cat(wide).astype(np.float64),
        cat(labels).astype(np.float64),
    )


def _log_loss(z: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def fit_weights(
    deep: np.ndarray, wide: np.ndarray, labels: np.ndarray, iterations: int = 100
) -> tuple[float, float, float]:
    """(deep weight, wide weight, bias) of the logistic regression of ``labels`` on the two
    logits, by Newton's method from the plain sum (1, 1, 0), weights L2-penalised by RIDGE."""
    x = np.stack([deep, wide, np.ones_like(deep)], axis=1)
    n = len(labels)
    penalty = np.diag([RIDGE, RIDGE, 0.0]) * n
    beta = np.array([1.0, 1.0, 0.0])
    for _ in range(iterations):
        p = np.exp(-np.logaddexp(0.0, -(x @ beta)))  # sigmoid without overflow
        grad = x.T @ (p - labels) + penalty @ beta
        hess = (x * (p * (1.0 - p))[:, None]).T @ x + penalty + 1e-9 * np.eye(3)
        step = np.linalg.solve(hess, grad)
        beta = beta - step
        if np.abs(step).max() < 1e-10:
            break
    return float(beta[0]), float(beta[1]), float(beta[2])


def fit_blend(deep: np.ndarray, wide: np.ndarray, labels: np.ndarray) -> BlendFit:
    """The blend of the two paths on validation logits, or why there is none."""
    n = len(labels)
    positives = int(labels.sum())
    if n < MIN_SAMPLES or min(positives, n - positives) < MIN_PER_CLASS:
        return BlendFit(
            False,
            f"validation split too small to fit a blend ({n} samples, {positives} positive; "
            f"needs {MIN_SAMPLES} with {MIN_PER_CLASS} of each label)",
            n=n,
        )
    plain = deep + wide
    weights = fit_weights(deep, wide, labels)
    blended = weights[0] * deep + weights[1] * wide + weights[2]
    before, after = _log_loss(plain, labels), _log_loss(blended, labels)
    acc_before = float(((plain > 0) == (labels > 0.5)).mean())
    acc_after = float(((blended > 0) == (labels > 0.5)).mean())
    fit = BlendFit(False, "", weights, n, before, after, acc_before, acc_after)
    if not np.all(np.isfinite(weights)) or min(weights[0], weights[1]) <= 0:
        fit.reason = "a path got a weight <= 0 on validation: kept the plain sum"
    elif after >= before:
        fit.reason = "the blend did not lower the validation log-loss: kept the plain sum"
    else:
        conf = Confusion()
        conf.add(blended > 0, labels > 0.5, loss_sum=after * n)
        fit.applied, fit.metrics = True, conf.metrics()
        fit.reason = "fitted on the validation split (log-loss and accuracy are in-sample)"
    return fit


def blend_run(
    model: SentimentLSTM, batches: Iterable[Any], device: torch.device, run_dir: str
) -> BlendFit:
    """Fit the blend of ``model`` (a SentimentLSTM with a wide path) on the validation
    batches; when it is kept, set it in the model's shape and rewrite RUN_DIR/model.json."""
    from dataclasses import replace

    fit = fit_blend(*path_logits(model, batches, device))
    if fit.applied:
        model.spec = replace(model.spec, blend=fit.weights)
        ckpt.write_json(f"{run_dir}/{ckpt.MODEL_SPEC}", model.spec.to_dict())
    return fit


def blend_saved_run(run_dir: str | Path, data_dir: str | Path, batch_size: int = 1024) -> BlendFit:
    """The same blend for a run trained before it existed (or with blend_paths off): fitted
    on the whole test split of ``data_dir`` (the run's validation split), model.json and
    summary.json rewritten when it is kept. A run with a blend already is left as it is."""
    from engine.sentiment.data import eval_batches, load_split
    from engine.sentiment.evaluate import load_run

    run = Path(run_dir)
    summary_path = run / ckpt.SUMMARY
    summary = json.loads(summary_path.read_text())
    loaded = load_run(run)
    if loaded.model.spec.blend is not None:
        return BlendFit(False, "the run has a blend already", loaded.model.spec.blend)
    if loaded.model.wide is None or summary.get("pos_weight"):
        return BlendFit(False, "no wide path, or a weighted loss: nothing to blend")
    split = load_split(data_dir, "test")
    n = len(split.labels)
    fit = blend_run(
        loaded.model, eval_batches(split, n, 0, n, batch_size), torch.device("cpu"), str(run)
    )
    summary["blend"] = fit.summary()
    if fit.metrics:
        for key in ("accuracy", "precision", "recall", "f1", "confusion"):
            summary[key] = fit.metrics[key]
        summary["test_loss"] = fit.metrics["loss"]
        summary["model"] = loaded.model.spec.to_dict()
    ckpt.write_json(summary_path, summary)
    return fit

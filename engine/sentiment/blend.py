"""Blend the deep and wide paths: their weights and a bias, fitted on the validation split.

The default model adds a linear bag of n-grams (the wide path) to the LSTM's logit and trains
both at once; the epoch that is best on validation usually comes before the wide path has
learned all it can (its weights start at zero), so the plain sum under-weights it. After
training, a logistic regression of the validation labels on the two paths' logits (three
numbers: deep weight, wide weight, bias; Newton's method) fixes their mix and the decision
threshold. It is kept only where it lowers the validation log-loss with every weight positive;
a path whose weight comes out <= 0 (an under-trained LSTM that answers one class, say) is set to
0 and the others fitted again, and the run is told the path went unused.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from engine.sentiment import checkpoint as ckpt
from engine.sentiment.metrics import Confusion
from engine.sentiment.model import SentimentLSTM

MIN_SAMPLES = 200
"""Fewest validation samples a blend is fitted on."""
MIN_PER_CLASS = 20
"""Fewest samples of each label among them."""
PATH_NAMES = ("deep", "wide", "companion")
"""The paths in the order fit_blend takes them."""
RIDGE = 1e-3
"""L2 penalty on the two weights (per sample), keeping the fit finite on separable data."""


@dataclass(slots=True)
class BlendFit:
    """The fitted blend and what it did on the validation split."""

    applied: bool
    reason: str
    """Why the blend is used or not (a sentence for summary.json)."""
    weights: tuple[float, ...] | None = None
    """(deep weight, wide weight, bias), or (deep, wide, companion, bias)."""
    n: int = 0
    log_loss_before: float | None = None
    log_loss_after: float | None = None
    accuracy_before: float | None = None
    accuracy_after: float | None = None
    metrics: dict[str, Any] | None = None
    """Validation metrics of the blended model (Confusion.metrics), when applied."""
    unused: tuple[str, ...] = ()
    """Paths set to weight 0 because their own weight came out <= 0 (PATH_NAMES)."""

    def summary(self) -> dict[str, Any]:
        """For summary.json (without the metrics, which replace the run's own)."""
        out = asdict(self)
        out.pop("metrics")
        out["weights"] = None if self.weights is None else list(self.weights)  # as JSON has it
        out["unused"] = list(self.unused)
        return out


def path_logits(
    model: SentimentLSTM,
    batches: Iterable[Any],
    device: torch.device,
    companion: nn.Module | None = None,
) -> tuple[list[np.ndarray], np.ndarray]:
    """([deep logits, wide logits, and the companion's when given], labels) of ``model`` (a
    SentimentLSTM with a wide path) on the batches (engine.sentiment.data.Batch), float64."""
    paths: list[list[np.ndarray]] = [[], [], []] if companion is not None else [[], []]
    labels = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for batch in batches:
            tokens = batch.tokens.to(device)
            d, w = model.parts(tokens, batch.lengths)
            if w is None:
                raise ValueError("path_logits needs a model with a wide path")
            paths[0].append(d.float().cpu().numpy())
            paths[1].append(w.float().cpu().numpy())
            if companion is not None:
                paths[2].append(companion(tokens, batch.lengths).float().cpu().numpy())
            labels.append(batch.labels.float().cpu().numpy())
    model.train(was_training)
    if not labels:
        return [np.zeros(0) for _ in paths], np.zeros(0)
    return (
        [np.concatenate(p).astype(np.float64) for p in paths],
        np.concatenate(labels).astype(np.float64),
    )


def _log_loss(z: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def fit_weights(
    paths: Sequence[np.ndarray], labels: np.ndarray, iterations: int = 100
) -> tuple[float, ...]:
    """(a weight per path, then a bias) of the logistic regression of ``labels`` on the paths'
    logits, weights L2-penalised by RIDGE: Newton's method from the plain sum of the first two
    paths (any others start at 0), each step halved until the penalised loss falls (a full
    step from far away, e.g. a third path with large logits, can overshoot and diverge)."""
    k = len(paths)
    x = np.stack([*paths, np.ones_like(labels)], axis=1)
    n = len(labels)
    ridge = np.array([RIDGE] * k + [0.0]) * n
    beta = np.array([1.0, 1.0][:k] + [0.0] * (k - 2) + [0.0])

    def objective(b: np.ndarray) -> float:
        z = x @ b
        return float(np.sum(np.logaddexp(0.0, z) - labels * z) + 0.5 * ridge @ (b * b))

    current = objective(beta)
    for _ in range(iterations):
        p = np.exp(-np.logaddexp(0.0, -(x @ beta)))  # sigmoid without overflow
        grad = x.T @ (p - labels) + ridge * beta
        hess = (x * (p * (1.0 - p))[:, None]).T @ x + np.diag(ridge) + 1e-9 * np.eye(k + 1)
        step = np.linalg.solve(hess, grad)
        for _ in range(30):
            trial = objective(beta - step)
            if trial <= current:
                break
            step = step / 2
        else:
            break  # no step lowers the loss: at the optimum, to rounding
        beta, current = beta - step, trial
        if np.abs(step).max() < 1e-10:
            break
    return tuple(float(b) for b in beta)


def fit_blend(
    paths: Sequence[np.ndarray], labels: np.ndarray, to_beat: float | None = None
) -> BlendFit:
    """The blend of the paths' validation logits (deep, wide, maybe the companion), or why
    there is none: kept when every weight is positive and the log-loss falls below that of
    the plain sum of the first two paths (or below ``to_beat``, when given)."""
    n = len(labels)
    positives = int(labels.sum())
    if n < MIN_SAMPLES or min(positives, n - positives) < MIN_PER_CLASS:
        return BlendFit(
            False,
            f"validation split too small to fit a blend ({n} samples, {positives} positive; "
            f"needs {MIN_SAMPLES} with {MIN_PER_CLASS} of each label)",
            n=n,
        )
    plain = paths[0] + paths[1]
    weights, used = _positive_weights(paths, labels)
    blended = np.stack(paths, axis=1) @ np.asarray(weights[:-1]) + weights[-1]
    before, after = _log_loss(plain, labels), _log_loss(blended, labels)
    acc_before = float(((plain > 0) == (labels > 0.5)).mean())
    acc_after = float(((blended > 0) == (labels > 0.5)).mean())
    unused = tuple(PATH_NAMES[i] for i in range(len(paths)) if i not in used)
    fit = BlendFit(False, "", weights, n, before, after, acc_before, acc_after, unused=unused)
    if not used or not np.all(np.isfinite(weights)) or min(weights[i] for i in used) <= 0:
        fit.reason = "a path got a weight <= 0 on validation: kept the plain sum"
    elif after >= (before if to_beat is None else to_beat):
        fit.reason = "the blend did not lower the validation log-loss: kept the plain sum"
    else:
        conf = Confusion()
        conf.add(blended > 0, labels > 0.5, loss_sum=after * n)
        fit.applied, fit.metrics = True, conf.metrics()
        fit.reason = "fitted on the validation split (log-loss and accuracy are in-sample)"
        if unused:
            fit.reason += f"; unused (weight 0, it added nothing there): {', '.join(unused)}"
    return fit


def unused_path_warning(fit: BlendFit | None) -> dict[str, str] | None:
    """A `path_unused` warning when a kept blend left out one of the network's own paths."""
    lost = [name for name in ("deep", "wide") if fit and fit.applied and name in fit.unused]
    if not lost:
        return None
    what = " and ".join("the LSTM (deep path)" if n == "deep" else "the wide path" for n in lost)
    return {
        "code": "path_unused",
        "message": f"{what} got weight 0 in the blend: on validation it added nothing, so the "
        "model predicts without it (under-trained? train more epochs or check the data)",
    }


def _positive_weights(
    paths: Sequence[np.ndarray], labels: np.ndarray
) -> tuple[tuple[float, ...], list[int]]:
    """fit_weights, then again without each path whose weight came out <= 0 (its weight set to
    0) until every remaining weight is positive; (the weights of all paths and the bias, the
    indices of the paths fitted last). Nothing is dropped once one path is left."""
    used = list(range(len(paths)))
    fitted = fit_weights(paths, labels)
    while len(used) > 1 and np.all(np.isfinite(fitted)) and min(fitted[:-1]) <= 0:
        keep = [i for i, w in zip(used, fitted[:-1], strict=True) if w > 0]
        if not keep:
            break  # no weight positive: the caller refuses the blend
        used, fitted = keep, fit_weights([paths[i] for i in keep], labels)
    weights = [0.0] * len(paths) + [fitted[-1]]
    for i, w in zip(used, fitted[:-1], strict=True):
        weights[i] = w
    return tuple(weights), used


def set_blend(model: SentimentLSTM, fit: BlendFit, run_dir: str) -> None:
    """Put a kept blend into the model's shape and rewrite RUN_DIR/model.json."""
    from dataclasses import replace

    if fit.applied:
        model.spec = replace(model.spec, blend=fit.weights)
        ckpt.write_json(f"{run_dir}/{ckpt.MODEL_SPEC}", model.spec.to_dict())


def blend_run(
    model: SentimentLSTM, batches: Iterable[Any], device: torch.device, run_dir: str
) -> BlendFit:
    """Fit the blend of ``model`` (a SentimentLSTM with a wide path) on the validation
    batches; when it is kept, set it in the model's shape and rewrite RUN_DIR/model.json."""
    paths, labels = path_logits(model, batches, device)
    fit = fit_blend(paths, labels)
    set_blend(model, fit, run_dir)
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

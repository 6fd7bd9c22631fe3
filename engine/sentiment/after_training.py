"""What rank 0 fits once training is over: the linear companion, then the blend of the paths."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Any

import torch

from engine.config import TrainConfig
from engine.sentiment.blend import (
    BlendFit,
    fit_blend,
    path_logits,
    set_blend,
    unused_path_warning,
)
from engine.sentiment.companion import BLOCK_ROWS, MAX_ROWS, fit_companion, training_blocks
from engine.sentiment.data import Batch
from engine.sentiment.model import SentimentLSTM, companion_marking
from engine.sentiment.presets import companion_of
from engine.sentiment.splits import majority_check

OUTCOME_WARNINGS = ("below_majority", "path_unused")
"""Summary warning codes :func:`outcome_checks` decides (a refit replaces them)."""
VALID_BATCHES = 64
"""Validation batches the companion's C is picked on at most (the blend reads them all)."""


def after_training_plan(model: SentimentLSTM, cfg: TrainConfig, weighted: bool) -> list[str]:
    """What :func:`fit_after_training` fits for this run: [], ["blend"] or ["blend", "companion"]
    (the companion joins the blend, so it needs one)."""
    if not (cfg.blend_paths and model.wide is not None and not weighted):
        return []
    return ["blend", "companion"] if companion_of(cfg.model) else ["blend"]


def companion_rows(cfg: TrainConfig) -> int:
    """Training rows the companion is fitted on at most."""
    return min(MAX_ROWS, cfg.max_train_samples or MAX_ROWS)


def fit_after_training(
    model: SentimentLSTM,
    cfg: TrainConfig,
    valid: Callable[[], Iterator[Batch]],
    device: torch.device,
    weighted: bool,
) -> tuple[BlendFit | None, dict[str, Any] | None]:
    """The blend of ``model``'s paths on the validation batches (``valid()`` gives them; read
    twice with a companion), with the linear companion as a third path where the run asks for
    one and it lowers the validation log-loss below the two paths' blend. The model's shape
    (and RUN_DIR/model.json) gets what is kept; returns the blend and the companion's facts
    (None when not asked for). No blend (None) without a wide path, with train.blend_paths off
    or with a ``weighted`` loss (pos_weight), whose shifted logit the blend would undo."""
    wanted = companion_of(cfg.model)
    if not after_training_plan(model, cfg, weighted):
        why = (
            "not fitted: it joins the blend, which needs a wide path, blend_paths and no pos_weight"
        )
        return None, {"applied": False, "reason": why} if wanted else None
    companion, facts = None, None
    marking = companion_marking(model.spec)
    if wanted and marking.key_limit * BLOCK_ROWS >= 2**63:
        facts = {"applied": False, "reason": f"{marking.num_ids} ids: too many for pair keys"}
    elif wanted:
        rows = companion_rows(cfg)
        fitted = fit_companion(
            lambda: training_blocks(cfg.data_dir, rows), islice(valid(), VALID_BATCHES), marking
        )
        if fitted is None:
            facts = {"applied": False, "reason": "no word occurs in 2 training rows"}
        else:
            companion, facts = fitted.module(marking).to(device), fitted.summary()
    paths, labels = path_logits(model, valid(), device, companion)
    fit = fit_blend(paths[:2], labels)
    if companion is not None and facts is not None:
        beat = fit.log_loss_after if fit.applied else fit.log_loss_before
        with_companion = fit_blend(paths, labels, to_beat=beat)
        facts["applied"] = with_companion.applied
        facts["reason"] = (
            f"kept: validation log-loss {beat:.4f} -> {with_companion.log_loss_after:.4f}"
            if with_companion.applied
            else f"left out: {with_companion.reason.split(':')[0]}"
        )
        # the network's own blend, so a run can still be scored without its companion
        facts["network_blend"] = list(fit.weights) if fit.applied and fit.weights else None
        if with_companion.applied:
            model.companion = companion
            features = int(companion.vocab.numel())
            model.spec = replace(model.spec, companion_features=features)
            fit = with_companion
    set_blend(model, fit, cfg.run_dir)
    return fit, facts


def outcome_checks(test: dict[str, Any], blend: BlendFit | None) -> dict[str, Any]:
    """Summary fields on how the final model did on the test split: ``majority_rate`` and
    ``warnings`` (below the majority rate; a kept blend that left out a network path)."""
    checks = majority_check(test.get("confusion"), test.get("accuracy"))
    if unused := unused_path_warning(blend):
        checks["warnings"].append(unused)
    return checks


WARMUP_SHARE_WARNED = 0.5
"""A warm-up this share of a run's steps or longer is warned about (`warmup_long`)."""


def warmup_warning(warmup_steps: int, total_steps: int) -> dict[str, str] | None:
    """A `warmup_long` warning when the linear warm-up takes half the run's steps or more: the
    learning rate then barely reaches ``train.lr`` (or never), and the decay hardly starts (a
    small dataset with the default 100 warm-up steps trained 14 steps at 0.15 × the rate)."""
    if total_steps <= 0 or warmup_steps <= 1 or warmup_steps < WARMUP_SHARE_WARNED * total_steps:
        return None  # (one warm-up step reaches the full rate at the first step)
    peak = min(1.0, total_steps / warmup_steps)
    what = (
        f"never passes {peak:.2f} × train.lr and never decays"
        if peak < 1
        else "warms up for most of the run and hardly decays"
    )
    return {
        "code": "warmup_long",
        "message": f"train.warmup_steps {warmup_steps:,} is {warmup_steps / total_steps:.0%} of "
        f"this run's {total_steps:,} steps: the learning rate {what}; set --warmup-steps "
        f"(train.warmup_steps) to about a tenth of the steps ({max(1, total_steps // 10):,})",
    }


def refit_saved_run(
    run_dir: str | Path, data_dir: str | Path | None = None, batch_size: int = 1024
) -> tuple[BlendFit | None, dict[str, Any] | None]:
    """Fit a finished run's blend and companion again, as its trainer now would, on the whole
    validation (test) split of ``data_dir`` (default: the run's own): for runs trained before
    a change to this step. model.pt, model.json and summary.json are rewritten."""
    from engine.config import config_from_dict
    from engine.sentiment import checkpoint as ckpt
    from engine.sentiment.data import eval_batches, load_split
    from engine.sentiment.evaluate import confusion_stats, load_run
    from engine.sentiment.metrics import Confusion

    run = Path(run_dir)
    raw = json.loads((run / ckpt.TRAIN_CONFIG).read_text())
    cfg = config_from_dict(TrainConfig, raw, str(run / ckpt.TRAIN_CONFIG))
    cfg = replace(cfg, run_dir=str(run), data_dir=str(data_dir or cfg.data_dir))
    summary = json.loads((run / ckpt.SUMMARY).read_text())
    model = load_run(run, network_only=True).model  # a companion of any past version dropped
    split = load_split(cfg.data_dir, "test")
    n = len(split.labels)

    def valid() -> Iterator[Batch]:
        return eval_batches(split, n, 0, n, batch_size)

    weighted = bool(summary.get("pos_weight"))
    fit, facts = fit_after_training(model, cfg, valid, torch.device("cpu"), weighted)
    ckpt.write_json(run / ckpt.MODEL_SPEC, model.spec.to_dict())
    ckpt.save_weights(str(run), model.state_dict())
    # the summary describes the model as saved now, blended or not: scored again, checked again
    pos_weight = torch.tensor(float(summary["pos_weight"])) if weighted else None
    criterion = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight, reduction="sum")
    test = Confusion.from_vector(confusion_stats(model, valid(), criterion).tolist()).metrics()
    summary["blend"], summary["companion"] = (fit.summary() if fit else None), facts
    summary["model"] = model.spec.to_dict()
    for key in ("accuracy", "precision", "recall", "f1", "confusion"):
        summary[key] = test[key]
    summary["test_loss"], summary["n_test"] = test["loss"], test["n"]
    kept = [w for w in summary.get("warnings") or [] if w.get("code") not in OUTCOME_WARNINGS]
    checks = outcome_checks(test, fit)
    summary["majority_rate"], summary["warnings"] = (
        checks["majority_rate"],
        [
            *kept,
            *checks["warnings"],
        ],
    )
    ckpt.write_json(run / ckpt.SUMMARY, summary)
    return fit, facts

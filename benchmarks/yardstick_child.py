"""The yardstick sweep's child side: one task (preprocess a fold, train and score a variant on
it, or the baseline) in its own process, its output to a log and its result to a JSON file."""

from __future__ import annotations

import json
import os
import time
import traceback
from pathlib import Path
from typing import Any


def _read_texts(path: str) -> Any:
    from yardstick_data import LabelledTexts

    texts, labels, ratings = [], [], []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            texts.append(row["text"])
            labels.append(row["label"])
            ratings.append(row["rating"])
    return LabelledTexts(texts, labels, ratings)


def _run_task(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The work of one task (in the child process)."""
    start = time.time()
    if kind == "prep":
        from yardstick_pipeline import preprocess_texts

        data = Path(spec["work"]) / "data"
        if not (spec.get("reuse") and (data / "stats.json").is_file()):
            data = preprocess_texts(
                _read_texts(spec["train"]), Path(spec["work"]), spec["preprocess"]
            )
        stats = json.loads((data / "stats.json").read_text())
        out = {"data": str(data), "vocab_size": stats["vocab_size"], "kept": stats["kept"]}
    elif kind == "train":
        from yardstick_pipeline import score_run, train_on

        run = Path(spec["run"])
        if not (spec.get("reuse") and (run / "model.pt").is_file()):
            run = train_on(Path(spec["data"]), run, spec["train"], spec["model"])
        elif spec.get("refit"):  # the blend and companion fitted again by today's code
            from engine.sentiment.after_training import refit_saved_run

            refit_saved_run(run, spec["data"])
        elif spec["train"].get("blend_paths", True):  # a run from before the blend: add it
            from engine.sentiment.blend import blend_saved_run

            blend_saved_run(run, spec["data"])
        device = spec["score_device"]
        if device == "auto":
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        out = score_run(run, _read_texts(spec["test"]), device)
    else:
        from yardstick_baseline import tfidf_lr

        out = tfidf_lr(_read_texts(spec["train"]), _read_texts(spec["test"]))
    return {**out, "wall_s": round(time.time() - start, 1)}


def run_child(kind: str, spec: dict[str, Any], result: str, log: str) -> None:
    """Process entry: output to the task's log, the result (or the error) to a JSON file."""
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        os.environ.pop(var, None)  # every task is a one-rank run, whatever launched the sweep
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        out: dict[str, Any] = {"ok": True, "result": _run_task(kind, spec)}
    except BaseException as exc:  # recorded, never lost: the sweep goes on
        traceback.print_exc()
        out = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": _tb()}
    Path(result + ".tmp").write_text(json.dumps(out))
    os.replace(result + ".tmp", result)


def _tb() -> str:
    return "".join(traceback.format_exc().splitlines(keepends=True)[-12:])

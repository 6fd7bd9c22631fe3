"""Fixtures of the review tests: hand-made run folders with summary, profile and events."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from remote.profile import load_profile

SEED_CSV = Path(__file__).resolve().parents[2] / "remote" / "review" / "data" / "seed_study.csv"
TINY = Path(__file__).resolve().parent / "tiny.yaml"


def write_run(
    root: Path,
    name: str,
    *,
    nproc: int,
    epoch_s: list[float],
    sync_s: float,
    steps: int = 20,
    n_train: int = 1000,
    eval_s: float = 0.5,
    fixed_s: float = 10.0,
    prep_s: float = 0.0,
    usd_per_hour: float = 0.096,
    sweep: str | None = None,
    mode: str = "strong",
    accuracy: float = 0.8,
    tts: float | None = None,
    profile: dict[str, Any] | None = None,
    status: str = "ok",
    threads: int = 1,
    summary_extra: dict[str, Any] | None = None,
) -> Path:
    """A run folder shaped like remote.runner's, with phase events per rank and epoch.

    ``sync_s`` = allreduce_opt seconds per epoch on every rank; wall = fixed + prep + train + eval.
    ``summary_extra``: more summary.json fields (warnings, majority_rate, reason).
    """
    folder = root / name
    folder.mkdir(parents=True)
    config = profile or load_profile(TINY).resolved()  # as remote.runner writes it
    config = json.loads(json.dumps(config))
    config["train"]["nproc"] = nproc
    (folder / "profile.yaml").write_text(yaml.safe_dump(config))
    train_s = sum(epoch_s)
    wall = fixed_s + prep_s + train_s + eval_s * len(epoch_s)
    per_epoch = [
        {"epoch": i, "seconds": s, "samples_per_s": n_train / s, "train_loss": 0.3 - 0.05 * i}
        for i, s in enumerate(epoch_s)
    ]
    summary = {
        "run": name,
        "profile": config["name"],
        "provider": "local",
        "status": status,
        "world_size": nproc,
        "started": 1.0e9 + len(list(root.iterdir())),
        "wall_s": wall,
        "accuracy": accuracy,
        "f1": 0.85,
        "epochs": len(epoch_s),
        "samples_per_s": n_train * len(epoch_s) / train_s if train_s else 0.0,
        "time_to_threshold_s": tts,
        "usd": wall * usd_per_hour / 3600,
        "usd_per_hour": usd_per_hour,
        "cost": {
            "usd": 0.0,
            "lines": [{"name": "local m5.large", "stage": "all", "usd_per_hour": usd_per_hour}],
        },
        "train": {
            "n_train": n_train,
            "global_batch": 64,
            "loss_threshold": 0.2,
            "per_epoch": per_epoch,
            "world_size": nproc,
        },
    }
    summary.update(summary_extra or {})
    (folder / "summary.json").write_text(json.dumps(summary))
    t = 1000.0
    events = [
        {"type": "run_start", "t": t},
        {
            "type": "stage_end",
            "t": t + prep_s,
            "stage": "preprocess",
            "status": "ok",
            "seconds": prep_s,
            "cached": prep_s == 0,
        },
        {"type": "train_start", "t": t + 5, "rank": 0, "threads": threads},
    ]
    clock = t + 5
    for i, s in enumerate(epoch_s):
        for k in range(1, 5):
            events.append(
                {
                    "type": "step",
                    "t": clock + s * k / 4,
                    "rank": 0,
                    "epoch": i,
                    "loss": 0.3,
                    "smoothed_loss": 0.3 - 0.02 * (i * 4 + k),
                }
            )
        clock += s + eval_s
        for rank in range(nproc):
            events.append(
                {
                    "type": "phase",
                    "t": clock,
                    "rank": rank,
                    "epoch": i,
                    "forward": (s - sync_s) / 3,
                    "backward": 2 * (s - sync_s) / 3,
                    "allreduce_opt": sync_s,
                    "data": 0.0,
                    "h2d": 0.0,
                    "eval": eval_s,
                    "steps": steps,
                    "samples": n_train // nproc,
                }
            )
    with (folder / "events.jsonl").open("w") as fh:
        for event in events:
            fh.write(json.dumps(event) + "\n")
    if sweep:
        (folder / "sweep.json").write_text(json.dumps({"sweep": sweep, "mode": mode}))
    return folder


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., Path]:
    """write_run into tmp_path/runs."""
    root = tmp_path / "runs"
    root.mkdir()

    def make(name: str, **kwargs: Any) -> Path:
        return write_run(root, name, **kwargs)

    return make

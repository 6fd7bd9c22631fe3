"""A resumed training keeps choosing its final epoch among all of its epochs, the ones before
the resume too (the selection, with its best weights and patience, is in the checkpoint)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.sentiment import checkpoint as ckpt
from tui.cli import main


def test_the_best_epoch_before_a_resume_can_still_be_kept(tiny_data: Path, tmp_path: Path) -> None:
    """Stopped and resumed from the dashboard, a run finished at 0.897 with best_epoch 17 where
    the same run unstopped kept epoch 3 at 0.905: the resumed run chose among epochs 10-20."""
    run = tmp_path / "run"
    base = ["train", "--data", str(tiny_data), "--run-dir", str(run), "--lr-schedule", "constant"]
    assert main([*base, "--epochs", "1"]) == 0
    state = ckpt.load_checkpoint(run)
    assert state is not None and state["best"]["best_epoch"] == 0
    # epoch 1's evaluation made unbeatable: the run must end with epoch 1's weights and metrics
    state["best"]["best_key"][0] = 2.0
    state["best"]["best_metrics"] = {**state["best"]["best_metrics"], "accuracy": 0.999}
    ckpt.save_checkpoint(run, state)
    assert main([*base, "--resume", "--epochs", "3"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert len(summary["per_epoch"]) == 3
    assert summary["best_epoch"] == 0 and summary["accuracy"] == 0.999

"""A warm-up as long as the run is warned about at its start (the rate never reached train.lr)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.events import read_events
from engine.sentiment.after_training import warmup_warning
from tests.train.conftest import write_dataset
from tui.cli import main


def test_only_a_warm_up_of_half_the_run_or_more_is_warned_about() -> None:
    assert warmup_warning(100, 1000) is None and warmup_warning(49, 100) is None
    assert warmup_warning(1, 1) is None  # one warm-up step: the full rate at the first step
    said = warmup_warning(100, 14)
    assert said is not None and said["code"] == "warmup_long"
    assert "100 is 714% of this run's 14 steps" in said["message"]
    assert "never passes 0.14 × train.lr" in said["message"] and "(1)" in said["message"]
    assert "hardly decays" in (warmup_warning(60, 100) or {})["message"]


def test_the_default_warm_up_on_a_small_dataset_is_said_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 2,000-review dataset trained 14 steps, all warming up to 0.15 × the rate, and only
    the generic "under-trained?" warning came (trial K)."""
    data = write_dataset(tmp_path / "data", n_train=512)
    run = tmp_path / "run"
    argv = ["train", "--data", str(data), "--run-dir", str(run), "--epochs", "1",
            "--batch-size", "64", "--model", "seed", "--threads", "1"]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert err.count("WARNING: train.warmup_steps 100 is 1250% of this run's 8 steps") == 1
    events = list(read_events(run / "events.jsonl"))
    first_step = next(i for i, e in enumerate(events) if e["type"] == "step")
    warned = [i for i, e in enumerate(events) if e.get("code") == "warmup_long"]
    assert len(warned) == 1 and warned[0] < first_step
    codes = [w["code"] for w in json.loads((run / "summary.json").read_text())["warnings"]]
    assert codes[0] == "warmup_long"
    assert main([*argv[:4], str(tmp_path / "run2"), *argv[5:], "--warmup-steps", "1"]) == 0
    assert "warmup" not in capsys.readouterr().err

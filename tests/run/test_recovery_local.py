"""A local run whose rank crashes mid-epoch restarts the node and resumes (recovery: replace)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from engine.events import read_events
from remote.profile import load_profile
from remote.runner import execute_run
from tests.procs import rank_pid

PROFILE = """\
name: rec-local
provider: local
instance_type: m5.large
data:
  synthetic: {size: 3MB, seed: 1}
preprocess: {vocab_size: 500, seq_len: 32}
train:
  nproc: 2
  epochs: 2
  batch_size: 64
  log_every: 2
  checkpoint_every_min: 0
  checkpoint_every_steps: 4
  threads: 1
recovery: {on_node_loss: replace, max_restarts: 1}
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_crashed_rank_is_restarted_from_the_latest_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "rec-local.yaml"
    path.write_text(PROFILE)
    run: dict[str, Any] = {"id": None, "killed": None}

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "run_start":
            run["id"] = event["run"]
        if event["type"] == "step" and event["global_step"] >= 6 and run["killed"] is None:
            pid = rank_pid(1, run["id"])
            if pid is not None:
                run["killed"] = event["global_step"]
                os.kill(pid, signal.SIGKILL)

    outcome = await execute_run(load_profile(path), runs_dir=tmp_path / "runs", on_event=on_event)
    assert run["killed"] is not None
    assert outcome.status == "ok", outcome.summary.get("reason")
    events = list(read_events(outcome.run_dir / "events.jsonl"))
    (recovery,) = [e for e in events if e["type"] == "recovery"]
    assert (recovery["cause"], recovery["action"], recovery["lost"]) == (
        "crashed", "replace", ["local"],
    )  # fmt: skip
    assert recovery["world_size"] == 2 and recovery["checkpoint"]["global_step"] >= 4
    assert recovery["redone_steps"] <= 4 + 2  # one checkpoint interval (+ one log interval)
    assert outcome.summary["recoveries"] == 1 and outcome.summary["usd_lost"] > 0
    assert [e["epoch"] for e in events if e["type"] == "epoch"] == [0, 1]
    # written here all along: no copies, and the run says where the checkpoint is
    assert not [e for e in events if e["type"] == "checkpoint_stored"]
    assert "written here" in outcome.summary["checkpoints"]

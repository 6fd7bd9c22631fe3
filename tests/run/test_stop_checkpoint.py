"""A user's stop of a live run (the dashboard's `s`, quit, a signal to it) keeps the work done:
rank 0 checkpoints at its next step before the ranks are stopped (real local ranks)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from remote.profile import load_profile
from remote.runner import execute_run

PROFILE = """\
name: stop-local
provider: local
instance_type: m5.large
data:
  synthetic: {size: 2MB, seed: 1, distinct: 0.9}
preprocess: {vocab_size: 500, seq_len: 32}
train:
  nproc: 2
  epochs: 50
  batch_size: 64
  log_every: 1
  checkpoint_every_min: 0
  checkpoint_every_steps: 0
  threads: 1
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_stop_mid_epoch_writes_a_checkpoint_first(
    tmp_path: Path, run_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No periodic checkpoint is due (every_steps 0, every_min 0): the stop used to cancel the
    ranks at once, the dialog's promised checkpoint was never written and the epoch's work was
    lost. Now the reason names the checkpoint, and it holds a step at or past the stop."""
    monkeypatch.setenv("SENTITOP_CACHE_DIR", run_env["SENTITOP_CACHE_DIR"])
    path = tmp_path / "stop-local.yaml"
    path.write_text(PROFILE)
    stop = asyncio.Event()
    at: dict[str, Any] = {}

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "step" and event.get("global_step", 0) >= 5 and not at:
            at.update(event)
            stop.set()

    outcome = await execute_run(
        load_profile(path), runs_dir=tmp_path / "runs", on_event=on_event, stop=stop
    )
    assert outcome.status == "interrupted" and at
    reason = outcome.summary["reason"]
    assert reason.startswith("stopped by the user; checkpoint in epoch 1 at step"), reason
    saved = torch.load(outcome.run_dir / "train/checkpoints/latest.pt", weights_only=False)
    assert saved["global_step"] >= at["global_step"] and saved["step"] > 0
    # how much of the epoch it holds, so "epoch 1" next to "epochs done: 0" reads right
    said = rf"at step {saved['step']:,} \({saved['position']:,} of its ([\d,]+) samples\) kept"
    found = re.search(said, reason)
    assert found and 0 < saved["position"] < int(found[1].replace(",", "")), reason
    summary = json.loads((outcome.run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["reason"] == reason

"""A rank frozen mid-training (SIGSTOP: as a stuck GPU or a swapping node) fails the run after
recovery.stall_timeout and stops every node (real local ranks; the other rank waits in gloo)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from remote.profile import load_profile
from remote.runner import execute_run
from tests.procs import rank_pid

PROFILE = """\
name: stall-local
provider: local
data:
  synthetic: {size: 2MB, seed: 1, distinct: 0.9}
preprocess: {vocab_size: 500, seq_len: 32}
train:
  nproc: 2
  epochs: 50
  batch_size: 64
  log_every: 1
  checkpoint_every_min: 0
  threads: 1
recovery: {stall_timeout: 8s}  # well above a step even on a loaded machine
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_frozen_rank_fails_the_run_instead_of_billing_for_ever(
    tmp_path: Path, run_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SENTITOP_CACHE_DIR", run_env["SENTITOP_CACHE_DIR"])
    path = tmp_path / "stall-local.yaml"
    path.write_text(PROFILE)
    frozen: dict[str, Any] = {}

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "step" and event.get("global_step", 0) >= 3 and not frozen:
            frozen["at"] = time.monotonic()

    async def freeze_when_stepping() -> None:
        while "at" not in frozen:
            await asyncio.sleep(0.05)
        for _ in range(100):
            pid = rank_pid(1, str(tmp_path / "runs"))
            if pid is not None:
                os.kill(pid, signal.SIGSTOP)
                frozen["pid"] = pid
                return
            await asyncio.sleep(0.05)

    freezer = asyncio.create_task(freeze_when_stepping())
    outcome = await execute_run(load_profile(path), runs_dir=tmp_path / "runs", on_event=on_event)
    await freezer
    assert "pid" in frozen, "no rank 1 process found to freeze"
    assert outcome.status == "failed"
    reason = outcome.summary["reason"]
    assert reason.startswith("training stalled: no rank said anything for"), reason
    assert time.monotonic() - frozen["at"] < 60  # the limit, plus the stop: not 30 minutes
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and rank_pid(1, str(tmp_path / "runs")) is not None:
        await asyncio.sleep(0.1)
    assert rank_pid(1, str(tmp_path / "runs")) is None  # the frozen rank too: nothing left
    assert rank_pid(0, str(tmp_path / "runs")) is None

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
recovery: {stall_timeout: 4s}
"""


def _rank_pids(run_dir: Path) -> dict[int, int]:
    """RANK -> pid of the run's training ranks (read from /proc)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"engine.sentiment.train" in cmdline and str(run_dir).encode() in cmdline:
            for entry in environ:
                if entry.startswith(b"RANK="):
                    found[int(entry[5:])] = int(proc.name)
    return found


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
            pids = _rank_pids(tmp_path / "runs")
            if 1 in pids:
                os.kill(pids[1], signal.SIGSTOP)
                frozen["pid"] = pids[1]
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
    while time.monotonic() < deadline and _rank_pids(tmp_path / "runs"):
        await asyncio.sleep(0.1)
    assert not _rank_pids(tmp_path / "runs")  # the frozen rank too: nothing left billing

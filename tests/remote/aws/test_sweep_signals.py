"""`sentitop sweep` on an EC2 profile stopped by SIGTERM tears its run down like `sentitop run`
(it died at once, leaving the instance of its current run running and no summary)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.remote.aws.conftest import running_tagged

pytestmark = pytest.mark.aws

ROOT = Path(__file__).resolve().parents[3]


def test_sigterm_during_an_ec2_sweep_terminates_its_instances(ec2, ami, tmp_path: Path) -> None:
    profile = tmp_path / "sw.yaml"
    profile.write_text(
        "name: sw\nprovider: ec2\nregion: us-east-1\n"
        f"nodes: [{{instance_type: g5.xlarge, ami: {ami}}}]\n"
        "data: {synthetic: {size: 1MB}}\ntrain: {epochs: 1}\n"
    )
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SENTITOP_RUNS_DIR": str(runs),
           "SENTITOP_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "sweep", str(profile), "--nproc", "1,2"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    run_id, deadline = None, time.time() + 120
    while time.time() < deadline and run_id is None:  # its instance runs, waiting for SSH
        for folder in runs.glob("*") if runs.exists() else []:
            if running_tagged(ec2, folder.name):
                run_id = folder.name
        time.sleep(0.5)
    assert run_id is not None, "no instance was started"
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    finally:
        proc.kill()
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM): the sweep was stopped and its run torn down" in err
    assert running_tagged(ec2, run_id) == []
    summary = json.loads((runs / run_id / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["reason"] == "terminated by SIGTERM"
    assert summary["usd"] > 0  # the instance ran, so it is billed

"""One Ctrl-C at `sentitop run ... | tee log` (the terminal's SIGINT ends tee too): the run
still stops after its checkpoint, records it and exits 130."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.run.conftest import ROOT
from tests.run.test_resume_run import PROFILE


@pytest.mark.timeout(600)
@pytest.mark.parametrize("json_output", [False, True], ids=["display", "json"])
def test_one_ctrl_c_keeps_its_checkpoint_when_the_reader_left(
    tmp_path: Path, run_env: dict[str, str], json_output: bool
) -> None:
    """Rich's console exited (SystemExit 1) at the first line it could not write — the
    "stopping: … writes a checkpoint" line — which cancelled the run: no checkpoint, exit 1;
    with --json the last print made it exit 141 (trial M)."""
    profile = tmp_path / "p.yaml"
    profile.write_text(PROFILE.replace("epochs: 2", "epochs: 200"))
    runs = Path(run_env["SENTITOP_RUNS_DIR"])
    cmd = [sys.executable, "-m", "tui.cli", "run", str(profile), *(["--json"] * json_output)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=run_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)  # fmt: skip
    assert proc.stdout is not None
    try:
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            found = list(runs.glob("*/events.jsonl"))
            if found and found[0].read_text().count('"type":"step"') >= 3:
                break
            time.sleep(0.1)
        proc.stdout.close()  # tee is gone
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    assert proc.returncode == 130
    (run,) = list(runs.iterdir())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "interrupted" and "checkpoint" in summary["reason"]
    assert (run / "train" / "checkpoints" / "latest.pt").is_file()

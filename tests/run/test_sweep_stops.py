"""Ctrl-C during `sentitop sweep` stops as `sentitop run` does: the first press lets the run under
way write its checkpoint and starts no further run, the second stops at once; either way the
stopped run keeps its sweep tag."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.run.conftest import ROOT
from tests.run.test_run_command import CHECKPOINT_KEPT


def _sweep_in_training(
    write_profile: Any, run_env: dict[str, str], tmp_path: Path, **popen: Any
) -> tuple[subprocess.Popen[Any], Path]:
    """A 1,2-worker sweep whose first run has stepped: (the process, that run's events)."""
    profile = write_profile(nproc=1, epochs=50)
    slow = "  batch: 16\n  balance: {emulate_s: 0.25}\n"  # sleep-based device time: 1 s a step
    profile.write_text(profile.read_text().replace("  batch: 64\n", slow))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "sweep", str(profile), "--nproc", "1,2"],
        env=run_env, cwd=ROOT, stdout=subprocess.PIPE, start_new_session=True, **popen,
    )  # fmt: skip
    runs = tmp_path / "runs"
    deadline = time.time() + 180
    while time.time() < deadline:
        found = list(runs.glob("*/events.jsonl")) if runs.exists() else []
        if found and '"type":"step"' in found[0].read_text():
            return proc, found[0]
        time.sleep(0.5)
    proc.kill()
    raise AssertionError("training never started")


@pytest.mark.parametrize(
    ("presses", "reason"),
    [(1, CHECKPOINT_KEPT), (2, re.escape("interrupted by the user (Ctrl-C)"))],
    ids=["ctrl-c", "ctrl-c-twice"],
)
def test_ctrl_c_stops_the_sweep_after_the_run_under_way(
    write_profile, run_env, tmp_path: Path, presses: int, reason: str
) -> None:
    proc, events = _sweep_in_training(write_profile, run_env, tmp_path, text=True,
                                      stderr=subprocess.PIPE)  # fmt: skip
    runs = tmp_path / "runs"
    for _ in range(presses):
        os.kill(proc.pid, signal.SIGINT)
        time.sleep(0.5)  # two signals sent back to back would merge into one
    try:
        _, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "the sweep starts no further run" in err
    assert ("stopping at once" in err) == (presses == 2)
    run_dir = events.parent
    assert [p.name for p in runs.iterdir()] == [run_dir.name]  # the 2-worker run never started
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted" and re.fullmatch(reason, summary["reason"]), summary
    tag = json.loads((run_dir / "sweep.json").read_text())
    assert tag["index"] == 0 and tag["workers"] == 1 and tag["counts"] == [1, 2]
    if presses == 1:
        assert "not started: the sweep's run(s) with 2 worker(s)" in err
        assert f"sentitop run --resume {run_dir}" in err
    left = subprocess.run(["pgrep", "-f", run_dir.name], capture_output=True, text=True)
    assert left.stdout.strip() == "", f"processes left running: {left.stdout}"


def test_a_last_run_stopped_before_its_checkpoint_is_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during the sweep's last run, before its first checkpoint, printed nothing of
    what was stopped (only a stop during an earlier run named the counts left); and a
    checkpoint that cannot be read was offered for --resume."""
    from types import SimpleNamespace

    from remote.checkpoint_keeper import NODE_CHECKPOINT
    from tests.bad_inputs import torch_like_zip
    from tui.cli.commands.sweep import _say_what_stopped

    first, last = tmp_path / "r1", tmp_path / "r2"
    last.mkdir()
    outcomes = [SimpleNamespace(status="ok", run_dir=first)]
    outcomes.append(SimpleNamespace(status="interrupted", run_dir=last))
    _say_what_stopped(outcomes, [1, 2], [])
    err = capsys.readouterr().err
    assert "not started" not in err
    assert f"stopped: the run with 2 worker(s), before its first checkpoint ({last})" in err
    (last / NODE_CHECKPOINT).parent.mkdir(parents=True)
    (last / NODE_CHECKPOINT).write_bytes(b"cut short")
    _say_what_stopped(outcomes, [1, 2], [4])
    err = capsys.readouterr().err
    assert "not started: the sweep's run(s) with 4 worker(s)" in err
    assert "cannot be read as a checkpoint" in err and "--resume" not in err
    torch_like_zip(last / NODE_CHECKPOINT)
    _say_what_stopped(outcomes, [1, 2], [])
    assert f"continue with: sentitop run --resume {last}" in capsys.readouterr().err


def test_one_ctrl_c_keeps_the_runs_checkpoint_when_the_reader_left(
    write_profile, run_env, tmp_path: Path
) -> None:
    """`sentitop sweep … 2>&1 | tee log`: the Ctrl-C ends tee too; the sweep's stop must not
    fail on the lines it can no longer write (the first of them came before the stop was set)."""
    proc, events = _sweep_in_training(write_profile, run_env, tmp_path, stderr=subprocess.STDOUT)
    runs = tmp_path / "runs"
    assert proc.stdout is not None
    proc.stdout.close()  # tee is gone
    os.kill(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 130
    summary = json.loads((events.parent / "summary.json").read_text())
    assert summary["status"] == "interrupted" and re.fullmatch(CHECKPOINT_KEPT, summary["reason"])
    assert [p.name for p in runs.iterdir()] == [events.parent.name]

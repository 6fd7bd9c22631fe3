"""Real multi-process runs over gloo through the local launcher and the `sentitop` CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.events import read_events

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tui.cli", *args]


@pytest.mark.slow
def test_two_process_gloo_run_end_to_end(tiny_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    out = subprocess.run(
        _cli(
            "train",
            "--data",
            str(tiny_data),
            "--run-dir",
            str(run),
            "--nproc",
            "2",
            "--epochs",
            "2",
            "--batch-size",
            "64",
            "--lr",
            "0.01",
            "--json",
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["world_size"] == 2 and summary["epochs"] == 2
    assert summary["accuracy"] > 0.8
    assert summary["n_test"] == 128  # the two eval shards were summed
    events = list(read_events(run / "events.jsonl"))
    phases = [e for e in events if e["type"] == "phase"]
    assert sorted({e["rank"] for e in phases}) == [0, 1]
    # every training sample used once per epoch across both ranks
    for epoch in (0, 1):
        assert sum(e["samples"] for e in phases if e["epoch"] == epoch) == 512
    assert (run / "model.pt").is_file() and (run / "checkpoints" / "latest.pt").is_file()


@pytest.mark.slow
def test_killing_a_rank_stops_the_launcher_and_names_it(tiny_data: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        _cli(
            "train",
            "--data",
            str(tiny_data),
            "--run-dir",
            str(tmp_path / "run"),
            "--nproc",
            "2",
            "--epochs",
            "1000",
            "--batch-size",
            "32",
        ),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pids: dict[int, int] = {}
        assert proc.stderr is not None and proc.stdout is not None
        while len(pids) < 2:
            line = proc.stderr.readline()
            assert line, "launcher ended before starting both ranks"
            if "launch: rank" in line:
                words = line.split()
                pids[int(words[words.index("rank", 2) + 1])] = int(words[-1])
        while not proc.stdout.readline().startswith("epoch "):  # training is under way
            assert proc.poll() is None, "launcher ended before the first epoch"
        os.kill(pids[1], signal.SIGKILL)
        killed = time.monotonic()
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert elapsed < 10
    assert "rank 1" in err and "SIGKILL" in err

"""Real `sentitop embed` processes that stop early: a signal, a diverged loss, no step to take.

Each leaves no rank process behind, no summary.json or embeddings.npy to be taken as done, and
events that end with the stage's end (no shared data needed).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.events import read_events
from tests.embeddings.topics import write_topic_reviews

ROOT = Path(__file__).resolve().parents[2]


def _embed_cmd(reviews: Path, run: Path, *flags: str) -> list[str]:
    return [
        sys.executable, "-m", "tui.cli", "embed", "--input", str(reviews), "--run-dir", str(run),
        "--dim", "8", "--threads", "1", *flags,
    ]  # fmt: skip


def _gone(pid: int) -> bool:
    """The process has exited (a zombie left for a non-reaping init counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return bool(re.search(r"^State:\s+Z", state, flags=re.M))


def _last_stage_end(run: Path) -> tuple[str | None, str | None]:
    ends = [e for e in read_events(run / "events.jsonl") if e["type"] == "stage_end"]
    return (ends[-1].get("stage"), ends[-1].get("status")) if ends else (None, None)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "code", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
)
def test_a_signal_mid_training_stops_every_rank_and_leaves_no_result(
    sig: signal.Signals, code: int, said: str, tmp_path: Path
) -> None:
    """SIGTERM ended the command silently (exit 143) and neither signal left a trace in the
    events (the dashboard read the run as still running)."""
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    run = tmp_path / "run"
    cmd = _embed_cmd(reviews, run, "--mode", "async", "--nproc", "3", "--epochs", "100000",
                     "--batch", "16", "--log-every", "100000")  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            events = run / "events.jsonl"
            if events.is_file() and any(e["type"] == "epoch" for e in read_events(events)):
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err[-2000:]
    assert f"{said}: the run was stopped; {run} holds no finished vectors" in err
    pids = [int(p) for p in re.findall(r"launch: rank \d pid (\d+)", err)]
    assert len(pids) == 3
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.1)
    assert all(_gone(p) for p in pids), "a rank outlived the launcher"
    assert not (run / "summary.json").exists() and not (run / "embeddings.npy").exists()
    assert _last_stage_end(run) == ("train", "interrupted")
    listed = subprocess.run([sys.executable, "-m", "tui.cli", "runs", "--runs-dir", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "ended without a summary: run (interrupted)" in listed.stderr  # not "killed"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("flags", "message", "code"),
    [
        (["--lr", "1e30"], "training diverged", 1),  # a JSON traceback ("Out of range float")
        (["--batch", "5000"], "not one step would train", 2),  # ended ok with SGNS loss 0.0000
    ],
)
def test_a_run_that_cannot_train_fails_with_a_message_and_no_vectors(
    flags: list[str], message: str, code: int, tmp_path: Path
) -> None:
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    run = tmp_path / "run"
    out = subprocess.run(
        _embed_cmd(reviews, run, "--epochs", "2", "--batch", "64", *flags),
        cwd=ROOT, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert out.returncode == code, out.stderr
    assert out.stderr.count(message) == 1 and "Out of range float" not in out.stderr
    assert not (run / "summary.json").exists() and not (run / "embeddings.npy").exists()
    if code == 2:  # counted before any rank starts; the prepared corpus stays for a re-run
        assert "launch:" not in out.stderr and f"the corpus prepared in {run} is kept" in out.stderr
        again = subprocess.run(
            _embed_cmd(reviews, run, "--epochs", "1", "--batch", "64"),
            cwd=ROOT, capture_output=True, text=True, timeout=280,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        ends = [e for e in read_events(run / "events.jsonl") if e["type"] == "stage_end"]
        assert ends[0]["stage"] == "prepare" and ends[0]["status"] == "cached"
        return
    assert _last_stage_end(run) == ("train", "failed")
    assert os.path.isfile(run / "corpus.npz")  # prepared: a re-run with other flags reuses it

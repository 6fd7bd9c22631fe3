"""One writer per run folder: a second `train` or `embed` into a folder another one is writing
is refused (exit 2) and changes nothing; the lock goes with its process, however it ends."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.run_lock import LOCK_FILE
from tests.embeddings.topics import write_topic_reviews
from tests.train.conftest import write_dataset
from tui.cli import main

HOLD = (
    "import sys, time; from engine.run_lock import run_folder_lock\n"
    "with run_folder_lock(sys.argv[1], sys.argv[2]):\n"
    "    print('held', flush=True); time.sleep(600)\n"
)


def hold(folder: Path, command: str) -> subprocess.Popen[str]:
    """Another process writing ``folder`` (as `sentitop <command>` would), once it holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), command],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_second_train_into_a_folder_being_written_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both trains ended "ok": the folder kept one's model beside the other's vocabulary."""
    data = write_dataset(tmp_path / "data")
    run = tmp_path / "run"
    holder = hold(run, "train")
    try:
        rc = main(["train", "--data", str(data), "--run-dir", str(run), "--epochs", "1"])
        err = capsys.readouterr().err
        assert rc == 2, err
        assert f"{run} is in use: sentitop train (pid {holder.pid}) is writing to it" in err
        assert sorted(p.name for p in run.iterdir()) == [LOCK_FILE]  # nothing of its own
    finally:
        holder.send_signal(signal.SIGKILL)  # killed: the kernel drops its lock
        holder.wait()
    rc = main(["train", "--data", str(data), "--run-dir", str(run), "--epochs", "1",
               "--model", "seed", "--threads", "1"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    assert (run / "summary.json").is_file()


def test_a_second_embed_into_a_folder_being_written_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second reported the first one's corpus and vectors as its own."""
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    run = tmp_path / "run"
    holder = hold(run, "embed")
    try:
        rc = main(["embed", "--input", str(reviews), "--run-dir", str(run), "--mode", "svd",
                   "--dim", "8"])  # fmt: skip
        err = capsys.readouterr().err
        assert rc == 2, err
        assert f"is in use: sentitop embed (pid {holder.pid})" in err and "Traceback" not in err
        assert sorted(p.name for p in run.iterdir()) == [LOCK_FILE]
    finally:
        holder.terminate()
        holder.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and holder.poll() is None:
        time.sleep(0.05)
    rc = main(["embed", "--input", str(reviews), "--run-dir", str(run), "--mode", "svd",
               "--dim", "8"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err


def test_a_resume_of_a_folder_being_written_says_it_is_in_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before the first checkpoint it said "holds no checkpoint to continue" (trial M)."""
    run = tmp_path / "run"
    holder = hold(run, "train")
    try:
        assert main(["train", "--run-dir", str(run), "--resume"]) == 2
        err = capsys.readouterr().err
        assert f"{run} is in use: sentitop train (pid {holder.pid})" in err
        assert "no checkpoint" not in err
    finally:
        holder.kill()
        holder.wait()

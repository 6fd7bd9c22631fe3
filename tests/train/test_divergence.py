"""A run whose loss or weights stop being finite stops with a clear error and keeps no such
checkpoint; SIGTERM to `sentitop train` says what Ctrl-C says."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from engine.errors import DivergedError
from engine.sentiment.divergence import check_loss, check_weights
from tui.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_check_loss_refuses_nan_and_infinity() -> None:
    check_loss(0.7, epoch=0, step=3, rank=0, lr=0.01)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(DivergedError, match="in step 4 of epoch 1 \\(rank 1\\)") as caught:
            check_loss(bad, epoch=0, step=3, rank=1, lr=0.01)
        assert "lower --lr (this run's: 0.01)" in (caught.value.hint or "")


def test_check_weights_names_the_broken_tensors() -> None:
    model = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    check_weights(model, epoch=1, step=0, lr=0.1)
    with torch.no_grad():
        model[1].bias.fill_(float("inf"))
    with pytest.raises(DivergedError, match=r"by the end of epoch 1: 1\.bias;"):
        check_weights(model, epoch=1, step=0, lr=0.1)


def test_a_diverging_run_stops_clearly_and_keeps_only_finite_checkpoints(
    tiny_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An SGD step at lr 1e30 made the loss NaN: the step event's JSON raised a ValueError
    traceback, a checkpoint of NaN weights was saved and `--resume` was advised."""
    run = tmp_path / "run"
    argv = ["train", "--data", str(tiny_data), "--run-dir", str(run), "--epochs", "2"]
    argv += ["--lr", "1e30", "--optimizer", "sgd", "--clip-grad-norm", "0"]
    argv += ["--warmup-steps", "0", "--checkpoint-every-steps", "1"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "training diverged: the loss became nan" in err, err
    assert "lower --lr" in err and "Traceback" not in err and "ValueError" not in err
    assert "--resume` continues" not in err  # the checkpoint's own --lr would diverge again
    assert not (run / "summary.json").exists()
    saved = run / "checkpoints" / "latest.pt"
    if saved.exists():
        state = torch.load(saved, weights_only=False)
        weights = [v for v in state["model"].values() if v.is_floating_point()]
        assert all(bool(torch.isfinite(v).all()) for v in weights)


def test_sigterm_says_terminated_and_how_to_resume(tiny_data: Path, tmp_path: Path) -> None:
    """SIGTERM (a scheduler, a spot shutdown) ended `train` with exit 143 and not a word."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "tui.cli", "train", "--data", str(tiny_data)]
    cmd += ["--run-dir", str(run), "--epochs", "500", "--checkpoint-every-steps", "1"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    saved = run / "checkpoints" / "latest.pt"
    deadline = time.monotonic() + 120
    while not saved.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "terminated (SIGTERM): the ranks were stopped" in err
    assert f"--run-dir {run} --resume` continues it" in err
    assert "Traceback" not in err


def test_sigterm_before_any_checkpoint_says_the_work_is_lost(
    tiny_data: Path, tmp_path: Path
) -> None:
    """It said "the ranks were stopped" and nothing more: no checkpoint, nothing to resume."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "tui.cli", "train", "--data", str(tiny_data), "--run-dir"]
    cmd += [str(run), "--epochs", "500", "--checkpoint-every-min", "0", "--log-every", "1"]
    cmd += ["--batch-size", "8", "--straggle", "0:50"]  # an epoch far longer than the test
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    events = run / "events.jsonl"
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if events.exists() and '"type":"step"' in events.read_text():
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not (run / "checkpoints" / "latest.pt").exists()
    assert "no checkpoint had been written: nothing to resume" in err and "--resume" not in err


def test_ctrl_c_keeps_its_checkpoint_when_the_output_reader_left(
    tiny_data: Path, tmp_path: Path
) -> None:
    """`sentitop train ... 2>&1 | tee log` and one Ctrl-C: the terminal's SIGINT kills tee
    too, the launcher's "stopping" line then hit the broken pipe, it exited 141 before asking
    for the checkpoint, and the run was recorded failed (trial M)."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "tui.cli", "train", "--data", str(tiny_data), "--run-dir"]
    cmd += [str(run), "--epochs", "50", "--batch-size", "8", "--checkpoint-every-min", "0"]
    cmd += ["--straggle", "0:50", "--log-every", "1"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    try:
        events = run / "events.jsonl"
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if events.exists() and events.read_text().count('"type":"step"') >= 2:
                break
            time.sleep(0.05)
        proc.stdout.close()  # tee is gone: every later write of the launcher gets EPIPE
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert (run / "checkpoints" / "latest.pt").is_file()  # what the one Ctrl-C promises
    last = json.loads(events.read_text().splitlines()[-1])
    assert (last["type"], last["status"]) == ("stage_end", "interrupted")


def test_one_ctrl_c_keeps_the_steps_since_the_last_checkpoint(
    tiny_data: Path, tmp_path: Path
) -> None:
    """Ctrl-C stopped the ranks at once: with no periodic checkpoint due, the epoch's steps
    were lost. Now rank 0 checkpoints at its next step first (a second Ctrl-C: at once)."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "tui.cli", "train", "--data", str(tiny_data), "--run-dir"]
    cmd += [str(run), "--epochs", "50", "--batch-size", "8", "--checkpoint-every-min", "0"]
    cmd += ["--straggle", "0:50", "--log-every", "1"]  # rank 0 sleeps 49x its compute
    proc = subprocess.Popen(  # stdout not read: a full pipe would block the progress lines
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        events = run / "events.jsonl"
        seen = 0
        deadline = time.monotonic() + 120
        while seen < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            text = events.read_text() if events.exists() else ""
            steps = [json.loads(line) for line in text.splitlines() if '"type":"step"' in line]
            seen = max((s["global_step"] for s in steps), default=0)
        assert seen >= 3, "training never stepped"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:  # a failed assertion must not leave 50 epochs training
            proc.send_signal(signal.SIGINT)  # twice: at once, the ranks stopped too
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
    assert proc.returncode == 130, err
    assert "rank 0 first writes a checkpoint at its next step" in err
    state = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    assert state["global_step"] >= seen  # the work up to the stop is kept
    assert not (run / "checkpoints" / "REQUEST").exists()
    assert f"--run-dir {run} --resume` continues it" in err and "Traceback" not in err
    # its events say how it ended: `sentitop runs` read it as killed or crashed (trial L)
    ended = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()][-2:]
    assert [(e["type"], e.get("status") or e.get("message")) for e in ended] == [
        ("error", "interrupted (Ctrl-C)"),
        ("stage_end", "interrupted"),
    ]
    listed = subprocess.run([sys.executable, "-m", "tui.cli", "runs", "--runs-dir", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, check=False)  # fmt: skip
    assert "1 run(s) ended without a summary: run (interrupted)" in listed.stderr

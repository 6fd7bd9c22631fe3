"""Real multi-process runs over gloo: sync and async both learn; async has no global barrier."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from engine.events import read_events

ROOT = Path(__file__).resolve().parents[2]


def _embed(imdb: Path, run: Path, *args: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "tui.cli", "embed", "--input", str(imdb), "--run-dir", str(run)]
    common = ["--threads", "1", "--eval-words", "150", "--max-vocab", "3000", "--json"]
    out = subprocess.run(
        [*cmd, *common, *args], cwd=ROOT, capture_output=True, text=True, timeout=280
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return summary


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_two_processes_finish_and_lower_the_pip_loss(
    imdb_path: Path, tmp_path: Path, mode: str
) -> None:
    run = tmp_path / mode
    summary = _embed(
        imdb_path, run, "--mode", mode, "--nproc", "2", "--max-docs", "300",
        "--epochs", "3", "--batch", "256", "--log-every", "50",
    )  # fmt: skip
    assert summary["world_size"] == 2 and summary["epochs"] == 3
    assert summary["workers"] == (2 if mode == "sync" else 1)
    assert summary["pip_loss"] < summary["pip_loss_initial"]
    assert summary["words_per_s"] > 0 and summary["neighbours"]
    assert 0 < summary["train_s"] <= summary["wall_s"]  # epochs are timed within the run
    events = list(read_events(run / "events.jsonl"))
    stages = [(e["type"], e["stage"]) for e in events if "stage" in e]
    assert stages[0] == ("stage_start", "prepare") and stages[-1] == ("stage_end", "train")
    kinds = [(e["type"], e.get("stage")) for e in events]
    assert kinds.index(("epoch", None)) > kinds.index(("stage_start", "train"))
    # rank 0's file ends with the stage, then its rank_end (after the final barrier)
    assert kinds[-3:] == [("summary", "train"), ("stage_end", "train"), ("rank_end", None)]
    epochs = [e for e in events if e["type"] == "epoch"]
    assert [e["epoch"] for e in epochs] == [0, 1, 2]
    assert all(e["pip_loss"] > 0 and e["words_per_s"] > 0 for e in epochs)
    steps = [e for e in events if e["type"] == "step"]
    assert steps and all(s["words_per_s"] > 0 for s in steps)
    assert (run / "embeddings.npy").is_file() and (run / "summary.json").is_file()


def _worker_seconds(run: Path) -> dict[int, dict[str, float]]:
    """rank -> its phase record of epoch 0."""
    return {
        e["rank"]: e
        for e in read_events(run / "events.jsonl")
        if e["type"] == "phase" and e["epoch"] == 0
    }


@pytest.mark.slow
def test_async_straggler_does_not_stall_the_other_worker(imdb_path: Path, tmp_path: Path) -> None:
    """Rank 2 sleeps 14x its compute every step. In async mode worker 1 finishes its epoch
    without absorbing that sleep; in sync mode (the control) every rank absorbs all of it."""
    args = ["--nproc", "3", "--max-docs", "150", "--epochs", "1", "--batch", "128",
            "--straggle", "2:15", "--log-every", "1000"]  # fmt: skip
    _embed(imdb_path, tmp_path / "async", "--mode", "async", *args)
    _embed(imdb_path, tmp_path / "sync", "--mode", "sync", *args)
    a, s = _worker_seconds(tmp_path / "async"), _worker_seconds(tmp_path / "sync")
    assert set(a) == {1, 2} and set(s) == {0, 1, 2}
    # async: the fast worker's epoch is shorter than the straggler's by most of its sleep
    sleep = a[2]["straggle"]
    assert sleep > 2.0
    assert a[1]["seconds"] < a[2]["seconds"] - 0.5 * sleep
    assert a[1]["steps"] >= 0.8 * a[2]["steps"]  # and it did its whole share meanwhile
    # sync (control): the same straggler holds every rank back by nearly all of its sleep
    sleep = s[2]["straggle"]
    assert s[1]["seconds"] > s[2]["seconds"] - 0.2 * sleep and s[1]["seconds"] > 0.8 * sleep


@pytest.mark.slow
def test_one_rank_trains_on_several_real_inputs(imdb_path: Path, tmp_path: Path) -> None:
    """IMDB and an Amazon file as one corpus (the Amazon reviews first), on the CPU when asked;
    the prepare summary counts each file, the phase splits pair building from the model."""
    amazon = imdb_path.parent / "amazon2018_Appliances_5.jsonl.gz"  # ≈ 130 distinct texts
    run = tmp_path / "mixed"
    cmd = [sys.executable, "-m", "tui.cli", "embed", "--input", str(amazon), str(imdb_path),
           "--run-dir", str(run), "--device", "cpu", "--dedupe", "--max-docs", "400",
           "--epochs", "2", "--batch", "256", "--threads", "1", "--eval-words", "150",
           "--max-vocab", "3000", "--json"]  # fmt: skip
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["device"] == "cpu" and summary["pip_loss"] < summary["pip_loss_initial"]
    events = list(read_events(run / "events.jsonl"))
    prep = next(e for e in events if e["type"] == "summary" and e["stage"] == "prepare")
    appliances, imdb = prep["sources"]
    assert appliances["path"] == str(amazon) and appliances["duplicates"] > 1000  # variants
    assert appliances["docs"] > 0 and imdb["docs"] > 0
    assert appliances["docs"] + imdb["docs"] == prep["docs"] == 400
    phase = next(e for e in events if e["type"] == "phase")
    assert phase["sampling"] > 0 and phase["compute"] > 0
    assert phase["sampling"] + phase["compute"] + phase["comm"] <= phase["seconds"] * 1.01


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (GPU boxes only)")
def test_one_rank_trains_on_cuda(imdb_path: Path, tmp_path: Path) -> None:
    """On a GPU box: pairs, negatives and the model live on the GPU; the run learns."""
    summary = _embed(
        imdb_path, tmp_path / "cuda", "--device", "cuda", "--max-docs", "2000",
        "--epochs", "2", "--batch", "4096", "--log-every", "5",
    )  # fmt: skip
    assert summary["device"] == "cuda:0" and summary["epochs"] == 2
    assert summary["pip_loss"] < summary["pip_loss_initial"]
    assert summary["words_per_s"] > 0 and summary["neighbours"]
    vectors = np.load(tmp_path / "cuda" / "embeddings.npy")
    assert vectors.shape[0] == summary["vocab"] and np.isfinite(vectors).all()


def test_a_run_that_learned_nothing_says_so(imdb_path: Path, tmp_path: Path) -> None:
    """One epoch of a few huge batches leaves the PIP loss where it started (1.3939 → 1.3936 on
    300 reviews): the run ended `ok` with no word of it."""
    run = tmp_path / "flat"
    cmd = [sys.executable, "-m", "tui.cli", "embed", "--input", str(imdb_path),
           "--run-dir", str(run), "--device", "cpu", "--max-docs", "200", "--epochs", "1",
           "--batch", "16384", "--dim", "16", "--threads", "1", "--nproc", "1"]  # fmt: skip
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ok"
    assert [w["code"] for w in summary["warnings"]] == ["pip_not_improved"]
    assert "WARNING: PIP loss" in out.stderr and "hardly closer" in out.stderr
    events = list(read_events(run / "events.jsonl"))
    assert [e["code"] for e in events if e["type"] == "warning"] == ["pip_not_improved"]

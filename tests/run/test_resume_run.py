"""`sentitop run --resume RUN`: a stopped run continues from its checkpoint in a new folder."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from engine.events import read_events
from remote.profile import load_profile
from remote.runner import execute_run

from .conftest import sentitop

PROFILE = """\
name: resume-local
provider: local
instance_type: m5.large
data:
  synthetic: {size: 2MB, seed: 1}
preprocess: {vocab_size: 500, seq_len: 32}
train:
  nproc: 2
  epochs: 2
  batch_size: 64
  log_every: 2
  checkpoint_every_min: 0
  checkpoint_every_steps: 4
  threads: 1
"""


async def stopped_at_checkpoint(path: Path, runs: Path) -> tuple[Any, dict[str, Any]]:
    """Run the profile at ``path`` into ``runs`` and stop it at its first checkpoint: (the
    outcome, the newest `checkpoint` event before it stopped)."""
    stop = asyncio.Event()
    seen: dict[str, Any] = {}

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "checkpoint":  # more may come while the run stops: the newest counts
            seen.update(event)
            stop.set()

    outcome = await execute_run(load_profile(path), runs_dir=runs, on_event=on_event, stop=stop)
    assert outcome.status == "interrupted" and seen
    return outcome, seen


def recorded_under_an_older_default(events: Path, reference_lr: float) -> None:
    """Rewrite a run's train_start events as if it had trained at ``reference_lr`` (the profile
    leaves the rate to the engine's default, which may change between the run and its resume)."""
    lines = []
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event.get("type") == "train_start":
            event["reference_lr"] = reference_lr
            event["lr"] = reference_lr * event["global_batch"] / 256
        lines.append(json.dumps(event))
    events.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_stopped_run_resumes_from_its_checkpoint_to_the_end(
    tmp_path: Path, run_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped at its first checkpoint (mid-epoch 0), the run had no way on: `sentitop run`
    only started afresh. `--resume RUN` trains the rest in a new run folder, from that
    checkpoint's step, and its summary covers the whole training."""
    monkeypatch.setenv("SENTITOP_CACHE_DIR", run_env["SENTITOP_CACHE_DIR"])
    path = tmp_path / "resume-local.yaml"
    path.write_text(PROFILE)
    runs = tmp_path / "runs"
    first, checkpoint = await stopped_at_checkpoint(path, runs)
    recorded_under_an_older_default(first.run_dir / "events.jsonl", reference_lr=0.004)
    other = tmp_path / "other.yaml"
    other.write_text(PROFILE.replace("seed: 1", "seed: 2"))
    mixed = sentitop("run", str(other), "--resume", str(first.run_dir), env=run_env)
    assert mixed.returncode == 2 and "differs from the run" in mixed.stderr
    done = sentitop("run", "--resume", str(first.run_dir), "--runs-dir", str(runs), "--json",
                    env=run_env, timeout=400)  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "ok" and summary["resumed_from"] == str(first.run_dir)
    assert summary["epochs"] == 2 and len(summary["train"]["per_epoch"]) == 2
    (second,) = [p for p in runs.iterdir() if p != first.run_dir]
    events = list(read_events(second / "events.jsonl"))
    (start,) = [e for e in events if e["type"] == "train_start" and e.get("rank", 0) == 0]
    assert start["length_buckets"] is True  # the first run's order (the default), kept
    assert start["reference_lr"] == pytest.approx(0.004)  # its rate, not today's default
    assert start["lr"] == pytest.approx(0.004 * 64 / 256)
    assert (start["resumed_epoch"], start["resumed_step"]) == (
        checkpoint["epoch"],
        checkpoint["step"],
    )
    ended = [e["epoch"] for e in events if e["type"] == "epoch"]
    assert ended == list(range(start["resumed_epoch"], 2))  # the rest, the resumed one first
    run_start = next(e for e in events if e["type"] == "run_start")
    assert run_start["resumed_from"] == first.run_dir.name
    # a finished run, a run that left no checkpoint, another profile's data: refused (exit 2)
    again = sentitop("run", "--resume", str(second), env=run_env)
    assert again.returncode == 2 and "finished ok" in again.stderr
    bare = runs / "bare"
    bare.mkdir()
    (bare / "profile.yaml").write_text((first.run_dir / "profile.yaml").read_text())
    (bare / "summary.json").write_text(json.dumps({"status": "failed"}))
    nothing = sentitop("run", "--resume", str(bare), env=run_env)
    assert nothing.returncode == 2 and "before its first checkpoint" in nothing.stderr
    twice = sentitop("run", "--resume", str(first.run_dir), env=run_env)  # resumed already
    assert twice.returncode == 2 and f"already resumed by run {second.name}" in twice.stderr
    neither = sentitop("run", env=run_env)
    assert neither.returncode == 2 and "--resume RUN" in neither.stderr
    for result in (again, nothing, mixed, twice, neither):
        assert "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_resume_on_inputs_rewritten_since_the_stop_is_refused_before_training(
    tmp_path: Path, run_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile's input rewritten in place between the stop and the resume is preprocessed
    again (the cache sees it changed): the checkpoint trained on the old rows and word ids
    went on over the new ones. It is refused before any rank starts (exit 2), and the hint
    says the resume can go on once the inputs are the run's again."""
    import os

    monkeypatch.setenv("SENTITOP_CACHE_DIR", run_env["SENTITOP_CACHE_DIR"])
    path = tmp_path / "resume-local.yaml"
    path.write_text(PROFILE)
    first, _ = await stopped_at_checkpoint(path, tmp_path / "runs")
    (source,) = (Path(run_env["SENTITOP_CACHE_DIR"]) / "synthetic").glob("reviews-*.jsonl")
    before, lines = source.stat(), source.read_text().splitlines(keepends=True)
    source.write_text("".join(lines[: len(lines) * 3 // 4]))
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    refused = sentitop("run", "--resume", str(first.run_dir), env=run_env)
    assert refused.returncode == 2, refused.stderr
    said = " ".join(refused.stderr.split())
    assert f"is not the dataset {first.run_dir} was trained on" in said
    assert "once that is fixed, continue with: sentitop run --resume" in said
    (second,) = [p for p in (tmp_path / "runs").iterdir() if p != first.run_dir]
    types = [e["type"] for e in read_events(second / "events.jsonl")]
    assert "train_start" not in types and "rank_start" not in types  # no rank started
    again = sentitop("run", "--resume", str(second), env=run_env)  # the refused run, resumed:
    assert again.returncode == 2, again.stderr  # no vocab copy, no train_start: its chain's
    assert f"is not the dataset {second} was trained on" in " ".join(again.stderr.split())
    (third,) = [p for p in (tmp_path / "runs").iterdir() if p not in (first.run_dir, second)]
    assert "rank_start" not in [e["type"] for e in read_events(third / "events.jsonl")]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ctrl_c_after_a_checkpoint_says_how_to_resume(
    tmp_path: Path, run_env: dict[str, str]
) -> None:
    """Ctrl-C printed only "interrupted": the checkpoint and the way on were not said."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from .conftest import ROOT

    path = tmp_path / "resume-local.yaml"
    path.write_text(PROFILE.replace("epochs: 2", "epochs: 50"))
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "run", str(path), "--runs-dir",
                             str(runs)], env=run_env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            logs = list(runs.glob("*/events.jsonl"))
            if logs and '"type":"checkpoint"' in logs[0].read_text().replace(" ", ""):
                break
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    (run_dir,) = runs.iterdir()
    assert f"continue with: sentitop run --resume {run_dir}" in err
    assert "rank 0 first writes a checkpoint at its next step" in out  # one Ctrl-C
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted" and "checkpoint" in summary["reason"], summary


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_run_stopped_after_an_epoch_keeps_that_epoch_and_its_threshold(
    tmp_path: Path, run_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trial's run stopped after its first epoch said "epochs —" and "time to threshold: not
    reached" although its events held the epoch and the threshold crossing, and `report` left
    it out as "no measured epoch": summary.json's train block was empty."""
    monkeypatch.setenv("SENTITOP_CACHE_DIR", run_env["SENTITOP_CACHE_DIR"])
    path = tmp_path / "p.yaml"
    path.write_text(PROFILE.replace("epochs: 2", "epochs: 20\n  loss_threshold: 5.0"))
    stop = asyncio.Event()
    seen: dict[str, list[dict[str, Any]]] = {"epoch": [], "threshold": []}

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] in seen:
            seen[event["type"]].append(event)
        if event["type"] == "epoch":
            stop.set()

    outcome = await execute_run(load_profile(path), runs_dir=tmp_path / "runs",
                                on_event=on_event, stop=stop)  # fmt: skip
    summary = outcome.summary
    assert summary["status"] == "interrupted" and "accuracy" not in summary
    epochs = summary["train"]["per_epoch"]
    assert summary["train"]["partial"] and len(epochs) == len(seen["epoch"]) >= 1
    assert [e["seconds"] for e in epochs] == [e["seconds"] for e in seen["epoch"]]
    assert summary["epochs"] == epochs[-1]["epoch"] + 1
    (crossed,) = seen["threshold"]  # loss 5.0: crossed at the first step
    assert summary["time_to_threshold_s"] == pytest.approx(crossed["seconds"])
    listed = sentitop("report", str(outcome.run_dir), "--output", str(tmp_path / "rep"),
                      env=run_env)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "no measured epoch" not in (tmp_path / "rep" / "report.md").read_text()
    # its last evaluated epoch's accuracy is shown, said to be that epoch's (it read "—")
    from tui.model.rows import run_row

    last = epochs[-1]
    runs = sentitop("runs", "--runs-dir", str(tmp_path / "runs"), env=run_env)
    assert f"{last['accuracy']:.3f} (ep {last['epoch'] + 1})" in runs.stdout
    row = run_row(outcome.run_dir)
    assert row is not None and (row.accuracy, row.accuracy_epoch) == (
        last["accuracy"],
        last["epoch"] + 1,
    )

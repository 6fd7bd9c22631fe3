"""`sentitop run`: the whole job end to end, its run folder, summary and exit codes."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.events import read_events
from tests.run.conftest import ROOT, sentitop

pytestmark = pytest.mark.slow


def _only_run_dir(runs: Path) -> Path:
    dirs = [p for p in runs.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def test_run_json_end_to_end(write_profile, run_env, tmp_path: Path) -> None:
    profile = write_profile(nproc=2, epochs=2)
    result = sentitop("run", str(profile), "--json", env=run_env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)  # --json prints only the summary object
    assert summary["status"] == "ok"
    assert summary["world_size"] == 2
    assert summary["epochs"] == 2
    assert 0.0 <= summary["accuracy"] <= 1.0 and 0.0 <= summary["f1"] <= 1.0
    assert summary["samples_per_s"] > 0
    # m5.large at its bundled price, billed at least one minute
    line = summary["cost"]["lines"][0]
    assert line["instance_type"] == "m5.large" and line["billed_s"] >= 60
    assert summary["usd"] == pytest.approx(line["usd_per_hour"] * line["billed_s"] / 3600, rel=1e-3)

    run_dir = _only_run_dir(tmp_path / "runs")
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    assert json.loads((run_dir / "summary.json").read_text()) == summary
    assert (run_dir / "profile.yaml").is_file()
    types = [e["type"] for e in read_events(run_dir / "events.jsonl")]
    for expected in (
        "run_start",
        "stage_start",
        "progress",
        "step",
        "epoch",
        "phase",
        "cost",
        "summary",
        "run_end",
    ):
        assert expected in types, f"no {expected} event"
    assert types[0] == "run_start" and types[-1] == "run_end"
    epochs = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "epoch"]
    assert [e["epoch"] for e in epochs] == [0, 1]
    assert all(e["node"] == "local" for e in epochs)


def test_default_runs_folder_is_relative_to_the_working_directory(
    write_profile, run_env, tmp_path: Path
) -> None:
    env = {k: v for k, v in run_env.items() if k != "SENTITOP_RUNS_DIR"}
    work = tmp_path / "work"
    work.mkdir()
    result = sentitop("run", str(write_profile()), "--json", env=env, cwd=work)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "ok"
    assert (_only_run_dir(work / "runs") / "summary.json").is_file()


def test_second_run_reuses_the_preprocessed_dataset(write_profile, run_env, tmp_path) -> None:
    profile = write_profile()
    assert sentitop("run", str(profile), "--json", env=run_env).returncode == 0
    second = sentitop("run", str(profile), "--json", env=run_env)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["preprocess"]["cached"] is True


def test_an_input_rewritten_in_place_is_preprocessed_again(
    write_profile, run_env, tmp_path: Path
) -> None:
    """A trial replaced an input with one of the same size and kept its mtime (`cp -p`,
    `rsync -t` and `tar x` do): the cache key (path, size, mtime in seconds) matched, the old
    dataset was reused and the run reported the old file's accuracy as ok. The inputs' ctime,
    which no tool sets, now tells; an unchanged input still reuses the cache."""
    profile = write_profile()
    first = sentitop("run", str(profile), "--json", env=run_env)
    assert first.returncode == 0, first.stderr
    (source,) = (tmp_path / "cache" / "synthetic").glob("reviews-*.jsonl")
    assert sentitop("run", str(profile), "--json", env=run_env).returncode == 0  # stamped: reused
    before = source.stat()
    flipped = source.read_bytes()
    for a, b in ((b'"overall": 5.0', b"@5"), (b'"overall": 1.0', b'"overall": 5.0'),
                 (b"@5", b'"overall": 1.0')):  # fmt: skip
        flipped = flipped.replace(a, b)
    time.sleep(0.05)  # (a ctime tick on coarse-clock filesystems)
    source.write_bytes(flipped)
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = source.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    again = sentitop("run", str(profile), "--json", env=run_env)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    old, new = json.loads(first.stdout)["preprocess"], summary["preprocess"]
    assert not new.get("cached") and new["positive"] != old["positive"]  # the new content's
    assert any(w["code"] == "inputs_changed" and str(source) in w["message"]
               for w in summary["warnings"])  # fmt: skip
    third = sentitop("run", str(profile), "--json", env=run_env)
    assert json.loads(third.stdout)["preprocess"]["cached"] is True


def test_a_missing_input_file_is_refused_before_a_run_folder_exists(
    run_env, tmp_path: Path
) -> None:
    """A trial's profile named `mi3000.jsonl`, the file beside it, and was run from another
    folder: `run` warned, made a run folder, and failed at preprocessing with "cannot read input
    mi3000.jsonl" (no profile, no field, no folder named). `plan` predicted it silently."""
    folder = tmp_path / "prof"
    folder.mkdir()
    (folder / "mine.jsonl").write_text('{"reviewText": "good", "overall": 5}\n')
    profile = folder / "rel.yaml"
    profile.write_text(
        "name: rel\nprovider: local\ndata:\n  inputs:\n    - mine.jsonl\n"
        "train:\n  nproc: 1\n  epochs: 1\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    refused = sentitop("run", str(profile), env=run_env, cwd=elsewhere)
    assert refused.returncode == 2, refused.stderr
    said = " ".join(refused.stderr.split())
    assert (
        f"{profile}: data.inputs[0]: 'mine.jsonl': no such file or folder (relative to "
        f"{elsewhere}, where this command runs)" in said
    )
    assert f"it is beside the profile: give {folder / 'mine.jsonl'}" in said
    assert not (tmp_path / "runs").exists() and "Traceback" not in refused.stderr
    planned = sentitop("plan", str(profile), env=run_env, cwd=elsewhere)
    assert planned.returncode == 0 and "warning: " + str(profile) in planned.stderr
    (folder / "mine.jsonl").unlink()
    gone = sentitop("run", str(profile), env=run_env, cwd=folder)
    assert gone.returncode == 2 and "give the file's absolute path" in gone.stderr


def test_headless_display_shows_progress_and_summary_table(write_profile, run_env) -> None:
    result = sentitop("run", str(write_profile()), env=run_env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "epoch 1/1" in out
    for label in ("accuracy", "F1", "wall time", "samples/s", "time to threshold", "cost"):
        assert label in out
    assert "run folder:" in out


def test_bad_profile_exits_2_naming_file_and_field(tmp_path, run_env) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\nprovider: local\ndata:\n  synthetic: {size: 1MB}\ntrain:\n  epochs: zero\n"
    )
    result = sentitop("run", str(bad), env=run_env, timeout=60)
    assert result.returncode == 2
    assert "bad.yaml" in result.stderr and "epochs" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_runs_dir_that_is_a_file_exits_2(write_profile, tmp_path, run_env) -> None:
    """It was a FileExistsError traceback from making the runs folder."""
    blocker = tmp_path / "runs-file"
    blocker.write_text("not a folder")
    result = sentitop("run", str(write_profile()), "--runs-dir", str(blocker), env=run_env,
                      timeout=120)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert f"--runs-dir {blocker}: cannot hold run folders" in result.stderr
    assert "Traceback" not in result.stderr and blocker.read_text() == "not a folder"
    by_env = sentitop("run", str(write_profile()), env={**run_env, "SENTITOP_RUNS_DIR":
                      str(blocker)}, timeout=120)  # fmt: skip
    assert by_env.returncode == 2, by_env.stderr  # named as the user set it (trial L)
    assert f"$SENTITOP_RUNS_DIR {blocker}: cannot hold run folders" in by_env.stderr


def test_a_batch_above_the_training_split_exits_2_before_any_node(write_profile, run_env) -> None:
    """`sentitop train` refuses it; a profile's train.batch went on to a learning rate scaled
    to the batch and a diverged model that "finished"."""
    path = write_profile()
    path.write_text(path.read_text().replace("batch: 64", "batch: 1000000"))
    result = sentitop("run", str(path), env=run_env, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "batch size 1,000,000 (--batch-size; train.batch_size in a profile)" in result.stderr
    assert "Traceback" not in result.stderr and "launch:" not in result.stderr


def test_missing_input_file_exits_2(tmp_path, run_env) -> None:
    profile = tmp_path / "missing.yaml"
    profile.write_text("name: missing\nprovider: local\ndata:\n  inputs: [/nonexistent/x.json]\n")
    result = sentitop("run", str(profile), env=run_env, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "/nonexistent/x.json" in result.stderr
    assert "Traceback" not in result.stderr
    assert '{"type"' not in result.stdout + result.stderr  # the message, not raw event lines


def test_missing_init_embeddings_run_exits_2_before_training(tmp_path, run_env) -> None:
    profile = tmp_path / "emb.yaml"
    missing = tmp_path / "no-such-embed-run"
    profile.write_text(
        "name: emb\nprovider: local\ndata:\n  synthetic: {size: 200KB}\n"
        f"train:\n  model:\n    init_embeddings: {missing}\n"
    )
    result = sentitop("run", str(profile), "--json", env=run_env, timeout=120)
    assert result.returncode == 2, result.stderr
    assert str(missing) in result.stderr and "Traceback" not in result.stderr
    # refused before any stage, and before a run folder that `sentitop runs` would list
    assert result.stdout == "" and not (tmp_path / "runs").exists()


def test_launch_refused_above_max_usd_per_hour(tmp_path, run_env) -> None:
    profile = tmp_path / "pricey.yaml"
    profile.write_text(
        "name: pricey\nprovider: local\ninstance_type: p3.2xlarge\n"
        "data:\n  synthetic: {size: 100KB}\nbudget:\n  max_usd_per_hour: 1.0\n"
    )
    result = sentitop("run", str(profile), "--json", env=run_env, timeout=60)
    assert result.returncode == 2  # the profile's own budget refuses it, as a bad profile
    assert "budget exceeded: profile 'pricey' costs $" in result.stderr
    assert "max_usd_per_hour" in result.stderr and result.stdout == ""
    assert not (tmp_path / "runs").exists()  # refused before a run folder (or the data)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.h5"))


CHECKPOINT_KEPT = (
    r"stopped by the user; checkpoint (in epoch \d+ at step [\d,]+ \([^)]+\)|after epoch \d+) "
    "kept: "
    "resume continues from it"
)


@pytest.mark.parametrize(
    ("signals", "code", "reason"),
    [
        ((signal.SIGINT,), 130, CHECKPOINT_KEPT),  # one Ctrl-C: a checkpoint first
        ((signal.SIGINT, signal.SIGINT), 130, re.escape("interrupted by the user (Ctrl-C)")),
        ((signal.SIGTERM,), 143, "terminated by SIGTERM"),  # a supervisor's kill: at once
        ((signal.SIGHUP,), 129, "terminated by SIGHUP"),  # the terminal closed
    ],
    ids=["ctrl-c", "ctrl-c-twice", "sigterm", "sighup"],
)
def test_a_stop_signal_during_training_tears_down(
    write_profile, run_env, tmp_path, signals: tuple[int, ...], code: int, reason: str
) -> None:
    """One Ctrl-C stops after a checkpoint (the dashboard's stop; it cancelled at once and lost
    the steps since the last periodic one), a second stops at once; termination signals at once."""
    profile = write_profile(nproc=2, epochs=50)
    slow = "  batch: 16\n  balance: {emulate_s: 0.25}\n"  # sleep-based device time: 2 s a step
    profile.write_text(profile.read_text().replace("  batch: 64\n", slow))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "run", str(profile), "--json"],
        env=run_env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    runs = tmp_path / "runs"
    deadline = time.time() + 180
    events = None
    while time.time() < deadline:
        dirs = list(runs.glob("*/events.jsonl")) if runs.exists() else []
        if dirs and '"type":"step"' in dirs[0].read_text():
            events = dirs[0]
            break
        time.sleep(0.5)
    assert events is not None, "training never started"
    for sig in signals:  # both land before the step the checkpoint waits for ends
        os.kill(proc.pid, sig)
        time.sleep(0.5)  # two signals sent back to back would merge into one
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    summary = json.loads((events.parent / "summary.json").read_text())
    assert summary["status"] == "interrupted" and re.fullmatch(reason, summary["reason"]), summary
    if signals[0] == signal.SIGINT:  # what the press does is said when it is pressed
        assert "rank 0 first writes a checkpoint at its next step" in err
        assert ("stopping at once" in err) == (len(signals) == 2)
    else:
        assert "stopping" not in err
    if signals != (signal.SIGINT,):  # stopped at once: no summary, but where it is (SIGTERM
        assert f"run folder: {events.parent}" in err  # named none)
    assert "Traceback" not in err
    assert '"type":"run_end"' in events.read_text()
    left = subprocess.run(["pgrep", "-f", f"{events.parent.name}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", f"processes left running: {left.stdout}"

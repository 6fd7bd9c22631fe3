"""A re-run into an existing output folder replaces its files as a set: old, new, never mixed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.config import PreprocessConfig
from engine.errors import InputError
from engine.preprocess import output_folder, run_preprocess
from engine.preprocess import pipeline as pipeline_mod

from .conftest import review, write_lines

ROOT = Path(__file__).resolve().parents[2]
SET = ["dataset.h5", "stats.json", "vocab.json"]
OldSet = tuple[Path, dict[str, bytes]]


def _input(tmp_path: Path, n: int, name: str = "in.jsonl") -> Path:
    lines = [review(f"review {i} word{i % 97} sound {i % 13}", 5 if i % 3 else 1) for i in range(n)]
    return write_lines(tmp_path / name, lines)


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def _beside(out: Path) -> list[str]:
    """Entries the runs left next to the output folder (stage folders)."""
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


@pytest.fixture
def old_set(tmp_path: Path) -> OldSet:
    """A complete earlier output, made from another input than the re-runs use."""
    out = tmp_path / "out"
    run_preprocess(PreprocessConfig(inputs=[str(_input(tmp_path, 50, "old.jsonl"))],
                                    output=str(out), workers=1))  # fmt: skip
    assert sorted(p.name for p in out.iterdir()) == SET
    return out, _snapshot(out)


@pytest.mark.parametrize("late_step", ["publish_dataset", "swap_in", "check_preprocess"])
def test_a_rerun_failing_late_leaves_the_old_complete_set(
    tmp_path: Path, old_set: OldSet, monkeypatch: pytest.MonkeyPatch, late_step: str
) -> None:
    """It removed the old dataset.h5 first: a failed re-run left stats.json and vocab.json of the
    previous run next to no dataset."""
    out, before = old_set

    def crash(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(pipeline_mod, late_step, crash)
    cfg = PreprocessConfig(inputs=[str(_input(tmp_path, 80))], output=str(out), workers=1)
    with pytest.raises(Exception, match="disk full"):
        run_preprocess(cfg)
    assert _snapshot(out) == before
    assert _beside(out) == []


def test_a_failed_first_run_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline_mod, "publish_dataset", crash)
    out = tmp_path / "new"
    with pytest.raises(KeyboardInterrupt):
        run_preprocess(PreprocessConfig(inputs=[str(_input(tmp_path, 40))], output=str(out)))
    assert not out.exists() and _beside(out) == []


@pytest.mark.parametrize("exchange", [True, False])
def test_a_rerun_replaces_the_whole_set(
    tmp_path: Path, old_set: OldSet, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    """With renameat2's exchange, and with the two-rename fallback."""
    out, before = old_set
    if not exchange:
        monkeypatch.setattr(output_folder, "_exchange", lambda a, b: False)
    out.chmod(0o750)
    stats = run_preprocess(PreprocessConfig(inputs=[str(_input(tmp_path, 80))], output=str(out)))
    after = _snapshot(out)
    assert sorted(after) == SET and after != before
    assert json.loads(after["stats.json"]) == stats and stats["read"] == 80
    assert (out.stat().st_mode & 0o777) == 0o750 and _beside(out) == []


def test_a_swap_cut_between_its_renames_is_put_back(tmp_path: Path, old_set: OldSet) -> None:
    out, before = old_set
    dead = subprocess.Popen(["true"])
    dead.wait()
    aside = out.parent / f".{out.name}.preprocess-old-{dead.pid}"
    out.rename(aside)  # the previous set waits here; the new one never arrived
    stale = out.parent / f".{out.name}.preprocess-new-{dead.pid}"
    stale.mkdir()
    stage = output_folder.make_stage(out)
    assert _snapshot(out) == before and not aside.exists() and not stale.exists()
    stage.rmdir()


def test_an_output_folder_holding_other_files_is_refused_before_any_work(
    tmp_path: Path, old_set: OldSet
) -> None:
    """The folder is replaced as a whole: someone's file in it would go with it."""
    out, before = old_set
    (out / "notes.txt").write_text("mine")
    cfg = PreprocessConfig(inputs=[str(_input(tmp_path, 40))], output=str(out))
    with pytest.raises(InputError) as caught:
        run_preprocess(cfg)
    assert caught.value.message.startswith(f"--output {out} holds files that are not a dataset's")
    assert "notes.txt" in caught.value.message
    assert _snapshot(out) == {**before, "notes.txt": b"mine"} and _beside(out) == []


WRAPPER = """
import sys, time
import engine.preprocess.pipeline as pipeline
from engine.preprocess.cli import main

point = sys.argv[1]
real = getattr(pipeline, point)

def paused(*args, **kwargs):
    print("PAUSED", flush=True)  # the test sends SIGINT now
    time.sleep(60)
    return real(*args, **kwargs)

setattr(pipeline, point, paused)
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("point", ["_run_runner", "swap_in"])
def test_ctrl_c_during_a_rerun_leaves_the_old_complete_set(
    tmp_path: Path, old_set: OldSet, point: str
) -> None:
    """SIGINT to the process group of the preprocess command (a terminal's Ctrl-C) as the
    runner starts, or when the new set is complete beside the old one: exit 130, the previous
    set byte for byte, no stage folder left."""
    out, before = old_set
    src = _input(tmp_path, 2000, "new.jsonl")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", WRAPPER, point, "-i", str(src), "-o", str(out), "--workers",
            "2", "--json"]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "PAUSED\n"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.strip() == "interrupted"
    assert _snapshot(out) == before
    assert _beside(out) == []


FORK_WRAPPER = """
import os, signal, sys
from engine.preprocess.cli import main

def ctrl_c_at_first_fork():  # what a terminal's Ctrl-C does if it lands while a worker forks
    if not os.path.exists(sys.argv[1]):
        open(sys.argv[1], "w").close()
        os.kill(os.getpid(), signal.SIGINT)

os.register_at_fork(before=ctrl_c_at_first_fork)
sys.exit(main(sys.argv[2:]))
"""


def test_ctrl_c_while_forking_the_workers_is_not_lost(tmp_path: Path) -> None:
    """A KeyboardInterrupt raised in an at-fork hook is printed and ignored by Python: the run
    used to go on and write its output. The runner holds the signal over its forks and raises
    it after: exit 130, no output, no traceback."""
    out, fired = tmp_path / "out", tmp_path / "fired"
    src = _input(tmp_path, 70_000)  # > 4 MB: split in several ranges, so workers are forked
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", FORK_WRAPPER, str(fired), "-i", str(src), "-o", str(out),
            "--workers", "2", "--json"]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert fired.exists()  # the hook ran: the runner forked a worker
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "interrupted", done.stderr
    assert not out.exists()
    assert _beside(out) == []


WORKER_WRAPPER = """
import os, sys, time
import engine.preprocess.pool_worker as pool_worker
from engine.preprocess.cli import main

real = pool_worker.Worker.map

def map_slowly(self, tasks, report):
    if self.wid == 1:  # a forked worker: the test sends SIGINT now
        print(f"PAUSED {os.getpid()}", flush=True)
        time.sleep(60)
    return real(self, tasks, report)

pool_worker.Worker.map = map_slowly
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("target", ["group", "worker"])
def test_ctrl_c_while_a_forked_worker_maps_is_said_once(tmp_path: Path, target: str) -> None:
    """SIGINT to the process group (a terminal's Ctrl-C) or to one forked worker alone while it
    maps: exit 130, "interrupted" and nothing else on stderr (each worker printed a
    KeyboardInterrupt traceback), no output and no stage folder left."""
    out = tmp_path / "out"
    src = _input(tmp_path, 70_000)  # > 4 MB: split in several ranges, so workers are forked
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", WORKER_WRAPPER, "-i", str(src), "-o", str(out), "--workers",
            "2", "--json"]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        said, _, pid = proc.stdout.readline().partition(" ")
        assert said == "PAUSED"
        if target == "group":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(int(pid), signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert err.strip() == "interrupted", err
    assert not out.exists()
    assert _beside(out) == []


def test_an_output_under_a_file_names_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "reviews.jsonl"
    blocker.write_text("{}\n")
    for out in (blocker / "sub", blocker / "a" / "b"):
        cfg = PreprocessConfig(inputs=[str(_input(tmp_path, 40))], output=str(out))
        with pytest.raises(InputError) as caught:
            run_preprocess(cfg)
        assert caught.value.message.endswith(f"{blocker} is a file, not a folder")
    assert blocker.read_text() == "{}\n"

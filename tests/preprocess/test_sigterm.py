"""SIGTERM stops a preprocess run as Ctrl-C does: no forked worker left running, no stage folder,
the previous output as it was, "terminated (SIGTERM)" and exit 143."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.config import PreprocessConfig
from engine.preprocess import run_preprocess
from tests.stall import ROOT, stalled_sentitop

from .conftest import review, write_lines

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

OldSet = tuple[Path, dict[str, bytes]]


def _input(tmp_path: Path, n: int, name: str) -> Path:
    lines = [review(f"review {i} word{i % 97} sound {i % 13}", 5 if i % 3 else 1) for i in range(n)]
    return write_lines(tmp_path / name, lines)


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def _beside(out: Path) -> list[str]:
    """Entries the runs left next to the output folder (stage folders)."""
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def _children(pid: int) -> dict[int, str]:
    """pid → start time of every child process of ``pid``."""
    found = {}
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields and int(fields[1]) == pid:
            found[int(entry.name)] = fields[19]
    return found


def _running(pid: int, started: str) -> bool:
    """True while the process ``pid`` that started at ``started`` runs (a zombie has ended)."""
    fields = _stat(pid)
    return fields is not None and fields[19] == started and fields[0] not in ("Z", "X")


def _wait_for(ready: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"never ready to be signalled (exit {proc.poll()})")
        time.sleep(0.02)


def _stop(argv: list[str], marker: Path, whom: str) -> tuple[int, str, list[int]]:
    """Run ``argv`` in a session of its own; once ``marker`` exists and the run has forked its
    worker, SIGTERM the command, its process group, or the worker (pid in ``marker``). Returns
    (exit code, stderr, workers still running once the command exited)."""
    errors = marker.with_name("stderr")
    with errors.open("w") as err:  # a file: a worker left running keeps no pipe open
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)  # fmt: skip
    try:
        _wait_for(lambda: marker.exists() and bool(_children(proc.pid)), proc)
        workers = _children(proc.pid)
        if whom == "group":
            os.killpg(proc.pid, signal.SIGTERM)
        elif whom == "worker":
            os.kill(int(marker.read_text()), signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        left = [pid for pid, started in workers.items() if _running(pid, started)]
    finally:
        with contextlib.suppress(ProcessLookupError):  # anything of the run still there
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    return proc.returncode, errors.read_text(), left


@pytest.fixture
def old_set(tmp_path: Path) -> OldSet:
    """A complete earlier output, made from another input than the stopped run uses."""
    out = tmp_path / "out"
    src = _input(tmp_path, 50, "old.jsonl")
    run_preprocess(PreprocessConfig(inputs=[str(src)], output=str(out), workers=1))
    return out, _snapshot(out)


@pytest.mark.parametrize(
    ("phase", "whom"),
    [("map", "command"), ("map", "group"), ("shuffle", "command"), ("reduce", "group")],
)
def test_sigterm_stops_every_worker_and_keeps_the_previous_set(
    tmp_path: Path, old_set: OldSet, phase: str, whom: str
) -> None:
    """SIGTERM to the command (a supervisor, `kill PID`) or to its process group while every
    process of the run waits in its first call of the phase's method. It used to kill the
    parent alone: the forked worker went on, then waited at a barrier for ever (or failed
    when the next run removed the stage folder), and the stage folder stayed."""
    out, before = old_set
    src = _input(tmp_path, 70_000, "new.jsonl")  # > 4 MB: several ranges, so a worker is forked
    marker = tmp_path / "stalled"
    argv = ["preprocess", "-i", str(src), "-o", str(out), "--workers", "2", "--json"]
    target = f"engine.preprocess.pool_worker:Worker.{phase}"
    code, err, left = _stop(stalled_sentitop(target, marker, "block", argv), marker, whom)
    assert left == []
    assert code == 143, err
    assert err.strip() == "terminated (SIGTERM)"
    assert _snapshot(out) == before
    assert _beside(out) == []


WORKER_STALL = """
import os, sys, time
from pathlib import Path
import engine.preprocess.pool_worker as pool_worker
from tui.cli.main import main

real = pool_worker.Worker.map

def map_later(self, tasks, report):
    if self.wid == 1:  # the forked worker: the test sends it SIGTERM now
        ready = Path(sys.argv[1] + ".tmp")
        ready.write_text(str(os.getpid()))
        ready.replace(sys.argv[1])  # whole, or not there yet
        time.sleep(60)
    return real(self, tasks, report)

pool_worker.Worker.map = map_later
sys.exit(main(sys.argv[2:]))
"""


def test_sigterm_to_a_forked_worker_alone_stops_the_run(tmp_path: Path) -> None:
    """The worker says so and leaves; the parent stops the run as for SIGTERM to itself."""
    out, marker = tmp_path / "out", tmp_path / "worker-pid"
    src = _input(tmp_path, 70_000, "in.jsonl")
    argv = [sys.executable, "-c", WORKER_STALL, str(marker), "preprocess", "-i", str(src),
            "-o", str(out), "--workers", "2", "--json"]  # fmt: skip
    code, err, left = _stop(argv, marker, "worker")
    assert left == []
    assert code == 143, err
    assert err.strip() == "terminated (SIGTERM)"
    assert not out.exists()
    assert _beside(out) == []

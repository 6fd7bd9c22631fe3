"""How a rank process ends: exit codes survive skipping finalization; native crashes show stacks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_exit_rank_flushes_output_and_keeps_the_code_but_skips_atexit() -> None:
    done = _python("""
        import atexit, sys
        from engine.rank_main import exit_rank
        atexit.register(lambda: print("finalized"))
        sys.stdout.write("last event")  # no newline: only an explicit flush gets it out
        sys.stderr.write("last log line")
        exit_rank(3)
    """)
    assert done.returncode == 3
    assert done.stdout == "last event"  # written, and nothing ran at finalization
    assert done.stderr == "last log line"


def test_a_native_crash_in_a_rank_prints_the_python_stack() -> None:
    done = _python("""
        import os
        from engine.events import Emitter
        from engine.rank_main import run_as_rank

        def load_the_shard():
            os.abort()  # what a C++ std::terminate in a library looks like from Python

        run_as_rank(load_the_shard, Emitter())
    """)
    assert done.returncode < 0  # killed by SIGABRT, not a Python exception
    assert "Fatal Python error: Aborted" in done.stderr
    assert "load_the_shard" in done.stderr  # the launcher shows these lines as the rank's tail


def test_run_as_rank_returns_the_code_of_a_failed_rank() -> None:
    done = _python("""
        from engine.errors import ConfigError
        from engine.events import Emitter, StreamSink
        from engine.rank_main import exit_rank, run_as_rank

        def work():
            raise ConfigError("batch_size = 0 must be >= 1")

        exit_rank(run_as_rank(work, Emitter(StreamSink())))
    """)
    assert done.returncode == 2
    assert "batch_size = 0 must be >= 1" in done.stderr
    assert '"type":"error"' in done.stdout.replace(" ", "")


@pytest.mark.parametrize("lost", [True, False])
def test_a_rank_whose_peer_went_away_says_one_line_not_its_stack(lost: bool) -> None:
    """A survivor of another node's loss fails in gloo with 'Connection reset by peer': its
    stack says nothing about the cause, so stderr (shown per node over SSH) gets one line; the
    `error` event keeps the tail. Any other exception still prints its traceback."""
    reason = "Connection reset by peer" if lost else "index out of range"
    done = _python(f"""
        from engine.events import Emitter, StreamSink
        from engine.rank_main import exit_rank, run_as_rank

        def train_step():
            raise RuntimeError("[pair.cc:537] Read error [127.0.0.1]:6066: {reason}. GLHF!")

        exit_rank(run_as_rank(train_step, Emitter(StreamSink())))
    """)
    assert done.returncode == 1
    assert ("Traceback" in done.stderr) is not lost
    assert ("train_step" in done.stderr) is not lost
    if lost:
        assert done.stderr.strip().splitlines() == [
            "lost the connection to another rank (the cause is the rank or node that failed "
            "first): RuntimeError: [pair.cc:537] Read error [127.0.0.1]:6066: Connection reset "
            "by peer. GLHF!"
        ]
    assert "train_step" in done.stdout  # the error event's tail, for the run folder's log


def _launch(mode: str) -> list[tuple[int, str, str]]:
    from engine.launch import launch_ranks

    lines: list[tuple[int, str, str]] = []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    launch_ranks(
        "tests.train.crashing_rank", [mode], 2, threads=1,
        on_line=lambda rank, stream, line: lines.append((rank, stream, line)), env=env,
    )  # fmt: skip
    return lines


@pytest.mark.slow
def test_a_rank_that_crashes_after_finishing_its_work_is_a_warning_not_a_failed_run() -> None:
    lines = _launch("after")
    ends = [rank for rank, stream, line in lines if line.startswith('{"type":"rank_end"')]
    assert sorted(ends) == [0, 1]
    warnings = [line for rank, _, line in lines if "while tearing down" in line]
    assert warnings == [
        "launch: warning: rank 1 killed by SIGABRT while tearing down, after it finished its "
        "work; its results are complete"
    ]
    assert any("Fatal Python error: Aborted" in line for rank, _, line in lines if rank == 1)


@pytest.mark.slow
def test_a_rank_that_crashes_before_finishing_fails_the_launch() -> None:
    from engine.errors import LaunchError

    with pytest.raises(LaunchError, match=r"rank 1 .* killed by SIGABRT") as failed:
        _launch("before")
    assert failed.value.hint is not None and "Fatal Python error: Aborted" in failed.value.hint


@pytest.mark.slow
def test_the_crashed_rank_is_blamed_even_when_a_peer_exits_first() -> None:
    from engine.errors import LaunchError

    with pytest.raises(LaunchError, match=r"rank 1 .* killed by SIGABRT") as failed:
        _launch("late")
    assert failed.value.hint is not None and "Fatal Python error: Aborted" in failed.value.hint


@pytest.mark.slow
def test_ranks_that_finish_cleanly_report_rank_end_and_no_warning() -> None:
    lines = _launch("never")
    assert sorted(r for r, _, line in lines if line.startswith('{"type":"rank_end"')) == [0, 1]
    assert not [line for _, _, line in lines if "warning" in line]

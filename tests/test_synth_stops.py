"""`synth` stopped by Ctrl-C or SIGTERM: exit 130 / 143 with nothing left behind, also when Python
drops the KeyboardInterrupt (raised inside a weakref callback, where Python only prints
"Exception ignored": that traceback is not shown either)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.synth.dataset import write_synthetic_dataset
from tests.stall import DROPPED, signal_when, stage_written, stalled_sentitop

WORDS = {signal.SIGINT: "interrupted (Ctrl-C)", signal.SIGTERM: "terminated (SIGTERM)"}


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _assert_stopped(done: subprocess.CompletedProcess[str], signum: int) -> None:
    assert done.returncode == 128 + signum, done.stderr
    assert f"{WORDS[signum]}: no partial output was left behind" in done.stderr
    assert "wrote" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize("name", ["huge.jsonl", "huge.jsonl.gz"])
def test_ctrl_c_stops_a_review_file_with_exit_130(tmp_path: Path, name: str) -> None:
    """`synth … && preprocess …` must stop at an interrupted synth."""

    def writing() -> bool:
        partial = list(tmp_path.glob(f".{name}.*.partial"))
        return bool(partial) and partial[0].stat().st_size > 0

    cmd = [sys.executable, "-m", "tui.cli", "synth", "-o", name, "--size", "2GB", "--json"]
    done = signal_when(cmd, writing, signal.SIGINT, cwd=tmp_path)
    _assert_stopped(done, signal.SIGINT)
    assert _leftovers(tmp_path) == []


def test_a_dropped_ctrl_c_still_stops_a_review_file(tmp_path: Path) -> None:
    """Dropped after the last block, it went on: the file was put in place and exit 0."""
    marker = tmp_path / "stalled"
    argv = ["synth", "-o", str(tmp_path / "r.jsonl"), "--size", "2MB", "--json"]
    cmd = stalled_sentitop("engine.synth.generate:_Sink.close", marker, "drop", argv)
    done = signal_when(cmd, marker.exists, signal.SIGINT)
    assert DROPPED in done.stderr  # the stall did drop it
    assert "Exception ignored" not in done.stderr  # Python's traceback of it is not shown
    _assert_stopped(done, signal.SIGINT)
    assert _leftovers(tmp_path) == ["stalled"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_dropped_stop_still_stops_a_dataset(tmp_path: Path, signum: int) -> None:
    """Dropped in h5py's finalisation (`--reviews 30M` did so), the dataset was published and
    `wrote DIR: 27,000,000 train + 3,000,000 test rows` printed with exit 0."""
    marker = tmp_path / "stalled"
    argv = ["synth", "--dataset", str(tmp_path / "ds"), "--reviews", "1000", "--json"]
    cmd = stalled_sentitop("h5py:File.close", marker, "drop", argv)
    done = signal_when(cmd, marker.exists, signum)
    assert DROPPED in done.stderr and "Exception ignored" not in done.stderr
    _assert_stopped(done, signum)
    assert _leftovers(tmp_path) == ["stalled"]


def test_ctrl_c_stops_a_dataset_with_exit_130(tmp_path: Path) -> None:
    out = tmp_path / "new" / "ds"
    cmd = [sys.executable, "-m", "tui.cli", "synth", "--dataset", str(out), "--reviews", "2M"]
    done = signal_when([*cmd, "--json"], lambda: stage_written(out), signal.SIGINT)
    _assert_stopped(done, signal.SIGINT)
    assert _leftovers(tmp_path) == []


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("point", ["publish_dataset", "swap_in"])
def test_a_stop_before_the_swap_keeps_the_previous_dataset(tmp_path: Path, point: str) -> None:
    """Re-writing a dataset folder removed the old dataset.h5 first: a stop before the new one
    was published lost the old set. The new set is now built beside it and swapped in whole."""
    out = tmp_path / "ds"
    write_synthetic_dataset(out, 30, 10, seq_len=5, vocab_size=20)
    before = _contents(out)
    marker = tmp_path / "stalled"
    argv = ["synth", "--dataset", str(out), "--reviews", "1000", "--json"]
    cmd = stalled_sentitop(f"engine.synth.dataset:{point}", marker, "block", argv)
    done = signal_when(cmd, marker.exists, signal.SIGTERM)
    _assert_stopped(done, signal.SIGTERM)
    assert _contents(out) == before
    assert _leftovers(tmp_path) == ["ds", "stalled"]

"""A disk that fills while dataset.h5 is written (preprocess, synth --dataset): exit 1 with one
clear line, never a crashed interpreter (exit 139: HDF5 flushed the failed file again as the
error was released and at exit) or a traceback."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARE = 0.7
"""The file-size limit (RLIMIT_FSIZE) the command runs under, as a share of the dataset.h5 the
same command writes without it: the parts fit, dataset.h5 does not. Past it a write fails with
EFBIG, as a full disk fails with ENOSPC (Python ignores SIGXFSZ)."""


def _limit(nbytes: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))


@pytest.mark.parametrize(
    ("workers", "budget", "share"),
    [(1, None, SHARE), (2, None, SHARE), (2, "1MiB", 0.36)],
    ids=["1", "2", "2-spilling-part"],
)
def test_a_write_past_the_disk_is_exit_1_with_one_line(
    tmp_path: Path, workers: int, budget: str | None, share: float
) -> None:
    """(With a budget the workers append their parts bucket by bucket, and the limit is set
    below a part's size: the append fails, not dataset.h5.)"""
    src = tmp_path / "reviews.json"
    made = [sys.executable, "-m", "tui.cli", "synth", "--output", str(src), "--size", "12MB",
            "--distinct", "0.9"]  # fmt: skip
    subprocess.run(made, cwd=ROOT, check=True, capture_output=True, timeout=120)
    whole = tmp_path / "whole"
    argv = [sys.executable, "-m", "tui.cli", "preprocess", "--input", str(src), "--workers",
            str(workers), "--seq-len", "256", "--output"]  # fmt: skip
    if budget:  # the spill path: parts appended bucket by bucket (PartWriter)
        argv[-1:-1] = ["--memory-budget", budget]
    subprocess.run([*argv, str(whole)], cwd=ROOT, check=True, capture_output=True, timeout=300)
    size = (whole / "dataset.h5").stat().st_size
    shutil.rmtree(whole)
    out = tmp_path / "out"
    done = subprocess.run(
        [*argv, str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
        preexec_fn=_limit(int(size * share)),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert "disk problem:" in done.stderr and "Traceback" not in done.stderr
    assert "Exception ignored" not in done.stderr and "Process preprocess-" not in done.stderr
    assert not out.exists()  # nothing taken as done
    assert [p.name for p in tmp_path.iterdir()] == ["reviews.json"]  # no temporary folder left


def test_synth_dataset_past_the_disk_is_exit_1_with_one_line(tmp_path: Path) -> None:
    """`synth --dataset` wrote dataset.h5 the same way: a traceback, then exit 139."""
    out = tmp_path / "data"
    argv = [sys.executable, "-m", "tui.cli", "synth", "--dataset", str(out), "--reviews", "200k"]
    done = subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=_limit(5 << 20)
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.startswith("disk problem: writing the dataset beside")
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # no folder, no stage left

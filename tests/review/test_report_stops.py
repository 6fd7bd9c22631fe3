"""`report` stopped by Ctrl-C or SIGTERM: exit 130 / 143 with a message, and no report that looks
complete: an earlier report in the folder stays byte for byte, a new folder is removed."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from remote.review.report import PLOTS
from tests.stall import DROPPED, signal_when, stalled_sentitop

OLD_FILES = {
    "report.md": b"# the earlier report\n",
    **{n: b"old " + n.encode() for n in PLOTS.values()},
}
"""An earlier complete report (fake bytes are enough: they must come back unchanged)."""


def _stopped_report(
    tmp_path: Path, out: Path, stall: str, mode: str, signum: int
) -> subprocess.CompletedProcess[str]:
    """`sentitop report a -o OUT` with plots.STALL stalled (tests.stall, MODE); ``signum`` is sent
    once the stall is reached."""
    marker = tmp_path / "stalled"
    argv = ["report", "a", "--runs-dir", str(tmp_path / "runs"), "-o", str(out)]
    cmd = stalled_sentitop(f"remote.review.plots:{stall}", marker, mode, argv)
    return signal_when(cmd, marker.exists, signum)


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.mark.parametrize(
    ("signum", "words"),
    [(signal.SIGINT, "interrupted (Ctrl-C)"), (signal.SIGTERM, "terminated (SIGTERM)")],
)
def test_a_stopped_rerun_leaves_the_earlier_report_whole(
    make_run: Callable[..., Path], tmp_path: Path, signum: int, words: str
) -> None:
    """Stopped while plotting, it left report.md byte-identical to a finished one beside two
    PNGs (a third truncated) and exited 0, or on SIGTERM without a word."""
    make_run("a", nproc=1, epoch_s=[5.0, 5.0], sync_s=0.1)
    out = tmp_path / "out"
    out.mkdir()
    for name, data in OLD_FILES.items():
        (out / name).write_bytes(data)
    done = _stopped_report(tmp_path, out, "loss_plot", "block", signum)
    assert done.returncode == 128 + signum, done.stderr
    assert _contents(out) == OLD_FILES  # and no stage folder is left
    assert f"{words}: no partial report was left in {out}" in done.stderr
    assert "Traceback" not in done.stderr and "report:" not in done.stdout


def test_a_stop_python_drops_still_stops_the_report(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    """A Ctrl-C landing in a weakref callback (matplotlib's finalisation) was only printed as
    "Exception ignored", and the report was written and exit 0."""
    make_run("a", nproc=1, epoch_s=[5.0, 5.0], sync_s=0.1)
    out = tmp_path / "new" / "out"
    done = _stopped_report(tmp_path, out, "pareto_plot", "drop", signal.SIGINT)
    assert DROPPED in done.stderr  # the stall did drop it
    assert "Exception ignored" not in done.stderr  # Python's traceback of it is not shown
    assert done.returncode == 130, done.stderr
    assert "interrupted (Ctrl-C): no partial report" in done.stderr
    assert not (tmp_path / "new").exists()  # the folders it created are gone again


def test_a_finished_report_replaces_the_earlier_one_and_leaves_no_stage(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    from tui.cli import main

    make_run("a", nproc=1, epoch_s=[5.0, 5.0], sync_s=0.1)
    out = tmp_path / "out"
    out.mkdir()
    for name, data in OLD_FILES.items():
        (out / name).write_bytes(data)
    (out / ".report-new-999999999").mkdir()  # a killed run's stage (no such process)
    (out / "notes.txt").write_text("mine")
    assert main(["report", "a", "--runs-dir", str(tmp_path / "runs"), "-o", str(out)]) == 0
    files = _contents(out)
    assert sorted(files) == sorted([*OLD_FILES, "notes.txt"])
    assert files["notes.txt"] == b"mine"
    assert files["report.md"].startswith(b"# Cost / speed review")
    assert all(files[n].startswith(b"\x89PNG") for n in PLOTS.values())

"""`sentitop synth`: an output that is no regular file is left alone; negative sizes and counts
are called negative, not unreadable."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tui.cli import main


def test_a_pipe_or_device_output_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`synth -o /dev/null` renamed its file over /dev/null (as root: the device was gone)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    rc = main(["synth", "-o", str(fifo), "--size", "10KB", "--json"])
    captured = capsys.readouterr()
    assert rc == 2 and captured.out == ""
    assert "is not a regular file (a device, pipe or socket)" in captured.err
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary file left


def test_a_file_where_the_output_folder_should_be_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`synth -o afile/x.jsonl` with afile a regular file said "folder 'afile' does not
    exist"; a folder truly missing is still called missing."""
    (tmp_path / "afile").write_text("")
    for below in ("x.jsonl", "sub/x.jsonl"):
        assert main(["synth", "-o", str(tmp_path / "afile" / below), "--size", "10KB"]) == 2
        assert (
            f"--output: '{tmp_path / 'afile'}' is a file, not a folder" in capsys.readouterr().err
        )
    assert main(["synth", "-o", str(tmp_path / "none" / "x.jsonl"), "--size", "10KB"]) == 2
    assert f"folder '{tmp_path / 'none'}' does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-o", "x.jsonl", "--size=-5KB"], "--size: size must be positive, got '-5KB'"),
        (["-o", "x.jsonl", "--size", "-5KB"], "--size: size must be positive, got '-5KB'"),
        (["--dataset", "ds", "--reviews", "-3k"], "--reviews: must be positive, got '-3k'"),
        (["--dataset", "ds", "--reviews=-3"], "--reviews: must be positive, got '-3'"),
        (["--dataset", "ds", "--reviews", "1e3"], "cannot read '1e3' as a whole number"),
    ],
)
def test_negative_sizes_and_counts_are_called_negative(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ "-3" was "cannot read '-3' as a size" (and a count was called a size)."""
    monkeypatch.chdir(tmp_path)
    assert main(["synth", *argv]) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_partial_files_of_dead_runs_are_removed_and_a_live_ones_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`synth` killed with SIGKILL left its hidden .NAME.PID-N.partial (250 MB there), and the
    next run into the same name left it too (and said no partial output was left behind)."""
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = tmp_path / f".s.json.{int(gone.stdout)}-0.partial"
    live = tmp_path / f".s.json.{os.getpid()}-0.partial"  # this process: still writing
    other = tmp_path / f".t.json.{int(gone.stdout)}-0.partial"  # another target's: not ours
    for path in (dead, live, other):
        path.write_bytes(b"x" * 1000)
    assert main(["synth", "-o", str(tmp_path / "s.json"), "--size", "10KB", "--json"]) == 0
    capsys.readouterr()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["s.json", live.name, other.name])


def test_the_dataset_line_is_one_line_however_long(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rich wrapped it at the console's width, inside a number: "in 9.127\\ns" (trial L)."""
    out = tmp_path / ("a-long-folder-name-" * 4) / "dataset"
    argv = ["synth", "--dataset", str(out), "--reviews", "2000", "--seq-len", "8"]
    assert main([*argv, "--vocab-size", "100"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("wrote")]
    assert len(lines) == 1 and lines[0].endswith(" s")  # (on stderr, beside the progress)
    assert len(lines[0]) > 100  # longer than any console width it could have been cut at

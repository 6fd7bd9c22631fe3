"""`sentitop sweep`: folders that cannot be used are refused before any run starts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.review.conftest import TINY
from tui.cli import main


@pytest.mark.parametrize("flag", ["--runs-dir", "--report"])
def test_a_file_where_a_folder_goes_is_refused_first(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    other = "--report" if flag == "--runs-dir" else "--runs-dir"
    start = time.monotonic()
    args = ["sweep", str(TINY), "--nproc", "1", flag, str(taken), other, str(tmp_path / "x")]
    assert main(args) == 2
    assert time.monotonic() - start < 5  # refused before training anything
    assert f"{flag} {taken} is a file, not a folder" in capsys.readouterr().err
    assert taken.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_an_empty_report_folder_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where a report would land as the current folder
    with pytest.raises(SystemExit) as exc:
        main(["sweep", str(TINY), "--nproc", "1", "--runs-dir", "runs", "--report", " "])
    assert exc.value.code == 2
    assert list(tmp_path.iterdir()) == []


def test_a_worker_count_out_of_range_names_the_flag_not_the_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--nproc 1,400` said "the sweep's profile is invalid: train.nproc = 400": the profile
    was fine, the flag was not."""
    assert main(["sweep", str(TINY), "--nproc", "1,400", "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--nproc 400: out of range for" in err and "profile is invalid" not in err
    assert list(tmp_path.iterdir()) == []  # nothing ran

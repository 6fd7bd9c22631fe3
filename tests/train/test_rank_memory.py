"""Rank counts the machine cannot serve: refused up front when their imports alone need more
memory than it has, warned about when they outnumber its CPU cores."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.launch import RANK_MEMORY_FLOOR, launch_ranks, oversubscription_warning
from engine.preprocess.budget import available_memory
from tui.cli import main

TOO_MANY = 2 * available_memory() // RANK_MEMORY_FLOOR + 1


def test_launch_refuses_more_ranks_than_memory_holds() -> None:
    # a rank started would fail as LaunchError (no such module): ConfigError means none started
    with pytest.raises(ConfigError, match=rf"--nproc {TOO_MANY}: .* GB available") as caught:
        launch_ranks("engine.no_such_module", [], TOO_MANY, threads=1)
    assert "or fewer" in (caught.value.hint or "")


def test_train_refuses_them_before_writing_the_run_folder(
    tiny_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    argv = ["train", "--data", str(tiny_data), "--run-dir", str(run), "--nproc", str(TOO_MANY)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--nproc {TOO_MANY}" in err and "Traceback" not in err
    assert not run.exists()


def test_a_count_that_fits_is_not_refused() -> None:
    from engine.launch import check_rank_memory

    check_rank_memory(1)
    check_rank_memory(max(1, available_memory() // RANK_MEMORY_FLOOR))


def test_more_cpu_ranks_than_cores_are_warned_about(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    assert oversubscription_warning(1) is None
    assert oversubscription_warning(2) is None
    warning = oversubscription_warning(3)
    assert warning is not None
    assert "3 CPU ranks on 2 cores" in warning and "slower than --nproc 2" in warning


def test_train_warns_and_still_trains(
    tiny_data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0})  # the ranks still see the real set
    run = tmp_path / "run"
    argv = ["train", "--data", str(tiny_data), "--run-dir", str(run), "--epochs", "1"]
    assert main([*argv, "--nproc", "2", "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "WARNING: --nproc 2: 2 CPU ranks on 1 core;" in err
    assert (run / "summary.json").is_file()

"""A rank count whose imports alone need more memory than the machine has is refused up front."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.launch import RANK_MEMORY_FLOOR, launch_ranks
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

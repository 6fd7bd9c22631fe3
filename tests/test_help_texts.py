"""What `--help` says: values a user can type, the defaults the commands really take."""

from __future__ import annotations

import pytest

from tui.cli import main


def help_of(command: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stopped:
        main([*command, "--help"])
    assert stopped.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", ["preprocess", "train", "embed"])
def test_no_option_reads_none_as_its_default(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "--workers … None = all cores": `--workers None` is refused as no int."""
    assert "None =" not in help_of([command], capsys)


@pytest.mark.parametrize("command", ["run", "runs", "sweep", "report"])
def test_runs_dir_names_the_environment_variable_it_follows(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """They said "(default ./runs)" while $SENTITOP_RUNS_DIR is honoured."""
    assert "$SENTITOP_RUNS_DIR" in help_of([command], capsys)


def test_version_and_every_command_describes_itself(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0 and capsys.readouterr().out.startswith("sentitop ")
    assert "P(positive)" in help_of(["predict"], capsys).split("positional arguments")[0]

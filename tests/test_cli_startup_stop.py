"""A Ctrl-C while the command modules are still importing ends with a message, not a traceback."""

from __future__ import annotations

import importlib

import pytest

cli = importlib.import_module("tui.cli.main")  # the module: tui.cli's `main` is its function


def test_ctrl_c_while_the_commands_import_says_interrupted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def importing() -> None:
        raise KeyboardInterrupt  # where a real Ctrl-C at start-up lands: importing a command

    monkeypatch.setattr(cli, "build_parser", importing)
    try:
        rc = cli.main(["runs"])
    except KeyboardInterrupt:  # escaping, it would stop the whole test session
        pytest.fail("the Ctrl-C escaped sentitop's main")
    assert rc == 130
    err = capsys.readouterr().err
    assert err.strip() == "interrupted"

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


LATE_CTRL_C = """
import importlib, os, signal, sys, threading, time
cli = importlib.import_module("tui.cli.main")  # the module (tui.cli's `main` is the function)

def finished(argv=None):
    print("table printed", flush=True)  # the command is done: its status is 0
    threading.Thread(target=time.sleep, args=(1.5,)).start()  # teardown waits for it
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    return 0

cli.main = finished
cli.entry()
"""


def test_a_ctrl_c_after_the_command_finished_keeps_its_exit_status() -> None:
    """`sentitop preprocess` printed its whole summary (the output in place), then a Ctrl-C in
    the interpreter's teardown turned it into exit 130 (or a 'KeyboardInterrupt' traceback):
    a script saw a finished command as interrupted."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", LATE_CTRL_C], capture_output=True, text=True, timeout=60, check=False
    )
    assert "table printed" in done.stdout
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr

"""Drive the real `sentitop` process in tmux: send keys, read the pane like a person would."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tui.fakes import FIXTURE_RUN

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]
ROOT = Path(__file__).resolve().parents[2]


class Tmux:
    """A private tmux server (own socket) holding one session."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=check
        )

    def pane(self) -> str:
        return self("capture-pane", "-p", "-t", "app").stdout

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.pane()
            if predicate(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"pane never matched; last pane:\n{text}")

    def keys(self, *keys: str) -> None:
        self("send-keys", "-t", "app", *keys)


def test_replay_in_a_real_terminal(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE_RUN, tmp_path / "runs" / FIXTURE_RUN.name)
    exit_file = tmp_path / "exit-code"
    command = (
        f"cd {tmp_path} && env -u COLUMNS -u LINES PYTHONPATH={ROOT} {sys.executable} "
        f"-m tui replay runs/{FIXTURE_RUN.name} --speed 0; echo $? > {exit_file}"
    )
    conf = tmp_path / "tmux.conf"
    conf.write_text("set -g default-size 120x40\n")
    tmux = Tmux(f"sentitop-test-{os.getpid()}")
    tmux(
        "-f",
        str(conf),
        "new-session",
        "-d",
        "-s",
        "app",
        "-x",
        "120",
        "-y",
        "40",
        "sh",
        "-c",
        command,
    )
    try:
        tmux("set-option", "-t", "app", "remain-on-exit", "on")
        pane = tmux.wait_for(lambda p: "replay ended (ok)" in p)
        assert "run 20261121-fixture" in pane
        assert "epoch 3/3" in pane and "$0.499" in pane
        assert "load share per rank" in pane and "time per phase" in pane
        assert any("\u2800" < ch <= "\u28ff" for ch in pane), "no braille plot drawn"
        assert "gpu-a" in pane and "stopped" in pane
        assert "q Quit" in pane.replace("  ", " ")  # the footer shows the keys

        tmux.keys("?")
        tmux.wait_for(lambda p: "sentitop keys" in p)
        tmux.keys("Escape")
        tmux.wait_for(lambda p: "sentitop keys" not in p)

        tmux.keys("4")  # Runs screen reads ./runs
        pane = tmux.wait_for(lambda p: "two-t4-nodes" in p and "1 run ·" in p)
        tmux.keys("Space")
        tmux.wait_for(lambda p: "train loss of selected runs" in p and "━ 20261121-fixture" in p)

        tmux.keys("3")  # wait for the Run screen: a key sent before it shows goes to Runs
        tmux.wait_for(lambda p: "load share per rank" in p and "selected runs" not in p)
        # one burst, as a paste or a fast typist sends it: the keys after '/' go to the filter
        tmux.keys("-l", "/gpu-b")
        pane = tmux.wait_for(lambda p: "filter: gpu-b" in p)
        log_lines = [ln for ln in pane.splitlines() if "stopped terminated" in ln]
        assert log_lines and all("gpu-b" in ln for ln in log_lines)
        tmux.keys("Escape")  # a lone ESC is told from ESC+key by timing, so wait for it
        tmux.wait_for(lambda p: "filter: gpu-b" not in p)

        tmux.keys("q")
        deadline = time.monotonic() + 15
        while not exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert exit_file.read_text().strip() == "0"
    finally:
        tmux("kill-server", check=False)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_ends_the_real_dashboard_with_its_code(tmp_path: Path, signum: int) -> None:
    """A SIGINT from outside ended it with exit 0; SIGTERM killed it with the terminal left in
    the app's screen (and, live, the run's nodes up)."""
    shutil.copytree(FIXTURE_RUN, tmp_path / "runs" / FIXTURE_RUN.name)
    exit_file, pid_file = tmp_path / "exit-code", tmp_path / "pid"
    app = (  # an inner shell that writes its pid, then becomes the app
        f"echo $$ > {pid_file}; exec env -u COLUMNS -u LINES PYTHONPATH={ROOT} "
        f"{sys.executable} -m tui replay runs/{FIXTURE_RUN.name} --speed 0"
    )
    command = f"cd {tmp_path} && sh -c '{app}'; echo $? > {exit_file}"
    tmux = Tmux(f"sentitop-test-{os.getpid()}-{signum}")
    tmux("new-session", "-d", "-s", "app", "-x", "120", "-y", "40", "sh", "-c", command)
    try:
        tmux("set-option", "-t", "app", "remain-on-exit", "on")
        tmux.wait_for(lambda p: "replay ended (ok)" in p)
        os.kill(int(pid_file.read_text()), signum)  # the app itself, not the shell
        deadline = time.monotonic() + 15
        while not exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert exit_file.read_text().strip() == str(128 + signum)
        assert "replay ended" not in tmux.pane()  # it left its screen: the terminal is restored
    finally:
        tmux("kill-server", check=False)

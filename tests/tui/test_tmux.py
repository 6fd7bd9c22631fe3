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
        assert "load shares" in pane and "time per phase" in pane
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
        tmux.wait_for(lambda p: "load shares" in p and "selected runs" not in p)
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


LIVE_PROFILE = """\
name: hup-local
provider: local
data:
  synthetic: {size: 2MB, seed: 3, distinct: 0.9}
preprocess: {vocab_size: 500, seq_len: 32}
train:
  nproc: 1
  epochs: 200
  batch_size: 64
  log_every: 1
  checkpoint_every_min: 0
  checkpoint_every_steps: 0
  threads: 1
"""


@pytest.mark.timeout(300)
def test_closing_the_terminal_stops_a_live_run_and_the_dashboard_exits(tmp_path: Path) -> None:
    """`tmux kill-session` (SIGHUP) during a live run: the run was stopped, but the dashboard
    then blocked for ever writing to the gone terminal (0 % CPU, parent 1, deaf to SIGTERM).
    Now it checkpoints, stops the run and exits."""
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "hup-local.yaml").write_text(LIVE_PROFILE)
    pid_file = tmp_path / "pid"
    app = (
        f"echo $$ > {pid_file}; exec env -u COLUMNS -u LINES PYTHONPATH={ROOT} "
        f"SENTITOP_CACHE_DIR={tmp_path / 'cache'} {sys.executable} -m tui"
    )
    tmux = Tmux(f"sentitop-test-{os.getpid()}-hup")
    tmux("new-session", "-d", "-s", "app", "-x", "160", "-y", "48", "sh", "-c",
         f"cd {tmp_path} && sh -c '{app}'")  # fmt: skip
    try:
        tmux.wait_for(lambda p: "hup-local" in p and "valid" in p)
        tmux.keys("r")
        tmux.wait_for(lambda p: "● running" in p and "samples/s" in p and "— samples/s" not in p,
                      timeout=180)  # fmt: skip
        pid = int(pid_file.read_text())
    finally:
        tmux("kill-server", check=False)  # the terminal goes: SIGHUP
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.5)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        raise AssertionError("the dashboard was still there 90 s after its terminal closed")
    (run,) = (tmp_path / "runs").iterdir()
    ended = (run / "events.jsonl").read_text().splitlines()[-1]
    assert '"type":"run_end"' in ended and "checkpoint in epoch" in ended, ended


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:  # a zombie (exited, not reaped yet) is gone
            return fh.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False

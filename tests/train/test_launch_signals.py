"""A Ctrl-C that lands while the launcher forks a rank stops the launch instead of being lost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, signal, sys
from engine.launch import launch_ranks

def ctrl_c_at_first_fork():  # a terminal's Ctrl-C landing while the first rank forks
    if not os.path.exists(sys.argv[1]):
        open(sys.argv[1], "w").close()
        os.kill(os.getpid(), signal.SIGINT)

os.register_at_fork(before=ctrl_c_at_first_fork)
pids = []

def lines(rank, stream, line):
    if line.startswith("launch: rank"):
        pids.append(int(line.rsplit(" ", 1)[1]))

rank = f"import os, time; open({sys.argv[2]!r} + str(os.getpid()), 'w'); time.sleep(20)"
try:  # each rank notes its pid and sleeps 20 s: a launch that goes on would take that long
    launch_ranks("timeit", ["-n", "1", "-r", "1", rank], 2, threads=1, on_line=lines, grace_s=1.0)
except KeyboardInterrupt:
    print("INTERRUPTED", pids, flush=True)
    sys.exit(130)
print("COMPLETED", flush=True)
"""


def test_ctrl_c_while_forking_a_rank_interrupts_the_launch(tmp_path: Path) -> None:
    """Python prints and ignores a KeyboardInterrupt raised in an at-fork hook (subprocess
    runs them for a preexec_fn): the launch went on with every rank. Now the signal is held
    over the fork and raised once the rank is on the launcher's list, which stops it."""
    fired = tmp_path / "fired"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", SCRIPT, str(fired), str(tmp_path / "rank-")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert fired.exists()
    assert done.returncode == 130, done.stdout + done.stderr
    assert done.stdout == "INTERRUPTED []\n", done.stdout  # before rank 0 was announced
    assert "Exception ignored" not in done.stderr
    for noted in tmp_path.glob("rank-*"):  # a rank that got as far as starting was stopped
        pid = int(noted.name.split("-")[1])
        assert not Path(f"/proc/{pid}").exists() or "zombie" in _state(pid), pid


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0]
    except (OSError, IndexError):
        return "zombie"  # gone meanwhile

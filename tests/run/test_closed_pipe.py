"""A reader that leaves early (`sentitop ... | head`) ends the command quietly, as cat does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_closed_stdout_is_no_traceback() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "profiles", "--schema"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # gone before the first write: every write fails with EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err

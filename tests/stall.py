"""`sentitop ARGV` with one function stalled until a signal comes: the stop-signal tests' child.

    python -m tests.stall MODULE:NAME MARKER {block,drop} ARGV...

On its first call NAME (a function of MODULE, or Class.method) writes the file MARKER, then
waits up to 60 s for a signal: `block` waits in plain code, so the signal's exception leaves
the call; `drop` waits inside a weakref callback, where Python only prints "Exception ignored"
and drops the exception, as it does when a Ctrl-C lands in h5py's or matplotlib's object
finalisation; the call then goes on. The test waits for MARKER before it signals: no timing luck.
"""

from __future__ import annotations

import functools
import importlib
import subprocess
import sys
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

WAIT_S = 60.0
DROPPED = "stall: went on after the signal (its exception was dropped)"
"""What `drop` mode prints once Python dropped the signal's exception and the call went on."""
ROOT = Path(__file__).resolve().parents[1]


def stalled_sentitop(target: str, marker: Path, mode: str, argv: list[str]) -> list[str]:
    """The command line of `sentitop ARGV` with TARGET stalled (see the module's docstring)."""
    return [sys.executable, "-m", "tests.stall", target, str(marker), mode, *argv]


def signal_when(
    cmd: list[str], ready: Callable[[], bool], signum: int, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd``, send ``signum`` once ``ready()`` is true (within 60 s), let it finish."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if not ready():
        proc.kill()
        out, err = proc.communicate(timeout=60)
        raise AssertionError(f"never ready to be signalled (exit {proc.returncode}): {err}")
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


class _Finalised:
    """An object whose weakref callback runs when it is dropped."""


def stage_written(out: Path) -> bool:
    """True once a stage folder the output folder `out` is built in (beside it) holds a file."""
    try:
        return any(
            any(stage.iterdir()) for stage in out.parent.glob(f".{out.name}.preprocess-new-*")
        )
    except OSError:  # not there yet, or removed while looked at
        return False


def _wait_for_a_signal(mode: str, marker: Path) -> None:
    """MARKER is written where the wait begins: a signal sent once it exists lands in the wait
    (written before the weakref callback ran, a prompt signal was raised in plain code)."""
    if mode == "block":
        marker.write_text("stalled\n")
        time.sleep(WAIT_S)
        return

    def wait(_ref: Any) -> None:
        marker.write_text("stalled\n")
        time.sleep(WAIT_S)

    item = _Finalised()
    ref = weakref.ref(item, wait)
    del item  # the callback runs now; an exception raised in it is dropped
    del ref
    print(DROPPED, file=sys.stderr)  # reached only when it was


def _stalled(real: Callable[..., Any], marker: Path, mode: str) -> Callable[..., Any]:
    calls = 0

    @functools.wraps(real)
    def stalled(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            _wait_for_a_signal(mode, marker)
        return real(*args, **kwargs)

    return stalled


def main(argv: list[str]) -> int:
    """Patch, then run `sentitop ARGV` in this process; its exit code."""
    target, marker, mode, *rest = argv
    module_name, _, dotted = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    *path, name = dotted.split(".")
    for part in path:
        owner = getattr(owner, part)
    setattr(owner, name, _stalled(getattr(owner, name), Path(marker), mode))
    from tui.cli.main import main as sentitop

    return sentitop(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The local runner's forked worker processes: tied to the parent's life, stopped for good."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Any

PR_SET_PDEATHSIG = 1
"""Linux prctl option: the signal the kernel sends this process when its parent ends."""
STOP_GRACE_S = 5.0
"""How long stopped workers get to leave after SIGTERM before they are killed (one busy in a
long C call, or blocked on a full result pipe nobody reads any more)."""


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this forked worker when its parent ends, however it ends (even by
    SIGKILL): a worker otherwise waits for it at a barrier for ever. Exits at once when the
    parent (pid ``parent``) has already gone. No-op where prctl is unavailable."""
    try:
        prctl = ctypes.CDLL(None).prctl
    except (AttributeError, OSError, TypeError):
        return
    prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # it ended before the call above
        os._exit(1)


def stop_workers(procs: list[Any], grace_s: float = STOP_GRACE_S) -> None:
    """Stop the started worker processes and reap them: SIGTERM, then SIGKILL for any still
    there after ``grace_s``; returns once none is left."""
    started = [proc for proc in procs if proc.pid is not None]
    try:
        for proc in started:
            if proc.is_alive():
                proc.terminate()
        deadline = time.monotonic() + grace_s
        for proc in started:
            proc.join(max(0.0, deadline - time.monotonic()))
    finally:  # also when a second Ctrl-C cuts the grace short
        for proc in started:
            if proc.is_alive():
                proc.kill()
            proc.join()


def join_all(procs: list[Any]) -> None:
    """Wait for every worker process to exit."""
    for proc in procs:
        proc.join()

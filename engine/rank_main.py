"""The shared life of one distributed rank: run its work, report failures as events, tear down."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

from engine.errors import SentitopError, peer_lost
from engine.events import Emitter

TAIL_LINES = 20
"""Traceback lines carried by an `error` event."""
PEER_LOST_LINE = (
    "lost the connection to another rank (the cause is the rank or node that failed first)"
)
"""What a rank failing because a peer went away writes to stderr instead of its traceback (the
`error` event keeps the traceback's tail)."""


def run_as_rank(work: Callable[[], object], emitter: Emitter) -> int:
    """Run ``work`` on this rank and return the exit code (0 ok, 2/1 errors, 130 interrupted).

    Failures become an `error` event plus a message on stderr. On success every rank meets at
    a barrier before the process group is destroyed: a rank that tears gloo down while a peer
    still finishes its last work (rank 0 evaluates or writes the summary) can abort at exit.
    A native crash (segfault, C++ abort) dumps every thread's Python stack to stderr, which the
    launcher shows as the failed rank's last lines.
    """
    import torch.distributed as dist

    faulthandler.enable(file=sys.stderr, all_threads=True)
    try:
        work()
        if dist.is_initialized() and dist.get_world_size() > 1:
            dist.barrier()
        emitter.emit("rank_end", status="ok")  # launchers: a crash after this is only teardown
        return 0
    except SentitopError as exc:
        emitter.emit("error", message=exc.message, hint=exc.hint, title=exc.title)
        print(exc.user_message(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        emitter.emit("error", message="interrupted")
        return 130
    except Exception as exc:  # reported as an event and a traceback, then exit 1
        tail = traceback.format_exc().splitlines()[-TAIL_LINES:]
        message = f"{type(exc).__name__}: {exc}"
        emitter.emit("error", message=message, tail=tail)
        if peer_lost(message):  # a survivor of another rank's loss: its stack says nothing
            print(f"{PEER_LOST_LINE}: {message.splitlines()[0][:200]}", file=sys.stderr)
        else:
            traceback.print_exc()
        return 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        emitter.close()


def exit_rank(code: int) -> NoReturn:
    """End a rank process with ``code`` without interpreter finalization.

    By now the rank's work is done, its files closed and its process group destroyed. What
    finalization would still do is run C++ static destructors and collect leftover objects
    while library threads (gloo, OpenMP) may still be alive: rarely, that aborts a finished
    rank ("terminate called without an active exception", SIGABRT) and fails a good run.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe keeps the exit code
            stream.flush()
    os._exit(code)

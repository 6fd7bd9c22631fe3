"""Signal handlers installed for the length of a block, the earlier ones restored after it."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from types import FrameType

Handler = Callable[[int, FrameType | None], None]


@contextlib.contextmanager
def handlers_installed(signums: Iterable[int], handler: Handler) -> Iterator[bool]:
    """While inside, ``handler`` handles each of ``signums``; yields whether it was installed
    (only the main thread may set handlers: elsewhere nothing changes). A signal that was
    ignored (``nohup``, a script's background job ignoring SIGINT) stays ignored, and one whose
    handler was set outside Python is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    previous = {}
    for signum in signums:
        if signal.getsignal(signum) not in (signal.SIG_IGN, None):  # None: set outside Python
            previous[signum] = signal.signal(signum, handler)
    try:
        yield True
    finally:
        for signum, earlier in previous.items():
            signal.signal(signum, earlier)

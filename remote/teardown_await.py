"""Await teardown work to its end even when the awaiting task is cancelled (Ctrl-C)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


async def finish_despite_cancel(awaitable: Awaitable[T], what: str) -> T:
    """Await ``awaitable`` to its end even if this task is cancelled meanwhile (then re-raised).

    Used for everything that stops paid resources: a second Ctrl-C must not leave them running.
    ``what`` names the work for the one warning a cancellation prints.
    """
    task = asyncio.ensure_future(awaitable)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
            log.warning("interrupted; still %s, please wait", what)
    if cancelled:
        raise asyncio.CancelledError
    return result

"""A training that stopped making progress fails instead of billing on: no event from any rank
for ``recovery.stall_timeout`` (or 5 × the longest gap seen so far, if longer) after training
began. A rank frozen in a collective (a stuck GPU, a frozen or swapping node, a SIGSTOP) holds
every other rank in the all-reduce with no error for torch's 30-minute collective timeout, or for
ever: the run said nothing and its machines billed on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from engine.errors import LaunchError

GAP_FACTOR = 5.0
"""A run whose events come this many times further apart than ever before is stalled too."""


class StalledError(LaunchError):
    """No rank said anything for too long; every node was stopped."""


class StallWatch:
    """Fed every event of an attempt; :meth:`expired` returns once the ranks fell silent."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.last: float | None = None
        """monotonic() of the newest rank event since training began (None: not yet)."""
        self.longest = 0.0
        """The longest gap between two rank events seen so far."""
        self.said = ""
        """What the newest rank event was, for the error."""

    def restart(self) -> None:
        """A new attempt (after a recovery): nothing counts until its training begins."""
        self.last = None

    def observe(self, event: Mapping[str, Any]) -> None:
        """Take one event; only ranks' events count, from the first `train_start` on."""
        if event.get("rank") is None:
            return
        kind = event.get("type")
        if self.last is None and kind != "train_start":
            return
        now = time.monotonic()
        if self.last is not None:
            self.longest = max(self.longest, now - self.last)
        self.last = now
        where = f" {event['epoch'] + 1}" if isinstance(event.get("epoch"), int) else ""
        step = f", step {event['step']}" if isinstance(event.get("step"), int) else ""
        self.said = f"{kind} of rank {event.get('rank')}" + (
            f" (epoch{where}{step})" if where else ""
        )

    def allowed_s(self) -> float:
        """The silence that counts as a stall now."""
        return max(self.limit_s, GAP_FACTOR * self.longest)

    async def expired(self) -> str:
        """Wait until the ranks have been silent too long; why, as a sentence."""
        while True:
            await asyncio.sleep(max(0.05, min(5.0, self.limit_s / 10)))
            if self.last is None:
                continue
            silent = time.monotonic() - self.last
            if silent > self.allowed_s():
                return (
                    f"training stalled: no rank said anything for {silent:.0f} s (the last: "
                    f"{self.said}); every node was stopped so the run stops billing"
                )

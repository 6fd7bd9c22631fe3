"""Checkpoints that survive their node: fetched here after each one, pushed back to resume.

Rank 0 writes ``train/checkpoints/latest.pt`` in its node's run folder (atomically). On a
remote cluster that file vanishes with the node, so after every `checkpoint` event the keeper
copies it to ``RUN_DIR/train/checkpoints/latest.pt`` on the launcher's machine (into a
temporary name, then renamed over the old copy: a reader never sees half a file) and emits
``checkpoint_stored``. Before training restarts after a recovery, :meth:`push` puts that copy
on every node, so whichever node hosts rank 0 next resumes from it. A local cluster writes
straight into the run folder: nothing to copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.errors import LaunchError
from engine.events import Emitter
from remote.clusters import Cluster, LocalCluster
from remote.recovery import StoredCheckpoint

log = logging.getLogger(__name__)

NODE_CHECKPOINT = "train/checkpoints/latest.pt"
"""Rank 0's checkpoint, relative to its node's run folder."""
NODE_REQUEST = "train/checkpoints/REQUEST"
"""Created on rank 0's node to ask for a checkpoint at the next step."""


class CheckpointKeeper:
    """Copies each new checkpoint of rank 0 here; one copy at a time, the newest wins."""

    def __init__(
        self,
        cluster: Cluster,
        run_dir: Path,
        emitter: Emitter,
        on_stored: Callable[[StoredCheckpoint], None],
    ) -> None:
        self.cluster = cluster
        self.local = run_dir / NODE_CHECKPOINT
        self.emitter = emitter
        self.on_stored = on_stored
        self.copies = not isinstance(cluster, LocalCluster)
        """False when rank 0 writes into this run folder itself (nothing to fetch)."""
        self._wanted: tuple[str, dict[str, Any]] | None = None
        self._task: asyncio.Task[None] | None = None
        self.failures = 0
        self.last_failed_node = ""
        """The node a copy last failed from (where the newest checkpoint may be)."""
        self.node_copy = ""
        """That node's checkpoint path (its run folder's ``train/checkpoints/latest.pt``)."""
        self.stored_at = 0.0
        """time.time() when the newest copy was stored (0: none yet)."""

    def where(self) -> str:
        """Where the surviving copy lives, for the run's events and summary, and whether there
        is one yet (once copies failed, where the newest one may be instead)."""
        how = "fetched from rank 0's node after each checkpoint" if self.copies else "written here"
        if self.copies and self.failures and self.last_failed_node:
            held = "" if self.local.is_file() else "none was copied here; "
            return (
                f"{self.local} ({how}; {self.failures} copy(ies) failed: {held}the newest may "
                f"only be on node {self.last_failed_node}, {self.node_copy})"
            )
        if not self.local.is_file():  # a run stopped before its first one must not read as kept
            return f"{self.local} (none yet; {how})"
        return f"{self.local} ({how})"

    def observe(self, node: str, event: Mapping[str, Any]) -> None:
        """Start copying after a `checkpoint` event of rank 0."""
        if event.get("type") != "checkpoint" or event.get("rank") not in (0, None):
            return
        keys = ("epoch", "step", "global_step", "t", "position", "epoch_samples")
        fields = {k: event.get(k) for k in keys}
        if not self.copies:
            self.stored_at = time.time()
            self.on_stored(_stored(fields))
            return
        self._wanted = (node, fields)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._copy_loop())

    async def _copy_loop(self) -> None:
        while self._wanted is not None:
            (node, fields), self._wanted = self._wanted, None
            started = time.monotonic()
            tmp = self.local.with_name(f".{self.local.name}.part")
            try:
                await self.cluster.fetch(node, NODE_CHECKPOINT, tmp)
                os.replace(tmp, self.local)
            except (LaunchError, OSError) as exc:
                self.failures += 1
                self.last_failed_node = node
                with contextlib.suppress(Exception):  # a node already forgotten: no path
                    self.node_copy = f"{self.cluster.node_dir(node)}/{NODE_CHECKPOINT}"
                log.warning("checkpoint copy from %s failed: %s", node, exc)
                with contextlib.suppress(OSError):
                    tmp.unlink()
                continue
            self.stored_at = time.time()
            self.on_stored(_stored(fields))
            self.emitter.emit(
                "checkpoint_stored",
                **{k: v for k, v in fields.items() if k != "t"},
                path=str(self.local),
                source=node,
                seconds=round(time.monotonic() - started, 3),
            )

    async def settle(self, timeout: float = 30.0) -> None:
        """Wait (at most ``timeout`` s) for a copy in flight; a node that vanished mid-copy
        leaves the previous copy in place."""
        task = self._task
        if task is not None and not task.done():
            _, late = await asyncio.wait([task], timeout=timeout)
            for pending in late:
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pending

    async def push(self, nodes: list[str]) -> None:
        """Put the surviving copy on ``nodes`` (rank 0 resumes from it wherever it lands)."""
        if not self.copies or not self.local.is_file():
            return
        copies = [self.cluster.put_file(n, self.local, NODE_CHECKPOINT) for n in nodes]
        await asyncio.gather(*copies)

    async def request(self, node: str, scratch: Path) -> None:
        """Ask rank 0 on ``node`` for a checkpoint at its next step (spot notice)."""
        scratch.parent.mkdir(parents=True, exist_ok=True)
        scratch.write_text("")
        await self.cluster.put_file(node, scratch, NODE_REQUEST)

    async def checkpoint_now(self, node: str, scratch: Path, timeout_s: float) -> bool:
        """Ask rank 0 on ``node`` for a checkpoint and wait (at most ``timeout_s``) until it
        is stored here; whether it was (a stop keeps the work done since the last one)."""
        before = self.stored_at
        try:
            await self.request(node, scratch)
        except LaunchError as exc:
            log.warning("could not ask for a checkpoint on %s: %s", node, exc)
            return False
        deadline = time.monotonic() + timeout_s
        while self.stored_at <= before and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return self.stored_at > before

    async def close(self) -> None:
        """Let a copy in flight finish (briefly)."""
        await self.settle(timeout=10.0)


def _stored(fields: Mapping[str, Any]) -> StoredCheckpoint:
    return StoredCheckpoint(
        epoch=int(fields.get("epoch") or 0),
        step=int(fields.get("step") or 0),
        global_step=int(fields.get("global_step") or 0),
        t=float(fields.get("t") or time.time()),
        position=int(fields.get("position") or 0),
        epoch_samples=int(fields.get("epoch_samples") or 0),
    )

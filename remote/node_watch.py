"""Watch training nodes for loss: spot interruption notices and instances that went away.

On every spot node a side command (``python -m engine.spot_watch``) polls the instance
metadata's ``spot/instance-action``. When a notice arrives the watcher asks rank 0 for a
checkpoint at once, waits until that checkpoint is stored off the node (at most
``recovery.notice_checkpoint_s``), then gives the node up (:meth:`Cluster.lose_node`) so the
run recovers before AWS reclaims the machine. On EC2 the instances' states are polled as well:
one that is shutting down or terminated (by AWS, by hand, by a spot reclaim the notice missed)
is given up at once. A given-up node makes the training command fail, and the training stage
decides by the recovery policy what happens next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.errors import LaunchError
from engine.events import Emitter
from remote.checkpoint_keeper import CheckpointKeeper
from remote.clusters import Cluster, Command
from remote.profile_spec import RecoverySpec

log = logging.getLogger(__name__)

SPOT_STAGE = "spot-watch"


class NodeWatch:
    """Spot watchers on spot nodes and an instance-state poll (EC2); gives lost nodes up."""

    def __init__(
        self,
        cluster: Cluster,
        keeper: CheckpointKeeper,
        spec: RecoverySpec,
        run_dir: Path,
        emitter: Emitter,
    ) -> None:
        self.cluster = cluster
        self.keeper = keeper
        self.spec = spec
        self.run_dir = run_dir
        self.emitter = emitter
        self.notices: dict[str, float] = {}
        """Spot nodes that got an interruption notice, with when."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._poll: asyncio.Task[None] | None = None

    # -- starting and stopping -------------------------------------------------------------------
    async def start(self, nodes: list[str] | None = None) -> None:
        """Start spot watchers on the spot nodes among ``nodes`` and the instance poll."""
        is_spot = getattr(self.cluster, "is_spot", None)
        url = getattr(self.cluster, "metadata_url", None)
        for node in nodes or self.cluster.nodes:
            if is_spot is None or not is_spot(node):
                continue
            argv = [self.cluster.python(node), "-m", "engine.spot_watch"]
            argv += ["--interval", f"{self.spec.spot_poll_s:g}"] + (["--url", url] if url else [])
            env = {**self.cluster.code_env(node), "SENTITOP_NODE": node}
            await self.cluster.start_side(
                node, Command(argv=tuple(argv), env=env), SPOT_STAGE, on_line=self.on_line
            )
        if self._poll is None and getattr(self.cluster, "fleet", None) is not None:
            self._poll = asyncio.create_task(self._poll_instances())

    async def forget(self, node: str) -> None:
        """Stop watching ``node`` (it was given up)."""
        await self.cluster.stop_side(f"{node}/{SPOT_STAGE}")

    async def stop(self) -> None:
        """Stop the poll and every notice handler (side commands stop with the cluster)."""
        tasks = [*self._tasks, *([self._poll] if self._poll else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._poll = None

    # -- notices ----------------------------------------------------------------------------------
    def on_line(self, node: str, line: str, event: Mapping[str, Any] | None) -> None:
        """A spot watcher's line: a `spot_notice` event starts the handover."""
        if event is None or event.get("type") != "spot_notice" or node in self.notices:
            return
        self.notices[node] = time.time()
        self.emitter.emit(
            "node", node=node, status="interrupting", detail=f"spot notice: {event.get('action')}"
        )
        task = asyncio.create_task(self._handover(node, self.notices[node]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handover(self, node: str, noticed: float) -> None:
        """Checkpoint now, wait until it is stored here, then give the node up."""
        stored_before = self.keeper_latest_t()
        try:
            await self.keeper.request(self.cluster.rank0_node, self.run_dir / "config" / "REQUEST")
        except LaunchError as exc:
            log.warning("could not ask for a checkpoint on %s: %s", self.cluster.rank0_node, exc)
        deadline = noticed + self.spec.notice_checkpoint_s
        while self.keeper_latest_t() <= stored_before and time.time() < deadline:
            await asyncio.sleep(0.2)
        saved = self.keeper_latest_t() > stored_before
        why = "spot interruption notice" + ("; checkpointed first" if saved else "")
        await self.cluster.lose_node(node, why)

    def keeper_latest_t(self) -> float:
        """When the newest stored checkpoint was stored (0 when none yet)."""
        return self.keeper.stored_at

    # -- instances --------------------------------------------------------------------------------
    async def _poll_instances(self) -> None:
        while True:
            await asyncio.sleep(self.spec.spot_poll_s)
            for node in list(self.cluster.nodes):
                if node in self.cluster.lost:
                    continue
                try:
                    gone = await self.cluster.node_gone(node)
                except LaunchError as exc:
                    log.warning("cannot check the instance of %s: %s", node, exc)
                    continue
                if gone:
                    with contextlib.suppress(LaunchError):
                        await self.cluster.lose_node(node, gone)

"""The train stage of a run: start the cluster, train, and recover from lost nodes by policy.

One attempt starts the ranks on every node (``python -m engine.launch``). When a node is lost
(its ranks crash, its SSH connection drops, its instance is terminated, or a spot notice gives
it up) the cluster stops
the surviving ranks and raises :class:`NodeFailedError`. With ``recovery.on_node_loss`` shrink
or replace (and restarts and deadline left) the stage drops the node or starts a replacement,
puts the latest stored checkpoint on every node and starts the next attempt with ``--resume``:
the trainer continues from that checkpoint with the balancer planning shares for the new set
of machines. Budgets hold throughout (the run's meter and ticker span every attempt).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import TrainConfig, config_to_dict
from engine.errors import LaunchError
from engine.events import Emitter
from engine.sentiment.presets import embeddings_folder_of
from remote.checkpoint_keeper import CheckpointKeeper
from remote.clusters import LOST, Cluster, Command, LineCallback, LocalCluster, NodeFailedError
from remote.cost import CostMeter
from remote.datasets import PreparedData
from remote.node_billing import NodeBilling
from remote.node_watch import NodeWatch
from remote.pricing import PriceBook
from remote.profile import Profile
from remote.recovery import RecoveryLedger, StoredCheckpoint, classify
from remote.security import make_private_dir, write_private_file
from remote.stall_watch import StalledError, StallWatch


@dataclass(slots=True)
class TrainContext:
    """What every stage of one run shares."""

    profile: Profile
    train: TrainConfig
    """The profile's training config, built once (data_dir and run_dir are set per node)."""
    run_dir: Path
    emitter: Emitter
    sink: Any
    meter: CostMeter
    book: PriceBook
    on_line: LineCallback | None
    ledger: RecoveryLedger
    notes: dict[str, Any] = field(default_factory=dict)
    """Facts for the summary (where checkpoints are kept)."""
    resume: bool = False
    """The first attempt continues from ``run_dir/train/checkpoints/latest.pt`` (a resumed
    run's, put there before the cluster starts), pushed to every node first."""
    resumed_from: Path | None = None
    """The stopped run this one continues (its folder), when ``resume``."""
    checkpoint_now: Callable[[float], Coroutine[Any, Any, StoredCheckpoint | None]] | None = None
    """While ranks train: ask rank 0 for a checkpoint and wait at most the given seconds
    until it is stored here; the checkpoint, or None (set by :func:`run_training`)."""


def train_config_dict(cfg: TrainConfig, data_dir: str, run_dir: str) -> dict[str, Any]:
    """The TrainConfig as JSON for ``python -m engine.sentiment.train --config`` on one node."""
    return {**config_to_dict(cfg), "data_dir": data_dir, "run_dir": run_dir}


async def _run_watched(
    cluster: Cluster, commands: dict[str, Command], tap: Any, stall: StallWatch
) -> None:
    """One attempt's ``cluster.run``; StalledError when its ranks fall silent too long."""
    run = asyncio.create_task(cluster.run(commands, stage="train", on_line=tap))
    silent = asyncio.create_task(stall.expired())
    try:
        done, _ = await asyncio.wait({run, silent}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # cancelled from outside (Ctrl-C, a stop)
        run.cancel()
        silent.cancel()
        await asyncio.gather(run, silent, return_exceptions=True)
        raise
    if run in done:
        silent.cancel()
        await asyncio.gather(silent, return_exceptions=True)
        run.result()  # NodeFailedError: the recovery's to handle
        return
    run.cancel()  # the cluster stops every node process as it ends
    await asyncio.gather(run, return_exceptions=True)
    raise StalledError(
        silent.result(),
        hint="a rank may be frozen (a stuck GPU, a node out of memory and swapping); resume "
        "from the last checkpoint, or raise recovery.stall_timeout if the run is just slow "
        "between events",
    )


async def _commands(
    ctx: TrainContext, cluster: Cluster, data: PreparedData, *, resume: bool
) -> dict[str, Command]:
    """The rank launcher per node with its own config file (paths differ per node)."""
    run_dir = ctx.run_dir
    data_paths = await cluster.put_data(data.dataset_dir)
    base = ctx.train
    init = embeddings_folder_of(base.model)  # each node reads its own copy (svd: no folder)
    init_paths = await cluster.put_data(Path(init).expanduser()) if init else {}
    args: dict[str, list[str]] = {}
    for node in cluster.nodes:
        node_cfg = train_config_dict(base, data_paths[node], f"{cluster.node_dir(node)}/train")
        if init:
            node_cfg["model"]["init_embeddings"] = init_paths[node]
        local = make_private_dir(run_dir / "config") / f"train-{node}.json"
        write_private_file(local, json.dumps(node_cfg, indent=2))
        remote_path = (await cluster.put_data(local))[node]
        args[node] = ["--config", remote_path, "--no-events-file"]
        args[node] += ["--resume"] if resume else []
    return cluster.rank_commands("engine.sentiment.train", args, threads=base.threads)


def _world(cluster: Cluster) -> int:
    return sum(cluster.nproc(n) for n in cluster.nodes)


async def run_training(ctx: TrainContext, cluster: Cluster, data: PreparedData) -> None:
    """Train on ``cluster`` to the end, recovering from lost nodes as the profile says."""
    profile, run_dir, ledger = ctx.profile, ctx.run_dir, ctx.ledger
    billing = NodeBilling(profile, cluster, ctx.meter, ctx.book)
    billing.listen()  # instances bill from running on: the budget sees the wait for SSH
    try:
        await cluster.start(run_dir, events=ctx.sink)
    except BaseException:  # instances that ran while SSH never answered still cost money
        billing.bill_unused()
        raise
    await billing.start()  # nodes go on in their instance's line (SSH nodes start theirs)
    keeper = CheckpointKeeper(cluster, run_dir, ctx.emitter, ledger.stored)
    ctx.notes["checkpoints"] = keeper.where()
    watch = NodeWatch(cluster, keeper, profile.recovery, run_dir, ctx.emitter)

    stall = StallWatch(profile.recovery.stall_timeout)

    async def tap(node: str, line: str, event: dict[str, Any] | None) -> None:
        if event is not None:
            stall.observe(event)
            ledger.observe(event)
            keeper.observe(node, event)
            if event.get("type") == "train_start" and ledger.train_started is None:
                ledger.train_started = float(event.get("t") or time.time())
            done = ledger.resumed(event)
            if done is not None:
                ctx.emitter.emit("recovery", **done)
        if ctx.on_line is not None:
            result = ctx.on_line(node, line, event)
            if result is not None:
                await result

    async def checkpoint_now(timeout_s: float) -> StoredCheckpoint | None:
        if ledger.train_started is None:  # no step taken yet: nothing worth a checkpoint
            return None
        scratch = run_dir / "config" / "REQUEST"
        if await keeper.checkpoint_now(cluster.rank0_node, scratch, timeout_s):
            return ledger.checkpoints[-1]
        return None

    ctx.checkpoint_now = checkpoint_now
    try:
        await watch.start()
        resume, first = ctx.resume, True
        if resume:  # a resumed run: rank 0 continues from the earlier run's checkpoint
            await keeper.push(cluster.nodes)
        started = time.time()
        while True:
            commands = await _commands(ctx, cluster, data, resume=resume)
            if first:
                first = False
                ctx.emitter.emit(
                    "stage_start",
                    stage="train",
                    world_size=_world(cluster),
                    nodes=cluster.nodes,
                    checkpoints=keeper.where(),
                    on_node_loss=profile.recovery.on_node_loss,
                )
            try:
                stall.restart()
                await _run_watched(cluster, commands, tap, stall)
                break
            except NodeFailedError as exc:
                await _recover(ctx, cluster, exc, keeper, billing, watch)
                resume = True
        if not isinstance(cluster, LocalCluster):  # bring rank 0's checkpoints and model home
            await cluster.fetch(cluster.rank0_node, "train", run_dir / "train")
        ctx.emitter.emit("stage_end", stage="train", status="ok", seconds=time.time() - started)
    finally:
        ctx.checkpoint_now = None
        await watch.stop()
        await keeper.close()
        ctx.notes["checkpoints"] = keeper.where()  # failed copies said, with the node's path
        billing.stop_all()
        billing.bill_unused()  # a replacement that never became a node


async def _recover(
    ctx: TrainContext,
    cluster: Cluster,
    exc: NodeFailedError,
    keeper: CheckpointKeeper,
    billing: NodeBilling,
    watch: NodeWatch,
) -> None:
    """Drop or replace the lost node(s) and prepare the next attempt; re-raises ``exc`` when
    the policy says fail (or no restarts/time are left)."""
    ledger = ctx.ledger
    decision = ledger.decide()
    if decision not in ("shrink", "replace"):
        if ctx.profile.recovery.on_node_loss != "fail":
            exc.message += f"\n  not recovered: {decision}"
            exc.args = (exc.message,)
        raise exc
    lost_at = time.time()
    # given up by the launcher, or out of reach: lost; else the node that failed first
    gone = [n for n, code in exc.exits.items() if code == LOST]
    lost = [n for n in dict.fromkeys([*cluster.lost, *gone] or [exc.node]) if n in cluster.nodes]
    rate = ctx.meter.usd_per_hour()
    world_before = _world(cluster)
    rec = ledger.begin(
        lost=lost,
        cause=classify(exc.node_exit_code, exc.reason, LOST),
        action=decision,
        detail=(exc.reason or exc.message.split("\n")[0])[:300],
        lost_at=lost_at,
        world_before=world_before,
        usd_per_hour=rate,
    )
    try:
        await keeper.settle()
        for node in lost:
            billing.stop(node, at=lost_at)
            await watch.forget(node)
            if decision == "shrink":
                await cluster.drop_node(node)
                ctx.emitter.emit("node", node=node, status="dropped", detail="left behind")
            else:
                new = await cluster.replace_node(node)
                rec.replacements.append(new)
                ctx.emitter.emit("node", node=node, status="replaced", detail=f"replaced by {new}")
        cluster.lost.clear()
        cluster.attempt += 1
        if cluster.streams is not None:
            cluster.streams.rank0_node = None  # rank 0 may land elsewhere now
        rec.world_after = _world(cluster)
        await keeper.push(cluster.nodes)
        await billing.start(rec.replacements)
        await watch.start(rec.replacements)
    except LaunchError as failure:
        fields = ledger.failed(failure.message.split("\n")[0])
        if fields is not None:
            ctx.emitter.emit("recovery", **fields)
        raise LaunchError(
            f"recovering from the loss of {', '.join(lost)} failed: {failure.message}",
            hint=failure.hint,
        ) from failure

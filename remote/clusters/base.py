"""The one cluster interface: start nodes, run a command per node with live lines, stop them all.

A :class:`Cluster` is used as ``async with cluster:`` so that :meth:`Cluster.stop` — which kills
every node's process group and closes connections — runs on every exit path: normal exit,
exceptions, task cancellation and SIGINT (``asyncio.run`` turns Ctrl-C into cancellation).

:meth:`Cluster.run` supervises one process per node. The first node that exits non-zero (or
whose connection is lost) stops every other node at once and raises :class:`NodeFailedError`
naming that node with the last lines of its log.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from engine.errors import LaunchError, peer_lost
from engine.events import EventSink
from engine.launch import rank_failure
from remote.shell import check_name, launch_argv
from remote.streams import LineCallback, LineSplitter, RunStreams
from remote.teardown_await import finish_despite_cancel

log = logging.getLogger(__name__)

KILL_GRACE_S = 3.0
"""Seconds between SIGTERM and SIGKILL when stopping a node's process group."""
LOSE_GRACE_S = 1.0
"""Seconds between SIGTERM and SIGKILL for a node given up (it is about to vanish anyway)."""
SETTLE_S = 1.0
"""After a first failure, seconds to wait for other nodes' failures before choosing the cause."""
DRAIN_S = 2.0
"""Seconds given to stopped nodes' output streams to reach end-of-file before they are cut."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """What one node runs."""

    argv: tuple[str, ...]
    """Program and arguments (never parsed by a shell; quoted where a shell is involved)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables."""
    cwd: str | None = None
    """Working directory; None = the node's run folder (:meth:`Cluster.node_dir`)."""


@dataclass(frozen=True, slots=True)
class NodeResult:
    """How one node's process ended."""

    node: str
    """Node name."""
    exit_code: int
    """Exit status (negative: killed by that signal; -255: connection lost)."""
    seconds: float
    """Wall time from start to exit."""
    log_path: Path
    """The node's log file in the run folder."""


LOST = -255
"""Exit code recorded when a node's connection was lost before it reported an exit status."""


class NodeFailedError(LaunchError):
    """A node's process failed; every node was stopped. Names the node, shows its last lines."""

    def __init__(
        self,
        node: str,
        where: str,
        exit_code: int,
        tail: Sequence[str],
        log_path: Path,
        *,
        stage: str,
        reason: str | None = None,
    ) -> None:
        self.node = node
        self.node_exit_code = exit_code
        """The node's own exit code (LOST: the connection); the command's stays 1, as for any
        failed run (a node's 2 or 130 read as a bad profile or a Ctrl-C, its -9 as 247)."""
        self.tail = list(tail)
        self.log_path = log_path
        self.reason = reason
        """Why the launcher gave the node up (None: it failed by itself)."""
        self.exits: dict[str, int] = {node: exit_code}
        """Exit code of every node that failed (the cause and those after it)."""
        why = "lost its connection" if exit_code == LOST else f"exited with code {exit_code}"
        rank = rank_failure(self.tail) if exit_code == 1 else None  # what its launcher said
        why += f" ({rank})" if rank else ""
        if reason:
            why = f"was given up ({reason})"
        shown = "\n".join(f"    | {line}" for line in self.tail) or "    (no output)"
        hint = f"the full log is {log_path}"
        if rank and rank.endswith("SIGKILL"):  # nothing of ours sends it before a TERM
            hint += "; a rank killed by SIGKILL is most often the kernel's out-of-memory killer"
            hint += " (see `dmesg` on that node): fewer ranks per node or a smaller batch"
        super().__init__(
            f"node {node} ({where}) {why} during {stage}; every node was stopped.\n"
            f"  last lines of {log_path}:\n{shown}",
            hint=hint,
        )


class NodeProcess(Protocol):
    """A running node command (local subprocess or SSH channel)."""

    async def read(self) -> bytes:
        """The next chunk of merged stdout/stderr; b"" at end of stream."""

    async def wait(self) -> int:
        """Exit code once it ended (see :attr:`NodeResult.exit_code`)."""

    async def kill(self, grace: float) -> None:
        """Stop the whole process group: TERM, then KILL after ``grace`` seconds; never raises."""


class Cluster(ABC):
    """Nodes that run commands; concrete classes: LocalCluster, SSHCluster (and EC2Cluster)."""

    kind: str = "cluster"

    def __init__(self) -> None:
        self.streams: RunStreams | None = None
        self.run_dir: Path | None = None
        self._running: dict[str, NodeProcess] = {}
        self._rank0: str | None = None
        self._runs: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self._side: dict[str, tuple[NodeProcess, asyncio.Task[Any]]] = {}
        """Side commands (spot watchers) by ``node/stage``: stopped with the cluster."""
        self.lost: dict[str, str] = {}
        """Nodes given up by :meth:`lose_node` (spot notice, instance gone), with the reason."""
        self.attempt = 0
        """Training attempt: 0, then 1, 2, … after each recovery."""

    # -- what a concrete cluster provides ------------------------------------------------
    @property
    @abstractmethod
    def nodes(self) -> list[str]:
        """Node names, first node first (it hosts the rendezvous and rank 0)."""

    @abstractmethod
    def describe(self, node: str) -> str:
        """Where ``node`` is, for messages (e.g. ``ubuntu@10.0.0.5:22``)."""

    def node_facts(self, node: str) -> dict[str, Any]:
        """Fields ``node``'s events carry beside its name (EC2: ``instance``, its instance id,
        so a display can show the instance's events and the node's as one machine)."""
        return {}

    @abstractmethod
    def nproc(self, node: str) -> int:
        """Rank processes the launcher starts on ``node``."""

    @abstractmethod
    async def _prepare(self) -> None:
        """Connect and set nodes up (called by :meth:`start` once streams exist)."""

    @abstractmethod
    async def _spawn(self, node: str, command: Command, stage: str, token: str) -> NodeProcess:
        """Start ``command`` on ``node`` in a new process group, marked with kill ``token``."""

    @abstractmethod
    async def _disconnect(self) -> None:
        """Close connections (after every process was stopped); never raises."""

    @abstractmethod
    def node_dir(self, node: str) -> str:
        """The node's run folder (default working directory; rank 0 writes checkpoints here)."""

    @abstractmethod
    def python(self, node: str) -> str:
        """The Python interpreter on ``node``."""

    @abstractmethod
    def code_env(self, node: str) -> dict[str, str]:
        """Environment that makes the project's ``engine`` package importable on ``node``."""

    @abstractmethod
    async def put_data(self, local: str | Path) -> dict[str, str]:
        """Make a local file or folder available on every node; its path per node."""

    @abstractmethod
    async def fetch(self, node: str, path: str, local: str | Path) -> Path:
        """Copy ``path`` (relative to the node's run folder, or absolute) from ``node`` here."""

    @abstractmethod
    def rendezvous_endpoint(self) -> str | None:
        """``host:port`` where global rank 0 (first node) listens; None = one node, any port."""

    async def put_file(self, node: str, local: str | Path, path: str) -> str:
        """Copy one local file to ``path`` (relative to the node's run folder) atomically."""
        raise LaunchError(f"{type(self).__name__} cannot copy files to its nodes")

    async def drop_node(self, node: str) -> None:
        """Continue without ``node`` (shrink); raises LaunchError when nothing would be left."""
        raise LaunchError(f"{type(self).__name__} cannot continue without node {node}")

    async def replace_node(self, node: str) -> str:
        """Start a machine in place of the lost ``node``, set it up; the new node's name."""
        raise LaunchError(f"{type(self).__name__} cannot replace node {node}")

    async def node_gone(self, node: str) -> str | None:
        """Why ``node``'s machine is gone for good (e.g. its instance terminated), else None."""
        return None

    @property
    def rank0_node(self) -> str:
        """The node that ran global rank 0 (seen from events; else the first node)."""
        seen = self.streams.rank0_node if self.streams is not None else self._rank0
        return seen or self.nodes[0]

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self, run_dir: str | Path, *, events: EventSink | None = None) -> None:
        """Open the run folder's logs/events and make every node ready to run commands."""
        self.run_dir = Path(run_dir)
        self._stopping = False
        check_name(self.run_dir.name, "run id (run folder name)")
        if self.streams is None:
            self.streams = RunStreams(self.run_dir, events=events)
        for node in self.nodes:
            check_name(node, "node name")
        await self._prepare()

    async def stop(self) -> None:
        """Kill every node's process group and disconnect; safe to call twice, never raises."""
        self._stopping = True
        await self._kill_running()
        await self._stop_side()
        runs = [task for task in self._runs if not task.done()]
        if runs:  # run() calls in other tasks end once their nodes are gone
            _, late = await asyncio.wait(runs, timeout=DRAIN_S + SETTLE_S + 1)
            for task in late:
                task.cancel()
        await self._disconnect()
        if self.streams is not None:
            self._rank0 = self.streams.rank0_node
            self.streams.close()
            self.streams = None

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await finish_despite_cancel(self.stop(), "stopping node processes")
        except LaunchError as failed:
            if exc is not None and failed.leftovers and failed is not exc:
                raise failed.after(exc) from exc  # the teardown's failure and the run's
            raise

    async def _kill_running(self) -> None:
        running, self._running = self._running, {}
        if running:
            await asyncio.gather(*(proc.kill(KILL_GRACE_S) for proc in running.values()))

    # -- node loss and side commands --------------------------------------------------------
    async def lose_node(self, node: str, reason: str) -> None:
        """Give ``node`` up: remember why and kill its running command (its run() fails)."""
        self.lost.setdefault(node, reason)
        self._require_started().note(node, f"given up: {reason}")
        proc = self._running.get(node)
        if proc is not None:
            await proc.kill(LOSE_GRACE_S)

    async def start_side(
        self, node: str, command: Command, stage: str, on_line: LineCallback | None = None
    ) -> None:
        """Start a side command on ``node`` (e.g. the spot watcher) whose lines go to the node's
        log and events like a main command's; it ends with the cluster or :meth:`stop_side`."""
        streams = self._require_started()
        key = f"{node}/{stage}"
        await self.stop_side(key)
        token = f"st-{secrets.token_hex(12)}"

        async def spawn() -> None:
            proc = await self._spawn(node, command, stage, token)
            task = asyncio.create_task(self._supervise(node, proc, time.monotonic(), on_line))
            self._side[key] = (proc, task)

        await finish_despite_cancel(spawn(), "starting a side command")  # see _spawn_running
        streams.note(node, f"{stage}: started {' '.join(command.argv)}")

    async def stop_side(self, key: str) -> None:
        """Stop one side command (``node/stage``); never raises."""
        entry = self._side.pop(key, None)
        if entry is None:
            return
        proc, task = entry
        await proc.kill(KILL_GRACE_S)
        _, late = await asyncio.wait([task], timeout=DRAIN_S)
        for pending in late:
            pending.cancel()

    async def _stop_side(self) -> None:
        await asyncio.gather(*(self.stop_side(key) for key in list(self._side)))

    def side_keys(self, node: str | None = None) -> list[str]:
        """Running side commands (``node/stage``), of ``node`` only when given."""
        return [k for k in self._side if node is None or k.split("/", 1)[0] == node]

    # -- commands --------------------------------------------------------------------------
    def rank_commands(
        self,
        module: str,
        args: Sequence[str] | Mapping[str, Sequence[str]],
        *,
        env: Mapping[str, str] | None = None,
        threads: int | None = None,
    ) -> dict[str, Command]:
        """One ``python -m engine.launch`` per node running ``python -m module args`` as its ranks.

        Ranks follow the node order: the first node holds global rank 0 (and the store on
        :meth:`rendezvous_endpoint`). ``args`` may be a mapping node → args when nodes see
        different paths (see :meth:`put_data`). The environment carries ``SENTITOP_NODE`` and
        the code path.
        """
        nodes = self.nodes
        endpoint = self.rendezvous_endpoint()
        world = sum(self.nproc(node) for node in nodes)
        commands, offset = {}, 0
        for index, node in enumerate(nodes):
            node_args = args[node] if isinstance(args, Mapping) else args
            argv = launch_argv(
                self.python(node),
                module,
                list(node_args),
                nproc=self.nproc(node),
                node_rank=index,
                rank_offset=offset,
                world_size=world,
                master=endpoint,
                threads=threads,
            )
            offset += self.nproc(node)
            node_env = {**self.code_env(node), "SENTITOP_NODE": node, **(env or {})}
            commands[node] = Command(argv=tuple(argv), env=node_env)
        return commands

    async def run(
        self,
        commands: Mapping[str, Command],
        *,
        on_line: LineCallback | None = None,
        stage: str = "train",
    ) -> dict[str, NodeResult]:
        """Run one command per named node, streaming lines; results once all exit 0.

        Raises :class:`NodeFailedError` (after stopping every node) when one fails, and stops
        every node when cancelled.
        """
        streams = self._require_started()
        unknown = set(commands) - set(self.nodes)
        if unknown:
            raise LaunchError(f"no such node(s): {', '.join(sorted(unknown))}")
        current = asyncio.current_task()
        if current is not None:
            self._runs.add(current)
        tasks: dict[asyncio.Task[NodeResult], str] = {}
        try:
            for node, command in commands.items():
                streams.note(node, f"{stage}: starting {' '.join(command.argv)}")
                started = time.monotonic()
                token = f"st-{secrets.token_hex(12)}"
                proc = await self._spawn_running(node, command, stage, token)
                streams.emit("node", node=node, status="running", stage=stage,
                             detail=self.describe(node), **self.node_facts(node))  # fmt: skip
                task = asyncio.create_task(self._supervise(node, proc, started, on_line))
                tasks[task] = node
            results: dict[str, NodeResult] = {}
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                finished = [task.result() for task in done]
                results.update((result.node, result) for result in finished)
                failed = [r for r in finished if r.exit_code != 0]
                if failed and self._stopping:
                    raise LaunchError(f"{stage} was stopped: the cluster is shutting down")
                if failed:
                    if pending:  # nodes that fail because of this one are not the cause
                        more, pending = await asyncio.wait(pending, timeout=SETTLE_S)
                        failed += [t.result() for t in more if t.result().exit_code != 0]
                    raise self._failure(self._root_cause(failed), failed, stage)
            for node in commands:
                result = results[node]
                detail = f"exit 0 after {result.seconds:.1f} s"
                streams.emit("node", node=node, status="done", stage=stage, detail=detail,
                             **self.node_facts(node))  # fmt: skip
                self._running.pop(node, None)
            return results
        finally:
            try:
                await finish_despite_cancel(self._kill_running(), "stopping node processes")
                if tasks:  # let killed nodes' last lines reach their logs, briefly
                    await asyncio.wait(tasks, timeout=DRAIN_S)
            finally:
                for task in tasks:
                    task.cancel()
                self._runs.discard(current)
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _spawn_running(
        self, node: str, command: Command, stage: str, token: str
    ) -> NodeProcess:
        """Spawn ``node``'s command and register it in ``_running``, even across a cancel.

        A Ctrl-C that lands while asyncio is still creating a process would otherwise leave it
        unregistered (never killed), and on CPython 3.11 can hang the creation for good (its
        transport waits for pipes that never connect), so the spawn is finished first and the
        cancellation re-raised after: ``run()``'s teardown then stops the process.
        """

        async def spawn() -> NodeProcess:
            proc = await self._spawn(node, command, stage, token)
            self._running[node] = proc
            return proc

        return await finish_despite_cancel(spawn(), "starting node processes")

    def _root_cause(self, failed: list[NodeResult]) -> NodeResult:
        """The failure that caused the others: not a lost peer if possible, else the first."""
        streams = self._require_started()

        def lost_peer(result: NodeResult) -> bool:
            return peer_lost("\n".join(streams.tail(result.node, 200)))

        return min(
            failed,
            key=lambda r: (r.node not in self.lost, lost_peer(r), r.exit_code == LOST, r.seconds),
        )

    def _failure(self, cause: NodeResult, failed: list[NodeResult], stage: str) -> NodeFailedError:
        streams = self._require_started()
        tail = streams.output_tail(cause.node, 20)
        error = NodeFailedError(
            cause.node,
            self.describe(cause.node),
            cause.exit_code,
            tail,
            cause.log_path,
            stage=stage,
            reason=self.lost.get(cause.node),
        )
        error.exits = {r.node: r.exit_code for r in failed}
        others = sorted(r.node for r in failed if r is not cause)
        if others:
            error.message += f"\n  also failed after it: {', '.join(others)}"
            error.args = (error.message,)
        for result in failed:
            lost = self.lost.get(result.node)
            streams.emit(
                "node",
                node=result.node,
                status="lost" if lost or result.exit_code == LOST else "failed",
                stage=stage,
                detail=lost or f"exit {result.exit_code}",
                **self.node_facts(result.node),
            )
        streams.emit(
            "error", node=cause.node, stage=stage, message=error.message.split("\n")[0], tail=tail
        )
        return error

    async def _supervise(
        self, node: str, proc: NodeProcess, started: float, on_line: LineCallback | None
    ) -> NodeResult:
        streams = self._require_started()
        splitter = LineSplitter()

        async def record(lines: list[str]) -> None:
            for line in lines:
                await streams.line(node, line, on_line)

        while chunk := await proc.read():
            await record(splitter.feed(chunk))
        await record(splitter.flush())
        code = await proc.wait()
        seconds = time.monotonic() - started
        streams.note(node, f"exit code {code} after {seconds:.1f} s")
        return NodeResult(node, code, seconds, streams.log_path(node))

    def _require_started(self) -> RunStreams:
        if self.streams is None:
            raise LaunchError(f"{type(self).__name__}.start(run_dir) was not called")
        return self.streams

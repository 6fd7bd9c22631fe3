"""LocalCluster: node processes on this machine, each in its own process group.

Every command runs under the node wrapper of :mod:`remote.shell` in a new session, so stopping
a node kills its launcher and all its ranks (``killpg``), Ctrl-C in the terminal reaches only
sentitop (which then stops the nodes), and the wrapper's watchdog kills the group if sentitop
itself dies. Several local "nodes" may be named to exercise multi-node code on one machine;
they rendezvous on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from engine.errors import LaunchError
from engine.launch import free_port
from remote.clusters.base import Cluster, Command, NodeProcess
from remote.shell import TOKEN_VAR, wrapped_argv

READ_CHUNK = 1 << 16

PROJECT_ROOT = Path(__file__).resolve().parents[2]
"""Folder holding the ``engine`` package (put on PYTHONPATH of local node processes)."""


class LocalProcess:
    """A node command as a local subprocess leading its own process group."""

    def __init__(self, proc: asyncio.subprocess.Process, token: str) -> None:
        self.proc = proc
        self.token = token

    async def read(self) -> bytes:
        """Next chunk of merged output; b"" at end."""
        assert self.proc.stdout is not None
        return await self.proc.stdout.read(READ_CHUNK)

    async def wait(self) -> int:
        """Exit code (negative signal number when killed)."""
        code = await self.proc.wait()
        self._close_stdin()
        return code

    def _close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()  # the wrapper's watchdog then cleans up stragglers

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)
        for pid in marked_processes(self.token):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    async def kill(self, grace: float) -> None:
        """TERM the group, KILL it after ``grace`` s."""
        if self.proc.returncode is None:
            self._signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), grace)
            except TimeoutError:
                self._signal(signal.SIGKILL)
                await self.proc.wait()
        self._signal(signal.SIGKILL)  # workers that outlived the leader or left its group
        self._close_stdin()


class LocalCluster(Cluster):
    """Processes on this machine; node names ``local`` or those given."""

    kind = "local"

    def __init__(
        self,
        names: Sequence[str] = ("local",),
        *,
        nproc: int = 1,
        python: str | None = None,
        rdzv_port: int | None = None,
    ) -> None:
        super().__init__()
        if not names:
            raise LaunchError("a local cluster needs at least one node name")
        self._names = list(names)
        self._nproc = nproc
        self._python = python or sys.executable
        self._rdzv_port = rdzv_port

    @property
    def nodes(self) -> list[str]:
        """Node names."""
        return list(self._names)

    def describe(self, node: str) -> str:
        """``localhost``."""
        return "localhost"

    def nproc(self, node: str) -> int:
        """Workers per node."""
        return self._nproc

    def python(self, node: str) -> str:
        """This interpreter unless another was given."""
        return self._python

    def node_dir(self, node: str) -> str:
        """The run folder itself: rank 0 writes checkpoints straight into it."""
        return str(self._require_run_dir())

    def code_env(self, node: str) -> dict[str, str]:
        """PYTHONPATH with this checkout first (the installed package works too)."""
        path = os.environ.get("PYTHONPATH")
        return {"PYTHONPATH": str(PROJECT_ROOT) + (os.pathsep + path if path else "")}

    def rendezvous_endpoint(self) -> str | None:
        """None for one node (``--standalone``); 127.0.0.1:port for several."""
        if len(self._names) == 1:
            return None
        if self._rdzv_port is None:
            self._rdzv_port = free_port()
        return f"127.0.0.1:{self._rdzv_port}"

    async def _prepare(self) -> None:
        if shutil.which(self._python) is None and not Path(self._python).exists():
            raise LaunchError(f"python interpreter {self._python!r} not found on this machine")

    async def _spawn(self, node: str, command: Command, stage: str, token: str) -> NodeProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **command.env}
        cwd = command.cwd or self.node_dir(node)
        try:
            proc = await asyncio.create_subprocess_exec(
                *wrapped_argv(command.argv, token=token),
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise LaunchError(f"could not start {command.argv[0]!r} on node {node}: {exc}") from exc
        return LocalProcess(proc, token)

    async def _disconnect(self) -> None:
        return None

    async def put_data(self, local: str | Path) -> dict[str, str]:
        """Local files are already here: the same absolute path for every node."""
        path = Path(local).resolve()
        if not path.exists():
            raise LaunchError(f"data path {path} does not exist")
        return {node: str(path) for node in self._names}

    async def put_file(self, node: str, local: str | Path, path: str) -> str:
        """Copy ``local`` to ``path`` (relative to the run folder) unless it is that file."""
        target = Path(path) if Path(path).is_absolute() else self._require_run_dir() / path
        if Path(local).resolve() != target.resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.copy")
            shutil.copy2(local, tmp)
            os.replace(tmp, target)
        return str(target)

    async def drop_node(self, node: str) -> None:
        """Continue without ``node`` (several names), or with one rank fewer (one node)."""
        self._rdzv_port = None  # a fresh rendezvous port for the restart
        if len(self._names) > 1 and node in self._names:
            self._names.remove(node)
        elif self._nproc > 1:
            self._nproc -= 1
        else:
            raise LaunchError(f"node {node} ran the last rank; nothing is left to continue on")

    async def replace_node(self, node: str) -> str:
        """This machine stands in for itself: the node restarts under the same name."""
        self._rdzv_port = None
        return node

    async def fetch(self, node: str, path: str, local: str | Path) -> Path:
        """Copy ``path`` (relative to the run folder) to ``local`` unless it is already there."""
        source = Path(path) if Path(path).is_absolute() else self._require_run_dir() / path
        target = Path(local)
        if source.resolve() != target.resolve():
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        return target

    def _require_run_dir(self) -> Path:
        if self.run_dir is None:
            raise LaunchError("LocalCluster.start(run_dir) was not called")
        return self.run_dir


def marked_processes(token: str) -> list[int]:
    """Pids of this user's processes whose environment carries kill ``token`` (Linux /proc)."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found

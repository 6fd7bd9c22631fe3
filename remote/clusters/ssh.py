"""SSHCluster: nodes reached over SSH (asyncssh); code and data copied by SFTP; launcher per node.

Host keys are checked against ``known_hosts`` (``~/.ssh/known_hosts`` by default) unless the
cluster is explicitly built with ``check_host_keys=False``. Each node gets this layout under its
``workdir``::

    code/<digest>/engine/...        the project's engine package (content-addressed, shared)
    data/<name>-<digest>/...        data copied by put_data (unless shared_fs)
    runs/<run-id>/<node>/           working directory of the node's commands, pid files

Commands run under ``setsid -w`` and the node wrapper (:mod:`remote.shell`): stopping a node
signals its whole process group through a pid file, and the wrapper's watchdog kills the group
when the SSH channel goes away. Every value that reaches the remote shell is quoted.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import logging
import os
import re
import shutil
import tarfile
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncssh

import engine
from engine.errors import LaunchError
from remote.clusters.base import LOST, Cluster, Command, NodeProcess
from remote.clusters.node_runtime import (
    PYTHON_HINT,
    check_python,
    check_same_torch,
    find_python_command,
    local_torch,
    parse_probe,
    probe_command,
    torch_differs,
)
from remote.run_folder import merge_into
from remote.shell import check_name, kill_command, quote, remote_dir, remote_node_command

log = logging.getLogger(__name__)
T = TypeVar("T")

READ_CHUNK = 1 << 16
SETUP_TIMEOUT_S = 120.0
"""Longest a setup command (mkdir, python/torch probe, unpacking code) may take on a node."""
KILL_TIMEOUT_S = 10.0
"""Longest a kill command may take before the node is given up as unreachable."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SSHNode:
    """One machine of an SSH cluster."""

    name: str
    """Node name used in logs, events and file names."""
    host: str
    """Host name or address SSH connects to."""
    port: int = 22
    """SSH port."""
    user: str | None = None
    """Login user (default: the local user / ssh config)."""
    key: str | None = None
    """Private key file (default: the usual ~/.ssh keys and the agent)."""
    nproc: int = 1
    """Training processes (ranks of the launcher) on this node."""
    address: str | None = None
    """Address the other nodes use to reach this one (rendezvous, gloo); default ``host``."""

    def where(self) -> str:
        """``user@host:port`` for messages."""
        return f"{self.user + '@' if self.user else ''}{self.host}:{self.port}"


SETSID_NOTE = re.compile(rb"(?m)^setsid: child \d+ did not exit normally: [^\n]*(\n|$)")
"""What util-linux's ``setsid -w`` prints on the channel when the program it waits for ends by
a signal (every stop: Ctrl-C, a budget, a lost node): its own words, not the program's."""


def without_setsid_note(data: bytes) -> bytes:
    """``data`` without setsid's note about a child that ended by a signal."""
    return SETSID_NOTE.sub(b"", data) if b"setsid: child" in data else data


class SSHProcess:
    """A node command running on an SSH channel."""

    def __init__(
        self, conn: asyncssh.SSHClientConnection, proc: Any, pidfile: str, token: str
    ) -> None:
        self.conn = conn
        self.proc = proc
        self.pidfile = pidfile
        self.token = token

    async def read(self) -> bytes:
        """Next chunk of merged output; b"" at end or when the connection broke."""
        while True:
            try:
                data: bytes = await self.proc.stdout.read(READ_CHUNK)
            except (asyncssh.Error, OSError) as exc:
                log.warning("output stream ended: %s", exc)
                return b""
            kept = without_setsid_note(data)
            if kept or not data:  # a chunk that was only the note: read on
                return kept

    async def wait(self) -> int:
        """Exit status; negative signal number; :data:`LOST` without an exit status."""
        try:
            await self.proc.wait()
        except (asyncssh.Error, OSError):
            return LOST
        code = self.proc.returncode
        return LOST if code is None else int(code)

    def _done(self) -> bool:
        return bool(self.proc.exit_status is not None or self.proc.is_closing())

    async def _signal(self, signal: str) -> None:
        try:
            await asyncio.wait_for(
                self.conn.run(kill_command(self.pidfile, self.token, signal)), KILL_TIMEOUT_S
            )
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            log.warning("could not send SIG%s to %s: %s", signal, self.pidfile, exc)

    async def kill(self, grace: float) -> None:
        """TERM the group and marked processes, KILL what is left after ``grace`` s (also
        stragglers of a command that already ended), then close the channel (watchdog)."""
        try:
            if not self._done():
                await self._signal("TERM")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.proc.wait_closed(), grace)
            await self._signal("KILL")
        finally:
            self.proc.close()


class SSHCluster(Cluster):
    """Nodes over SSH; the first node hosts the c10d rendezvous and rank 0."""

    kind = "ssh"

    def __init__(
        self,
        nodes: Sequence[SSHNode],
        *,
        python: str = "python3",
        workdir: str = "~/sentitop",
        shared_fs: bool = False,
        known_hosts: str | Path | None = None,
        check_host_keys: bool = True,
        connect_timeout: float = 15.0,
        rdzv_port: int = 29400,
        probe_torch: bool = True,
        python_candidates: Sequence[str] = (),
    ) -> None:
        super().__init__()
        if not nodes:
            raise LaunchError("an SSH cluster needs at least one node")
        names = [node.name for node in nodes]
        for name in names:
            check_name(name, "node name")
        if len(set(names)) != len(names):
            raise LaunchError(f"node names must be unique: {', '.join(names)}")
        self._nodes = {node.name: node for node in nodes}
        self._python = python
        self._workdir = workdir
        self.shared_fs = shared_fs
        self.known_hosts = (
            Path(known_hosts).expanduser()
            if known_hosts
            else (Path.home() / ".ssh" / "known_hosts")
        )
        self.check_host_keys = check_host_keys
        self.connect_timeout = connect_timeout
        self.rdzv_port = rdzv_port
        self.probe_torch = probe_torch
        """Check at start that the nodes' python imports torch (a clear early error)."""
        self.python_candidates = tuple(python_candidates)
        """Interpreters tried in order on each node (the first that imports torch is used);
        empty: ``python`` as given."""
        self._python_at: dict[str, str] = {}
        self._conns: dict[str, asyncssh.SSHClientConnection] = {}
        self._home: dict[str, str] = {}
        """Absolute workdir per node (resolved on the node)."""
        self._code: dict[str, str] = {}
        self._torch: dict[str, str] = {}
        """PyTorch version each node's python reported at setup (with probe_torch)."""

    # -- naming ------------------------------------------------------------------------------
    @property
    def nodes(self) -> list[str]:
        """Node names in profile order."""
        return list(self._nodes)

    def node(self, name: str) -> SSHNode:
        """The node spec called ``name``."""
        return self._nodes[name]

    def describe(self, node: str) -> str:
        """``user@host:port``."""
        return self._nodes[node].where()

    def nproc(self, node: str) -> int:
        """Ranks on ``node``."""
        return self._nodes[node].nproc

    def python(self, node: str) -> str:
        """Interpreter on ``node``: the one found among the candidates, else ``python``."""
        return self._python_at.get(node, self._python)

    def workdir(self, node: str) -> str:
        """Absolute workdir on ``node`` (after start)."""
        return self._home[node]

    def node_dir(self, node: str) -> str:
        """``<workdir>/runs/<run-id>/<node>``."""
        assert self.run_dir is not None, "start() first"
        return f"{self._home[node]}/runs/{self.run_dir.name}/{node}"

    def code_env(self, node: str) -> dict[str, str]:
        """PYTHONPATH pointing at the copied engine package."""
        return {"PYTHONPATH": self._code[node], "PYTHONUNBUFFERED": "1"}

    def rendezvous_endpoint(self) -> str | None:
        """First node's address and the rendezvous port."""
        first = next(iter(self._nodes.values()))
        return f"{first.address or first.host}:{self.rdzv_port}"

    # -- connecting and setting up -------------------------------------------------------------
    async def _connect(self, spec: SSHNode) -> asyncssh.SSHClientConnection:
        options: dict[str, Any] = {
            "port": spec.port,
            "known_hosts": str(self.known_hosts) if self.check_host_keys else None,
            "connect_timeout": self.connect_timeout,
            "keepalive_interval": 15,
            "keepalive_count_max": 3,
        }
        if spec.user:
            options["username"] = spec.user
        if spec.key:
            key = Path(spec.key).expanduser()
            if not key.is_file():
                raise LaunchError(
                    f"node {spec.name}: SSH key file {key} does not exist",
                    hint="fix the node's key: in the profile",
                )
            options["client_keys"] = [str(key)]
        if self.check_host_keys and not self.known_hosts.is_file():
            raise LaunchError(
                f"node {spec.name}: known_hosts file {self.known_hosts} does not exist, so the "
                f"host key of {spec.host}:{spec.port} cannot be checked",
                hint=_keyscan_hint(spec, self.known_hosts),
            )
        try:
            return await asyncssh.connect(spec.host, **options)
        except asyncssh.HostKeyNotVerifiable as exc:
            raise LaunchError(
                f"node {spec.name}: the host key of {spec.host}:{spec.port} is not trusted "
                f"({exc.reason}); checked against {self.known_hosts}",
                hint=_keyscan_hint(spec, self.known_hosts),
            ) from None
        except asyncssh.PermissionDenied:
            raise LaunchError(
                f"node {spec.name}: {spec.where()} refused authentication"
                + (f" with key {spec.key}" if spec.key else ""),
                hint="check the node's user and key in the profile, and that the public key is in "
                "~/.ssh/authorized_keys on the node",
            ) from None
        except asyncssh.KeyImportError as exc:
            raise LaunchError(
                f"node {spec.name}: cannot load SSH key {spec.key}: {exc}",
                hint="use an unencrypted key or load it into ssh-agent",
            ) from None
        except (OSError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            if isinstance(exc, TimeoutError):
                reason = f"no SSH answer within {self.connect_timeout:g} s"
            raise LaunchError(
                f"node {spec.name}: cannot reach {spec.host}:{spec.port} ({reason})",
                hint="check the host and port, that sshd runs there and that no firewall blocks it",
            ) from None
        except asyncssh.Error as exc:
            lost = isinstance(exc, asyncssh.ConnectionLost)
            raise LaunchError(
                f"node {spec.name}: SSH to {spec.where()} failed: {exc.reason}",
                hint="the host took the connection and closed it before SSH began: check that "
                "the port is sshd's (not another service's), and sshd's log there (MaxStartups, "
                "AllowUsers, a TCP wrapper refusing this address)"
                if lost
                else "check sshd's log on the node; `ssh -v` with the profile's host, port, user "
                "and key shows the same handshake",
            ) from None

    async def _prepare(self) -> None:
        await self._prepare_nodes(self.nodes)

    async def _prepare_nodes(self, names: list[str]) -> None:
        async def connect(spec: SSHNode) -> None:  # kept at once: stop() closes what opened
            self._conns[spec.name] = await self._connect(spec)

        await _on_every_node(names, [connect(self._nodes[n]) for n in names])
        digest, bundle = code_bundle()
        await _on_every_node(names, [self._setup(n, digest, bundle) for n in names])
        torch_by_node = {n: self._torch[n] for n in self.nodes if n in self._torch}
        check_same_torch(torch_by_node)  # a replacement node too, against the nodes left
        differs = torch_differs({n: torch_by_node[n] for n in names if n in torch_by_node},
                                local_torch())  # fmt: skip
        if differs:
            self._require_started().emit("warning", stage="start", code="torch_version",
                                         message=differs)  # fmt: skip

    async def drop_node(self, node: str) -> None:
        """Continue without ``node``: forget it and close its connection (never reconnects)."""
        if node not in self._nodes:
            return
        if len(self._nodes) == 1:
            raise LaunchError(f"node {node} was the last node; nothing is left to continue on")
        del self._nodes[node]
        self._torch.pop(node, None)
        self._python_at.pop(node, None)
        conn = self._conns.pop(node, None)
        if conn is not None:
            conn.close()

    async def _check(self, node: str, command: str, what: str, hint: str | None = None) -> str:
        conn = self._conns[node]
        try:
            result = await asyncio.wait_for(conn.run(command), SETUP_TIMEOUT_S)
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            raise LaunchError(
                f"node {node} ({self.describe(node)}): {what} failed: {exc}"
            ) from None
        if result.exit_status != 0:
            detail = str(result.stderr or result.stdout or "").strip().splitlines()[-5:]
            raise LaunchError(
                f"node {node} ({self.describe(node)}): {what} failed (exit "
                f"{result.exit_status}): {' / '.join(detail) or 'no output'}",
                hint=hint,
            )
        return str(result.stdout or "")

    async def _setup(self, node: str, digest: str, bundle: bytes) -> None:
        assert self.run_dir is not None
        run = f"runs/{self.run_dir.name}/{node}"
        wd = remote_dir(self._workdir)
        out = await self._check(
            node,
            f"mkdir -p -- {wd} && cd -- {wd} && umask 077 && mkdir -p -- code data {quote(run)}"
            " && printf '\\036%s\\036' \"$PWD\"",
            f"creating workdir {self._workdir!r}",
        )
        # between RS marks: login scripts may print, and a path may hold any character
        self._home[node] = out.rsplit("\036", 2)[-2]
        if self.python_candidates:
            tried = ", ".join(self.python_candidates)
            found = await self._check(node, find_python_command(self.python_candidates),
                                      f"finding a python with torch (tried {tried})",
                                      hint=PYTHON_HINT)  # fmt: skip
            self._python_at[node] = found.rsplit("\036", 2)[-2]
        python = self.python(node)
        out = await self._check(
            node,
            probe_command(python, self.probe_torch),
            f"checking python {python!r}{' with torch' if self.probe_torch else ''} (the "
            "profile's python)",
            hint=PYTHON_HINT,
        )
        python_version, torch_version = parse_probe(out)
        check_python(node, self.describe(node), python_version)
        if self.probe_torch and torch_version:
            self._torch[node] = torch_version
        code = f"{self._home[node]}/code/{digest}"
        if await self._exists(node, f"{code}/engine/__init__.py"):
            self._code[node] = code
            return
        archive = f"{code}.{node}.tar.gz"
        try:
            async with (
                self._conns[node].start_sftp_client() as sftp,
                sftp.open(archive, "wb") as fh,
            ):
                await fh.write(bundle)
        except (asyncssh.Error, OSError) as exc:
            raise sftp_failed(node, "copying code", exc) from None
        tmp = f"{code}.{node}.tmp"
        await self._check(
            node,
            f"rm -rf -- {quote(tmp)} && mkdir -p -- {quote(tmp)} && tar -xzf {quote(archive)} "
            f"-C {quote(tmp)} && rm -f -- {quote(archive)} && "
            f"{{ mv -T -- {quote(tmp)} {quote(code)} 2>/dev/null || rm -rf -- {quote(tmp)}; }}",
            "unpacking code",
        )
        self._code[node] = code

    async def _exists(self, node: str, path: str) -> bool:
        result = await self._conns[node].run(f"test -e {quote(path)}")
        return result.exit_status == 0

    # -- running -----------------------------------------------------------------------------
    async def _spawn(self, node: str, command: Command, stage: str, token: str) -> NodeProcess:
        check_name(stage, "stage")
        cwd = command.cwd or self.node_dir(node)
        pidfile = f"{self.node_dir(node)}/{stage}.pid"
        line = remote_node_command(
            command.argv, cwd=cwd, pidfile=pidfile, token=token, env=command.env
        )
        try:
            proc = await self._conns[node].create_process(
                line, encoding=None, stderr=asyncssh.STDOUT
            )
        except (asyncssh.Error, OSError) as exc:
            raise LaunchError(
                f"node {node} ({self.describe(node)}): could not start {command.argv[0]!r}: {exc}"
            ) from None
        return SSHProcess(self._conns[node], proc, pidfile, token)

    async def _disconnect(self) -> None:
        conns, self._conns = self._conns, {}
        for conn in conns.values():
            conn.close()
        for conn in conns.values():
            with contextlib.suppress(asyncssh.Error, OSError, TimeoutError):
                await asyncio.wait_for(conn.wait_closed(), 5)

    # -- files ---------------------------------------------------------------------------------
    async def put_data(self, local: str | Path) -> dict[str, str]:
        """Copy a file or folder to every node (skipped if there); with shared_fs, no copy."""
        path = Path(local).expanduser().absolute()
        if self.shared_fs:  # the nodes mount the same files at the same path
            return {node: str(path) for node in self._nodes}
        if not path.exists():
            raise LaunchError(f"data path {path} does not exist")
        digest = tree_digest(path)
        name = f"{path.name}-{digest[:12]}"
        results = await asyncio.gather(*(self._put(node, path, name) for node in self._nodes))
        return dict(zip(self._nodes, results, strict=True))

    async def _put(self, node: str, path: Path, name: str) -> str:
        final = f"{self._home[node]}/data/{name}"
        target = f"{final}/{path.name}" if path.is_file() else final
        if await self._exists(node, f"{final}/.complete"):
            return target
        tmp = f"{self._home[node]}/data/.{name}.{node}.tmp"
        await self._check(
            node, f"rm -rf -- {quote(tmp)} && mkdir -p -- {quote(tmp)}", "preparing the data folder"
        )
        try:
            async with self._conns[node].start_sftp_client() as sftp:
                if path.is_file():
                    await sftp.put(str(path), f"{tmp}/{path.name}")
                else:
                    await sftp.put([str(p) for p in sorted(path.iterdir())], tmp, recurse=True)
        except (asyncssh.Error, OSError) as exc:
            raise sftp_failed(node, f"copying {path}", exc) from None
        await self._check(
            node,
            f"touch -- {quote(tmp + '/.complete')} && "
            f"{{ mv -T -- {quote(tmp)} {quote(final)} 2>/dev/null || rm -rf -- {quote(tmp)}; }}",
            "finishing the data copy",
        )
        return target

    async def put_file(self, node: str, local: str | Path, path: str) -> str:
        """Copy one local file to ``path`` (relative to the node's run folder, or absolute):
        uploaded beside it, then renamed over it (a reader never sees half a file)."""
        remote = path if path.startswith("/") else f"{self.node_dir(node)}/{path}"
        parent, name = remote.rsplit("/", 1)
        tmp = f"{parent}/.{name}.upload"
        await self._check(node, f"mkdir -p -- {quote(parent)}", f"creating {parent}")
        try:
            async with self._conns[node].start_sftp_client() as sftp:
                await sftp.put(str(local), tmp)
                await sftp.posix_rename(tmp, remote)
        except (asyncssh.Error, OSError) as exc:
            raise LaunchError(f"node {node}: copying {local} to {remote} failed: {exc}") from None
        return remote

    async def fetch(self, node: str, path: str, local: str | Path) -> Path:
        """Copy ``path`` (relative to the node's run folder, or absolute) from ``node``."""
        remote = path if path.startswith("/") else f"{self.node_dir(node)}/{path}"
        target = Path(local)
        target.parent.mkdir(parents=True, exist_ok=True)
        # sftp puts a folder *inside* a folder that exists (as cp -r does): the run's train/,
        # which the checkpoint copies made, got the model in train/train/, where eval and
        # predict do not look; so it lands beside it and is merged in
        landing = target.parent / f".{target.name}.fetch-{os.getpid()}"
        shutil.rmtree(landing, ignore_errors=True)
        try:
            async with self._conns[node].start_sftp_client() as sftp:
                await sftp.get(remote, str(landing), recurse=True, preserve=True)
            merge_into(landing, target)
        except (asyncssh.Error, OSError) as exc:
            raise sftp_failed(node, f"copying {remote} back", exc) from None
        finally:
            shutil.rmtree(landing, ignore_errors=True)
        return target


async def _on_every_node(nodes: list[str], steps: list[Awaitable[T]]) -> list[T]:
    """Run one step per node concurrently; one LaunchError (first node's) if any failed.

    Several nodes failing the same way (a bad profile value) give one message that names the
    first and lists the others, not a wall of repeats.
    """
    outcomes = await asyncio.gather(*steps, return_exceptions=True)
    errors: list[tuple[str, LaunchError]] = []
    for node, outcome in zip(nodes, outcomes, strict=True):
        if isinstance(outcome, LaunchError):
            errors.append((node, outcome))
        elif isinstance(outcome, BaseException):
            raise outcome
    if errors:
        first = errors[0][1]
        if len(errors) > 1:
            first.message += f" (also failing: {', '.join(f'node {n}' for n, _ in errors[1:])})"
            first.args = (first.message,)
        raise first
    return list(outcomes)  # type: ignore[arg-type]


def _keyscan_hint(spec: SSHNode, known_hosts: Path) -> str:
    return (
        f"check the host's key fingerprint, then add it: ssh-keyscan -p {spec.port} "
        f"{quote(spec.host)} >> {quote(str(known_hosts))} (or point the profile's known_hosts at "
        "a file that has it; insecure_ignore_host_keys: true skips the check, unsafe)"
    )


ENGINE_DIR = Path(engine.__file__).resolve().parent
"""The ``engine`` package copied to every node."""
_BUNDLE_SUFFIXES = {".py", ".json", ".txt", ".csv", ".tcss"}


def code_bundle(package: Path = ENGINE_DIR) -> tuple[str, bytes]:
    """(content digest, tar.gz bytes) of ``package`` as ``<name>/...`` without caches."""
    files = sorted(
        p
        for p in package.rglob("*")
        if p.is_file() and p.suffix in _BUNDLE_SUFFIXES and "__pycache__" not in p.parts
    )
    digest = hashlib.sha256()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in files:
            arcname = f"{package.name}/{path.relative_to(package).as_posix()}"
            data = path.read_bytes()
            digest.update(arcname.encode() + b"\0" + data + b"\0")
            info = tarfile.TarInfo(arcname)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return digest.hexdigest()[:16], buffer.getvalue()


def tree_digest(path: Path) -> str:
    """Digest of a file or folder by names, sizes and modification times (no reading)."""
    digest = hashlib.sha256()
    paths = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for item in paths:
        stat = item.stat()
        rel = item.name if item == path else item.relative_to(path).as_posix()
        digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()


__all__ = ["SSHCluster", "SSHNode", "code_bundle", "tree_digest"]


def sftp_failed(node: str, what: str, exc: Exception) -> LaunchError:
    """The error for a failed SFTP copy; a server that refuses the SFTP subsystem gets a hint
    (OpenSSH answers "Session request failed" when sshd_config has no Subsystem sftp line)."""
    hint = None
    if (
        isinstance(exc, asyncssh.ChannelOpenError)
        and exc.code == asyncssh.OPEN_REQUEST_SESSION_FAILED
    ):
        hint = (
            "the node's SSH server refused the SFTP subsystem, which sentitop copies code and "
            "data with: enable it in the server's sshd_config (e.g. `Subsystem sftp "
            "internal-sftp`) and reload sshd"
        )
    return LaunchError(f"node {node}: {what} by SFTP failed: {exc}", hint=hint)

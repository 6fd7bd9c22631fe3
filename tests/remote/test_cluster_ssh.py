"""SSHCluster against a real OpenSSH server on 127.0.0.2 and 127.0.0.3 (see conftest.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import LaunchError
from engine.events import read_events
from remote.clusters import Command, NodeFailedError
from remote.clusters.local import free_port
from remote.clusters.ssh import SSHCluster, SSHNode
from tests.remote.conftest import LoopbackSSHD

PROBE = '''
"""All-reduce probe run by torchrun on every node of the tests."""
import hashlib, json, os, sys, time
import torch, torch.distributed as dist

def event(type_, **fields):
    print(json.dumps({"type": type_, "t": time.time(), **fields}), flush=True)

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
data = open(sys.argv[1], "rb").read()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
event("progress", rank=rank, world=world, sum=value.item(),
      digest=hashlib.sha256(data).hexdigest(), cwd=os.getcwd())
print(f"plain log line from rank {rank}", flush=True)
if len(sys.argv) > 2 and sys.argv[2] == "loop":
    with open(f"worker-{os.environ['LOCAL_RANK']}.pid", "w") as fh:
        fh.write(str(os.getpid()))
    while True:
        dist.all_reduce(value)
        time.sleep(0.2)
dist.destroy_process_group()
'''


def make_cluster(sshd: LoopbackSSHD, tmp: Path, **options: object) -> SSHCluster:
    nodes = [
        SSHNode(name=name, host=host, port=sshd.port, user=sshd.user, key=str(sshd.key))
        for name, host in zip(("a", "b"), sshd.hosts, strict=True)
    ]
    settings: dict[str, object] = {
        "python": sys.executable,
        "workdir": str(tmp / "workdir"),
        "known_hosts": sshd.known_hosts,
        "rdzv_port": free_port(sshd.hosts[0]),
        "connect_timeout": 10.0,
    }
    settings.update(options)
    return SSHCluster(nodes, **settings)  # type: ignore[arg-type]


@pytest.fixture
def probe_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "allreduce_probe.py").write_text(PROBE)
    (folder / "payload.bin").write_bytes(os.urandom(4096))
    return folder


async def _probe_commands(cluster: SSHCluster, probe: Path, *extra: str) -> dict[str, Command]:
    """Copy the probe folder to the nodes; torchrun commands running it."""
    paths = await cluster.put_data(probe)
    commands = cluster.torchrun_commands(
        "allreduce_probe", {n: [f"{paths[n]}/payload.bin", *extra] for n in cluster.nodes}
    )
    return {
        node: dataclasses.replace(
            cmd, env={**cmd.env, "PYTHONPATH": f"{paths[node]}:{cmd.env['PYTHONPATH']}"}
        )
        for node, cmd in commands.items()
    }


@pytest.mark.slow
async def test_two_node_torchrun_over_ssh_streams_events_and_logs(
    sshd: LoopbackSSHD, tmp_path: Path, probe_dir: Path
) -> None:
    run_dir = tmp_path / "runs" / "ssh-run-1"
    seen: list[tuple[str, str, bool]] = []
    async with make_cluster(sshd, tmp_path) as cluster:
        await cluster.start(run_dir)
        commands = await _probe_commands(cluster, probe_dir)
        results = await cluster.run(
            commands, on_line=lambda node, line, event: seen.append((node, line, event is not None))
        )
        assert cluster.rank0_node == "a"  # c10d orders nodes by address: 127.0.0.2 first
        code_dirs = {cluster.code_env(n)["PYTHONPATH"] for n in cluster.nodes}
    assert {r.exit_code for r in results.values()} == {0}
    events = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "progress"]
    assert sorted(e["node"] for e in events) == ["a", "b"]
    assert {e["world"] for e in events} == {2}
    assert {e["sum"] for e in events} == {3.0}  # 1 + 2 reduced across the two nodes
    digest = __import__("hashlib").sha256((probe_dir / "payload.bin").read_bytes()).hexdigest()
    assert {e["digest"] for e in events} == {digest}  # the data reached both nodes intact
    assert {Path(e["cwd"]).name for e in events} == {"a", "b"}  # each in its own run folder
    for node in ("a", "b"):
        log = (run_dir / "logs" / f"{node}.log").read_text()
        assert "plain log line from rank" in log
        assert '"type": "progress"' in log
        assert (
            node,
            next(line for n, line, _ in seen if n == node and "plain" in line),
            False,
        ) in seen
    assert any(is_event for _, _, is_event in seen)
    assert oct((run_dir / "events.jsonl").stat().st_mode & 0o777) == "0o600"
    (code_dir,) = code_dirs
    assert (Path(code_dir) / "engine" / "events.py").is_file()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def _group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


async def _wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout} s")
        await asyncio.sleep(0.2)


@pytest.mark.slow
async def test_killing_one_nodes_worker_stops_every_node_and_names_it(
    sshd: LoopbackSSHD, tmp_path: Path, probe_dir: Path
) -> None:
    run_dir = tmp_path / "runs" / "ssh-kill"
    async with make_cluster(sshd, tmp_path) as cluster:
        await cluster.start(run_dir)
        commands = await _probe_commands(cluster, probe_dir, "loop")
        task = asyncio.create_task(cluster.run(commands))
        dirs = {n: Path(cluster.node_dir(n)) for n in cluster.nodes}
        await asyncio.wait(
            [
                task,
                asyncio.ensure_future(
                    asyncio.gather(
                        _wait_for(dirs["a"] / "worker-0.pid", 120),
                        _wait_for(dirs["b"] / "worker-0.pid", 120),
                    )
                ),
            ],
            return_when=asyncio.FIRST_COMPLETED,
        )
        assert not task.done(), task.result()
        groups = {n: int((dirs[n] / "train.pid").read_text()) for n in cluster.nodes}
        assert all(_group_pids(pg) for pg in groups.values())
        os.kill(int((dirs["b"] / "worker-0.pid").read_text()), signal.SIGKILL)
        killed_at = time.monotonic()
        with pytest.raises(NodeFailedError) as caught:
            await asyncio.wait_for(task, 30)
        stopped_after = time.monotonic() - killed_at
    assert caught.value.node == "b"
    assert caught.value.exit_code != 0
    assert "node b (" in str(caught.value)
    assert stopped_after < 10
    deadline = time.monotonic() + 5
    while any(_group_pids(pg) for pg in groups.values()) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert {n: _group_pids(pg) for n, pg in groups.items()} == {"a": [], "b": []}
    errors = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "error"]
    assert [e["node"] for e in errors] == ["b"]


async def test_unknown_host_key_is_one_clear_error(sshd: LoopbackSSHD, tmp_path: Path) -> None:
    other = tmp_path / "known_hosts"
    other.write_text(
        "".join(
            f"[{h}]:{sshd.port} ssh-ed25519 "
            "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
            for h in sshd.hosts
        )
    )
    cluster = make_cluster(sshd, tmp_path, known_hosts=other)
    with pytest.raises(LaunchError) as caught:
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")
    text = caught.value.user_message()
    assert "node a: the host key of 127.0.0.2" in text
    assert "not trusted" in text and str(other) in text
    assert "ssh-keyscan" in text
    assert "also failing: node b" in text
    assert "Traceback" not in text


async def test_missing_known_hosts_file_is_a_clear_error(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    cluster = make_cluster(sshd, tmp_path, known_hosts=tmp_path / "nope")
    with pytest.raises(LaunchError, match=r"known_hosts file .*nope does not exist"):
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")


async def test_host_key_check_can_be_switched_off_explicitly(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    cluster = make_cluster(
        sshd, tmp_path, known_hosts=empty, check_host_keys=False, probe_torch=False
    )
    async with cluster:
        await cluster.start(tmp_path / "runs" / "r")
        results = await cluster.run({"a": Command(argv=("true",))}, stage="probe")
    assert results["a"].exit_code == 0


async def test_refused_auth_is_one_clear_error(sshd: LoopbackSSHD, tmp_path: Path) -> None:
    import subprocess

    stranger = tmp_path / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    cluster = make_cluster(sshd, tmp_path)
    cluster = SSHCluster(
        [dataclasses.replace(cluster.node(n), key=str(stranger)) for n in cluster.nodes],
        python=sys.executable,
        known_hosts=sshd.known_hosts,
    )
    with pytest.raises(LaunchError) as caught:
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")
    text = caught.value.user_message()
    assert f"node a: {sshd.user}@127.0.0.2:{sshd.port} refused authentication" in text
    assert "authorized_keys" in text


async def test_unreachable_host_is_one_clear_error(sshd: LoopbackSSHD, tmp_path: Path) -> None:
    port = free_port("127.0.0.2")  # nothing listens there
    nodes = [SSHNode(name="a", host="127.0.0.2", port=port, user=sshd.user, key=str(sshd.key))]
    cluster = SSHCluster(nodes, known_hosts=sshd.known_hosts, connect_timeout=5)
    with pytest.raises(LaunchError) as caught:
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")
    assert f"node a: cannot reach 127.0.0.2:{port}" in caught.value.message
    assert "sshd runs there" in (caught.value.hint or "")


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never says anything (a hung host)."""
    server = socket.socket()
    server.bind(("127.0.0.2", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


async def test_host_that_never_answers_times_out_clearly(
    sshd: LoopbackSSHD, tmp_path: Path, silent_server: int
) -> None:
    nodes = [
        SSHNode(name="a", host="127.0.0.2", port=silent_server, user=sshd.user, key=str(sshd.key))
    ]
    cluster = SSHCluster(nodes, known_hosts=sshd.known_hosts, connect_timeout=1.5)
    started = time.monotonic()
    with pytest.raises(LaunchError, match=r"no SSH answer within 1.5 s"):
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")
    assert time.monotonic() - started < 10


async def test_cancelling_a_run_kills_the_remote_process_group(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    cluster = make_cluster(sshd, tmp_path, probe_torch=False)
    async with cluster:
        await cluster.start(tmp_path / "runs" / "r")
        marker = Path(cluster.node_dir("b")) / "child.pid"
        script = f"sleep 300 & echo $! > {marker}; wait"
        task = asyncio.create_task(
            cluster.run(
                {
                    "a": Command(argv=("sleep", "300")),
                    "b": Command(argv=("sh", "-c", script)),
                },
                stage="sleepy",
            )
        )
        await _wait_for(marker, 30)
        child = int(marker.read_text())
        assert _alive(child)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < 10
    assert not _alive(child)


async def test_lost_connection_lets_the_watchdog_kill_the_remote_group(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    cluster = make_cluster(sshd, tmp_path, probe_torch=False)
    async with cluster:
        await cluster.start(tmp_path / "runs" / "r")
        marker = Path(cluster.node_dir("a")) / "child.pid"
        script = f"sleep 300 & echo $! > {marker}; wait"
        task = asyncio.create_task(
            cluster.run({"a": Command(argv=("sh", "-c", script))}, stage="orphan")
        )
        await _wait_for(marker, 30)
        child = int(marker.read_text())
        cluster._conns["a"].abort()  # as if the launcher vanished: no kill command is sent
        with pytest.raises(NodeFailedError, match=r"lost its connection|exited"):
            await asyncio.wait_for(task, 20)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert not _alive(child)

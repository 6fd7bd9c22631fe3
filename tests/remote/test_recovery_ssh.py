"""Managed runs over the real loopback sshd: a node lost mid-epoch, recovered by shrinking.

Node b is reached through a TCP relay (127.0.0.4 → the sshd) that the test controls: to lose
the node, the relay cuts every connection and from then on refuses new ones (it accepts and
closes at once, counting the attempts), and every process of node b is killed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.events import read_events
from remote import runner
from remote.clusters.local import free_port
from remote.profile import load_profile
from tests.remote.conftest import LoopbackSSHD

RELAY_HOST = "127.0.0.4"
CHECKPOINT_EVERY = 4

PROFILE = """\
name: rec-ssh
provider: ssh
python: {python}
workdir: {workdir}
shared_fs: true
known_hosts: {known_hosts}
nodes:
  - {{name: a, host: {host_a}, port: {port_a}, user: {user}, key: {key}, nproc: 1}}
  - {{name: b, host: {host_b}, port: {port_b}, user: {user}, key: {key}, nproc: 1}}
data:
  synthetic: {{size: 3MB, seed: 1}}
preprocess: {{vocab_size: 500, seq_len: 32}}
train:
  epochs: 2
  batch_size: 64
  log_every: 2
  checkpoint_every_min: 0
  checkpoint_every_steps: {every}
  threads: 1
  balance: {{emulate_s: 0.01}}  # sleep-based device time: the kill lands mid-epoch under load
recovery: {{on_node_loss: {policy}}}
"""


class Relay:
    """A TCP relay to sshd that can drop its connections and refuse new ones."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.refusing = False
        self.refused = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, RELAY_HOST, 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            self.refused += 1
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(1 << 16):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        """Drop every connection; refuse every later one."""
        self.refusing = True
        for writer in self.writers:
            writer.transport.abort()

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


def _node_processes(node: str, marker: str) -> list[int]:
    """Pids of this test's processes of ``node`` (its SENTITOP_NODE, our workdir's code)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SENTITOP_NODE={node}".encode() in environ and any(
            marker.encode() in item for item in environ
        ):
            found.append(int(entry.name))
    return found


async def _run(
    sshd: LoopbackSSHD, tmp_path: Path, policy: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[dict[str, Any]], Relay]:
    relay = Relay((sshd.hosts[1], sshd.port))
    relay_port = await relay.start()
    known_hosts = tmp_path / "known_hosts"
    key_line = sshd.known_hosts.read_text().splitlines()[0].split(" ", 1)[1]
    known_hosts.write_text(
        sshd.known_hosts.read_text() + f"[{RELAY_HOST}]:{relay_port} {key_line}\n"
    )
    workdir = tmp_path / "workdir"
    path = tmp_path / "rec-ssh.yaml"
    path.write_text(
        PROFILE.format(
            python=sys.executable, workdir=workdir, known_hosts=known_hosts, user=sshd.user,
            key=sshd.key, host_a=sshd.hosts[0], port_a=sshd.port, host_b=RELAY_HOST,
            port_b=relay_port, every=CHECKPOINT_EVERY, policy=policy,
        )
    )  # fmt: skip
    make = runner.make_cluster

    def make_cluster(profile: Any, **options: Any) -> Any:
        cluster = make(profile, **options)
        cluster.rdzv_port = free_port(sshd.hosts[0])  # not 29400: tests may run side by side
        return cluster

    monkeypatch.setattr(runner, "make_cluster", make_cluster)
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    events: list[dict[str, Any]] = []
    stored: list[int] = []
    killed: list[int] = []

    def on_event(event: dict[str, Any]) -> None:
        events.append(event)
        if event["type"] == "checkpoint_stored" and event.get("step"):
            stored.append(int(event["global_step"]))  # a mid-epoch checkpoint is safe here
        elif event["type"] == "step" and stored and not killed:
            if event["global_step"] < stored[-1] + 2:
                return  # not yet mid-epoch after that checkpoint
            relay.cut()
            for pid in _node_processes("b", str(workdir)):
                killed.append(pid)
                os.kill(pid, signal.SIGKILL)

    lines: list[tuple[str, str]] = []

    def on_line(node: str, line: str, event: dict[str, Any] | None) -> None:
        if event is None:
            lines.append((node, line))  # what `sentitop run` shows of the nodes' output

    try:
        outcome = await runner.execute_run(
            load_profile(path), runs_dir=tmp_path / "runs", on_event=on_event, on_line=on_line
        )
    finally:
        await relay.close()
    assert killed, "node b was never killed (no step after a stored mid-epoch checkpoint)"
    # the survivor's gloo error is one line, not its stack (twice: the rank's, the launcher's)
    shown = "\n".join(line for _, line in lines)
    assert "Traceback" not in shown and "lost the connection to another rank" in shown, shown
    return outcome, events, relay


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_shrink_finishes_on_node_a_after_node_b_vanishes(
    sshd: LoopbackSSHD, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome, events, relay = await _run(sshd, tmp_path, "shrink", monkeypatch)
    assert outcome.status == "ok", outcome.summary.get("reason")
    (recovery,) = [e for e in events if e["type"] == "recovery"]
    assert recovery["status"] == "ok" and recovery["lost"] == ["b"]
    assert recovery["action"] == "shrink" and recovery["cause"] == "connection_lost"
    assert (recovery["world_size_before"], recovery["world_size"]) == (2, 1)
    assert recovery["redone_steps"] <= CHECKPOINT_EVERY  # at most one checkpoint interval
    assert recovery["checkpoint"]["step"] > 0  # resumed mid-epoch, not at the epoch's start
    assert relay.refused == 0  # a shrunk run never calls the lost node again
    # the resumed run went on with one rank, on node a, to the last epoch
    starts = [e for e in events if e["type"] == "train_start"]
    assert [s["world_size"] for s in starts] == [2, 1]
    assert starts[1]["resumed_step"] == recovery["checkpoint"]["step"]
    assert [e["epoch"] for e in events if e["type"] == "epoch"][-1] == 1
    summary = outcome.summary
    assert summary["recoveries"] == 1 and summary["downtime_s"] > 0
    # it finished on 1 rank: said so, and kept out of fits and speedups (it read 2 workers)
    assert summary["world_size"] == 1 and summary["world_sizes"] == [2, 1]
    assert summary["recovery"]["events"][0]["lost"] == ["b"]
    assert "latest.pt" in summary["checkpoints"]
    # each attempt warned about its warm-up: the summary lists the warning once
    codes = [w["code"] for w in summary["warnings"]]
    assert codes.count("warmup_long") == 1 and len(codes) == len(set(codes)), codes
    # the run folder says the same, and the checkpoint survived on this machine
    on_disk = list(read_events(outcome.run_dir / "events.jsonl"))
    assert [e["type"] for e in on_disk].count("recovery") == 1
    assert (outcome.run_dir / "train" / "checkpoints" / "latest.pt").stat().st_size > 0
    assert ("b", "dropped") in [(e.get("node"), e.get("status")) for e in on_disk]


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_fail_policy_stops_the_run_naming_the_lost_node(
    sshd: LoopbackSSHD, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome, events, _ = await _run(sshd, tmp_path, "fail", monkeypatch)
    assert outcome.status == "failed"
    assert "node b" in outcome.summary["reason"]
    assert not [e for e in events if e["type"] == "recovery"]
    assert outcome.summary["recoveries"] == 0

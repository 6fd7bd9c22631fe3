"""EC2Cluster: moto instances used through the loopback sshd; teardown on every exit path."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from engine.errors import LaunchError
from engine.events import read_events
from remote.clusters import Command
from remote.clusters.ec2 import (
    EC2Cluster,
    InstanceGroupSpec,
    host_keys_from_console,
    known_hosts_lines,
)
from tests.remote.aws.conftest import FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN, running_tagged

pytestmark = pytest.mark.aws

ROOT = Path(__file__).resolve().parents[3]


def loopback_cluster(sshd, tmp_path: Path, ami: str, groups=None, **options) -> EC2Cluster:
    """An EC2Cluster whose instances are reached at the loopback sshd's addresses."""
    hosts = itertools.cycle(sshd.hosts)
    assigned: dict[str, str] = {}

    def address_for(inst):
        return assigned.setdefault(inst.id, next(hosts)), sshd.port

    groups = groups or [
        InstanceGroupSpec(instance_type="g5.xlarge", ami=ami, count=1),
        InstanceGroupSpec(instance_type="g4dn.xlarge", ami=ami, count=1, spot=True),
    ]
    kwargs = dict(
        users=[sshd.user] * len(groups),
        keys=[str(sshd.key)] * len(groups),
        nproc=[1] * len(groups),
        address_for=address_for,
        known_hosts=sshd.known_hosts,
        python=sys.executable,
        workdir=str(tmp_path / "nodes"),
        probe_torch=False,
        poll_s=0.05,
    )
    kwargs.update(options)
    return EC2Cluster(groups, **kwargs)


@pytest.mark.slow
async def test_instances_run_commands_over_ssh_and_are_terminated_on_exit(
    sshd, ec2, ami, run_id, tmp_path: Path
) -> None:
    run_dir = tmp_path / run_id
    cluster = loopback_cluster(sshd, tmp_path, ami)
    assert cluster.nodes == ["g5.xlarge-0", "g4dn.xlarge-0"]
    lines: list[str] = []
    async with cluster:
        await cluster.start(run_dir)
        live = running_tagged(ec2, run_id)
        assert len(live) == 2
        code = "import sys; print('hello from', sys.argv[1])"
        commands = {n: Command(argv=(sys.executable, "-c", code, n)) for n in cluster.nodes}
        results = await cluster.run(
            commands, on_line=lambda node, line, event: lines.append(line), stage="smoke"
        )
        assert {r.exit_code for r in results.values()} == {0}
        assert "(i-" in cluster.describe("g4dn.xlarge-0")
    assert running_tagged(ec2, run_id) == []
    assert sorted(cluster.fleet.terminated) == sorted(live)
    assert any("hello from g5.xlarge-0" in line for line in lines)
    assert any("hello from g4dn.xlarge-0" in line for line in lines)
    events = list(read_events(run_dir / "events.jsonl"))
    terminated = {e["node"] for e in events if e.get("status") == "terminated"}
    assert terminated == set(live)
    spot = [e for e in events if e.get("status") == "launching" and e.get("spot")]
    assert [e["instance_type"] for e in spot] == ["g4dn.xlarge"]
    ran = {e["node"]: e.get("instance") for e in events if e.get("status") == "running"}
    assert {ran[n] for n in cluster.nodes} == set(live)  # each node's events name its instance
    from tui.model import RunState

    state = RunState()  # the dashboard: one row per machine (it showed instance and node rows)
    state.ingest_many(events)
    assert sorted(state.nodes) == sorted(cluster.nodes)
    assert {n.status for n in state.nodes.values()} == {"terminated"}
    for path in run_dir.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            for secret in (FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN):
                assert secret not in text, f"{secret} leaked into {path}"


@pytest.mark.slow
async def test_an_exception_inside_the_block_still_terminates(
    sshd, ec2, ami, run_id, tmp_path: Path
) -> None:
    cluster = loopback_cluster(sshd, tmp_path, ami)
    with pytest.raises(RuntimeError, match="boom"):
        async with cluster:
            await cluster.start(tmp_path / run_id)
            assert len(running_tagged(ec2, run_id)) == 2
            raise RuntimeError("boom")
    assert running_tagged(ec2, run_id) == []


async def test_cancel_while_waiting_for_ssh_terminates(
    ec2, ami, run_id, dead_port, tmp_path: Path
) -> None:
    groups = [InstanceGroupSpec(instance_type="m5.large", ami=ami, count=3)]
    cluster = EC2Cluster(
        groups,
        users=["ubuntu"],
        keys=[None],
        nproc=[1],
        poll_s=0.05,
        address_for=lambda inst: dead_port,
        known_hosts=tmp_path / "kh",
    )

    async def provision() -> None:
        async with cluster:
            await cluster.start(tmp_path / run_id)

    task = asyncio.create_task(provision())
    deadline = time.monotonic() + 30
    while len(running_tagged(ec2, run_id)) < 3:
        assert time.monotonic() < deadline and not task.done()
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert running_tagged(ec2, run_id) == []


async def test_no_host_keys_in_console_is_a_clear_error_and_terminates(
    ec2, ami, run_id, ssh_banner, tmp_path: Path
) -> None:
    # no known_hosts given and checks on: keys must come from the console (moto has none)
    groups = [InstanceGroupSpec(instance_type="m5.large", ami=ami)]
    cluster = EC2Cluster(
        groups,
        users=["ubuntu"],
        keys=[None],
        nproc=[1],
        poll_s=0.05,
        ready_timeout_s=0.5,
        address_for=lambda inst: ssh_banner,
    )
    with pytest.raises(LaunchError, match="no SSH host keys in its console output"):
        async with cluster:
            await cluster.start(tmp_path / run_id)
    assert running_tagged(ec2, run_id) == []


async def test_host_key_wait_ends_at_the_launch_deadline_not_a_second_timeout(
    ec2, ami, run_id, ssh_banner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SSH answers just as ready_timeout runs out: the wait for console host keys must not start
    # a second ready_timeout (the profile promises one bound from launch to keys shown)
    from remote.clusters import ec2 as ec2_module
    from remote.clusters.ec2_fleet import EC2Fleet

    wait_ssh, console_output = EC2Fleet._wait_ssh, ec2_module._console_output
    reads: list[str] = []

    async def ssh_answers_at_the_deadline(self: EC2Fleet, instances) -> None:  # type: ignore[no-untyped-def]
        await wait_ssh(self, instances)
        self.deadline = time.monotonic()

    def counted(client, instance_id: str) -> str:  # type: ignore[no-untyped-def]
        reads.append(instance_id)
        return console_output(client, instance_id)

    monkeypatch.setattr(EC2Fleet, "_wait_ssh", ssh_answers_at_the_deadline)
    monkeypatch.setattr(ec2_module, "_console_output", counted)
    groups = [InstanceGroupSpec(instance_type="m5.large", ami=ami)]
    cluster = EC2Cluster(
        groups,
        users=["ubuntu"],
        keys=[None],
        nproc=[1],
        poll_s=0.05,
        ready_timeout_s=120,
        address_for=lambda inst: ssh_banner,
    )
    with pytest.raises(LaunchError, match=r"within 120 s of its launch \(ready_timeout\)"):
        async with cluster:
            await cluster.start(tmp_path / run_id)
    assert len(reads) == 1  # looked once, then gave up: the deadline had passed
    assert running_tagged(ec2, run_id) == []


def test_host_keys_are_read_from_cloud_init_console_output() -> None:
    console = textwrap.dedent("""\
        [   12.3] cloud-init[1021]: Generating public/private ed25519 key pair.
        -----BEGIN SSH HOST KEY KEYS-----
        ecdsa-sha2-nistp256 AAAAE2VjZHNh root@ip-10-0-0-5
        ssh-ed25519 AAAAC3NzaC1lZDI1 root@ip-10-0-0-5
        -----END SSH HOST KEY KEYS-----
        garbage ssh-rsa AAAAB3 after the block
        """)
    keys = host_keys_from_console(console)
    assert keys == ["ecdsa-sha2-nistp256 AAAAE2VjZHNh", "ssh-ed25519 AAAAC3NzaC1lZDI1"]
    assert host_keys_from_console("booting...") == []
    assert known_hosts_lines("54.1.2.3", 22, keys[1:]) == ["54.1.2.3 ssh-ed25519 AAAAC3NzaC1lZDI1"]
    assert known_hosts_lines("::1", 2222, keys[1:]) == ["[::1]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1"]


SIGINT_SCRIPT = """
import asyncio, sys
from remote.clusters.ec2 import EC2Cluster, InstanceGroupSpec

async def main():
    groups = [InstanceGroupSpec(instance_type="g5.xlarge", ami=sys.argv[2], count=2),
              InstanceGroupSpec(instance_type="g4dn.xlarge", ami=sys.argv[2], spot=True)]
    dead = ("127.0.0.1", int(sys.argv[3]))
    cluster = EC2Cluster(groups, users=["ubuntu"] * 2, keys=[None] * 2, nproc=[1, 1],
                         poll_s=0.05, address_for=lambda inst: dead, known_hosts=sys.argv[4])
    async with cluster:
        await cluster.start(sys.argv[1])

try:
    asyncio.run(main())
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.slow
def test_sigint_during_provisioning_leaves_no_instance(
    aws_env, ec2, ami, run_id, dead_port, tmp_path: Path
) -> None:
    script = tmp_path / "provision.py"
    script.write_text(SIGINT_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(script),
            str(tmp_path / run_id),
            ami,
            str(dead_port[1]),
            str(tmp_path / "known_hosts"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(running_tagged(ec2, run_id)) < 3:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "instances never started"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert running_tagged(ec2, run_id) == []


async def test_a_group_failing_to_launch_terminates_the_groups_already_started(
    ec2, ami, run_id, dead_port, tmp_path: Path
) -> None:
    from engine.errors import CloudError

    groups = [
        InstanceGroupSpec(instance_type="m5.large", ami=ami, count=2),
        InstanceGroupSpec(instance_type="g5.xlarge", ami=ami, subnet="subnet-0bad"),
    ]
    cluster = EC2Cluster(
        groups,
        users=["ubuntu"] * 2,
        keys=[None] * 2,
        nproc=[1, 1],
        poll_s=0.05,
        address_for=lambda inst: dead_port,
        known_hosts=tmp_path / "kh",
    )
    with pytest.raises(CloudError, match=r"nodes\[1\]"):
        async with cluster:
            await cluster.start(tmp_path / run_id)
    assert len(cluster.fleet.terminated) == 2
    assert running_tagged(ec2, run_id) == []

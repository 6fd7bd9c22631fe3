"""The dead man's switch on EC2 nodes (moto instances through the loopback sshd): an instance
whose launcher goes silent shuts itself down; a normal stop disarms it first."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from remote.clusters.dead_man import DeadMan
from remote.profile import load_profile
from tests.remote.aws.test_ec2_cluster import loopback_cluster

pytestmark = pytest.mark.aws


async def _until(done, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if done():
            return True
        await asyncio.sleep(0.1)
    return bool(done())


LIMIT_S = 8.0
"""The tests' lease: renewed every 1.6 s, so a loaded machine delaying a renewal by seconds
does not fire the switch (the real default is 10 minutes)."""


def _switch(tmp_path: Path) -> tuple[Path, DeadMan]:
    """A folder the harmless stand-in for shutdown marks (one file per instance), the switch."""
    marks = tmp_path / "marks"
    marks.mkdir()
    return marks, DeadMan(limit_s=LIMIT_S, shutdown_argv=("sh", "-c", f'touch "{marks}/$$"'))


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_silent_launcher_makes_its_instances_shut_down(
    sshd, ec2, ami, run_id, tmp_path: Path
) -> None:
    """A launcher killed by SIGKILL left its instances billing (nothing ran its teardown)."""
    marks, switch = _switch(tmp_path)
    cluster = loopback_cluster(sshd, tmp_path, ami, dead_man=switch)
    async with cluster:
        await cluster.start(tmp_path / run_id)
        assert not await _until(lambda: any(marks.iterdir()), 2 * LIMIT_S)  # renewed
        assert cluster._renewals is not None
        cluster._renewals.cancel()  # the launcher goes silent (its process killed)
        assert await _until(lambda: len(list(marks.iterdir())) == 2, 4 * LIMIT_S)  # both


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_normal_stop_disarms_the_switch(sshd, ec2, ami, run_id, tmp_path: Path) -> None:
    marks, switch = _switch(tmp_path)
    cluster = loopback_cluster(sshd, tmp_path, ami, dead_man=switch)
    async with cluster:
        await cluster.start(tmp_path / run_id)
        pids = lambda: list((tmp_path / "nodes").rglob("dead-man.lease.pid"))  # noqa: E731
        assert await _until(lambda: len(pids()) == 2, 5.0)  # both loops started
    assert not list((tmp_path / "nodes").rglob("dead-man.lease.pid"))  # loops ended
    await asyncio.sleep(LIMIT_S + 3.0)  # past the limit: nobody renews, nothing shuts down
    assert not any(marks.iterdir())


def test_profiles_arm_it_by_default_and_the_test_seam_never_does(tmp_path: Path) -> None:
    from remote.clusters.ec2 import EC2Cluster

    path = tmp_path / "p.yaml"
    path.write_text(
        "name: g5\nprovider: ec2\nregion: us-east-1\nshutdown_unwatched_after: 15m\n"
        "data: {synthetic: {size: 1MB}}\n"
        "nodes:\n  - {instance_type: g5.xlarge, ami: ami-12345678}\n"
    )
    profile = load_profile(path)
    assert profile.shutdown_unwatched_after == 900
    real = EC2Cluster.from_profile(profile)
    assert real.dead_man is not None and real.dead_man.limit_s == 900
    seam = EC2Cluster.from_profile(profile, address_for=lambda inst: ("127.0.0.1", 22))
    assert seam.dead_man is None  # loopback "instances" are this machine: never shut it down
    path.write_text(path.read_text().replace("15m", "null"))
    assert EC2Cluster.from_profile(load_profile(path)).dead_man is None


def test_the_real_shutdown_is_never_armed_on_a_loopback_node() -> None:
    from remote.clusters.ec2 import _loopback

    assert _loopback("127.0.0.2") and _loopback("localhost") and _loopback("::1")
    assert not _loopback("10.0.0.5") and not _loopback("ec2-1-2-3-4.compute.amazonaws.com")


@pytest.mark.timeout(120)
async def test_a_node_without_the_loops_tools_is_named_and_left_unarmed(
    sshd, ec2, ami, run_id, tmp_path: Path
) -> None:
    """An AMI without setsid (or stat -c, or passwordless sudo) armed nothing and said nothing:
    the user believed a killed launcher's instances would shut down."""
    from engine.events import read_events

    _, switch = _switch(tmp_path)
    lacking = DeadMan(switch.limit_s, switch.shutdown_argv, tools=("setsid", "no-such-tool-x"))
    cluster = loopback_cluster(sshd, tmp_path, ami, dead_man=lacking)
    async with cluster:
        await cluster.start(tmp_path / run_id)
        assert not list((tmp_path / "nodes").rglob("dead-man.lease.pid"))  # no loop started
    warned = [e for e in read_events(tmp_path / run_id / "events.jsonl")
              if e.get("code") == "dead_man_unarmed"]  # fmt: skip
    assert sorted(e["node"] for e in warned) == sorted(cluster.nodes)
    assert all("lacks no-such-tool-x:" in e["message"] for e in warned)
    assert all("keeps billing" in e["message"] for e in warned)


def test_the_probe_names_only_what_is_missing() -> None:
    import subprocess

    def probe(switch: DeadMan) -> str:
        return subprocess.run(["sh", "-c", switch.probe_command()], capture_output=True,
                              text=True, check=True).stdout  # fmt: skip

    harmless = ("true",)
    assert probe(DeadMan(shutdown_argv=harmless)) == ""  # this machine has them all
    assert probe(DeadMan(shutdown_argv=harmless, tools=("sh", "no-such-tool-x"))).split() == [
        "no-such-tool-x"
    ]

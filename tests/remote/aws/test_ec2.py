"""EC2 provisioning (EC2Fleet) against moto's server: tags, spot, SSH wait, termination."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from engine.errors import CloudError, LaunchError
from engine.events import Emitter, JsonlFileSink, read_events
from remote import aws
from remote.clusters.ec2_fleet import (
    EC2Fleet,
    InstanceGroupSpec,
    launch_params,
    sweep_orphans,
    wait_for_ssh,
)
from tests.remote.aws.conftest import FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN, running_tagged

pytestmark = pytest.mark.aws


def fleet(groups, run_id, addr, **kw) -> EC2Fleet:
    return EC2Fleet(groups, run_id=run_id, address_for=lambda inst: addr, poll_s=0.05, **kw)


def test_launch_params_on_demand_and_spot() -> None:
    on_demand = InstanceGroupSpec(
        instance_type="g5.xlarge",
        ami="ami-1",
        count=3,
        key_name="k",
        subnet="subnet-1",
        security_group="sg-1",
    )
    p = launch_params(on_demand, "run-7", 0, "tok")
    assert (p["MinCount"], p["MaxCount"], p["InstanceType"]) == (3, 3, "g5.xlarge")
    assert "InstanceMarketOptions" not in p
    assert p["SubnetId"] == "subnet-1" and p["SecurityGroupIds"] == ["sg-1"] and p["KeyName"] == "k"
    tags = {t["Key"]: t["Value"] for t in p["TagSpecifications"][0]["Tags"]}
    assert tags[aws.RUN_ID_TAG] == "run-7"
    assert {s["ResourceType"] for s in p["TagSpecifications"]} == {"instance", "volume"}
    spot = launch_params(
        InstanceGroupSpec(instance_type="g4dn.xlarge", ami="ami-1", spot=True, spot_max_price=0.25),
        "run-7",
        1,
        "tok",
    )
    market = spot["InstanceMarketOptions"]
    assert market["MarketType"] == "spot"
    assert market["SpotOptions"]["MaxPrice"] == "0.2500"
    assert spot["ClientToken"] != p["ClientToken"]


def test_group_spec_from_profile_node_accepts_price_as_spot() -> None:
    class Node:
        instance_type, ami, count, spot = "g5.xlarge", "ami-1", 2, 0.4

    spec = InstanceGroupSpec.from_node(Node())
    assert spec.spot and spec.spot_max_price == 0.4 and spec.count == 2
    with pytest.raises(CloudError, match="count"):
        InstanceGroupSpec(instance_type="g5.xlarge", ami="ami-1", count=0)


@pytest.mark.slow
async def test_fleet_launches_tagged_on_demand_and_spot_then_terminates(
    ec2, ami, ssh_banner, tmp_path: Path, run_id: str
) -> None:
    sink = JsonlFileSink(tmp_path / "events.jsonl")
    groups = [
        InstanceGroupSpec(instance_type="g5.xlarge", ami=ami, count=2),
        InstanceGroupSpec(instance_type="g4dn.xlarge", ami=ami, count=1, spot=True),
    ]
    f = fleet(groups, run_id, ssh_banner, emitter=Emitter(sink))
    instances = await f.launch()
    assert [i.instance_type for i in instances] == ["g5.xlarge", "g5.xlarge", "g4dn.xlarge"]
    assert [i.spot for i in instances] == [False, False, True]
    assert [i.group for i in instances] == [0, 0, 1]
    assert sorted(running_tagged(ec2, run_id)) == sorted(i.id for i in instances)
    raw = ec2.describe_instances(InstanceIds=[instances[2].id])["Reservations"][0]["Instances"][0]
    assert raw.get("InstanceLifecycle") == "spot"

    terminated = await f.terminate_all()
    assert sorted(terminated) == sorted(i.id for i in instances)
    assert running_tagged(ec2, run_id) == []
    sink.close()
    statuses = [(e["node"], e["status"]) for e in read_events(tmp_path / "events.jsonl")]
    for inst in instances:
        order = [s for n, s in statuses if n == inst.id]
        assert order == ["launching", "running", "ready", "terminated"]
    text = (tmp_path / "events.jsonl").read_text()
    for secret in (FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN):
        assert secret not in text


@pytest.mark.slow
async def test_sweep_orphans_only_touches_its_run(ec2, ami, ssh_banner, run_id) -> None:
    mine = fleet(
        [InstanceGroupSpec(instance_type="m5.large", ami=ami, count=2)], run_id, ssh_banner
    )
    other = fleet(
        [InstanceGroupSpec(instance_type="m5.large", ami=ami)], run_id + "-other", ssh_banner
    )
    await mine.launch()
    await other.launch()
    swept = sweep_orphans(run_id)
    assert sorted(swept) == sorted(i.id for i in mine.instances)
    assert running_tagged(ec2, run_id) == []
    assert running_tagged(ec2, run_id + "-other") == [other.instances[0].id]
    assert sweep_orphans(run_id) == []


async def test_ssh_never_answering_raises_and_teardown_leaves_nothing(ec2, ami, run_id) -> None:
    # a port nobody listens on: connection refused until the deadline
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[:2]
    f = fleet(
        [InstanceGroupSpec(instance_type="m5.large", ami=ami, count=2)],
        run_id,
        dead,
        ready_timeout_s=0.3,
    )
    with pytest.raises(LaunchError) as info:
        await f.launch()
    # one message naming every silent instance, the wait, and what to check
    message, hint = info.value.message, info.value.hint or ""
    assert message.startswith("2 of 2 instance(s) did not answer SSH within 0.3 s")
    assert "(ready_timeout)" in message and "\n" not in message
    for inst in f.running:
        assert f"{inst.id} (m5.large, nodes[0]) at {dead[0]}:{dead[1]}: Connection" in message
    for what in ("security group", "TCP port 22", "console output", "key pair", "nodes[].user"):
        assert what in hint
    assert len(running_tagged(ec2, run_id)) == 2
    await f.terminate_all()
    assert running_tagged(ec2, run_id) == []


async def test_each_instance_is_reported_as_it_reaches_running_before_ssh(
    ec2, ami, run_id, dead_port
) -> None:
    """Billing's cue: every instance is handed to on_running once it runs, though its SSH
    never answers (EC2 bills from running; the SSH wait is part of the bill)."""
    reported: list[tuple[str, float]] = []

    async def on_running(inst) -> None:
        assert running_tagged(ec2, run_id) and inst.id in running_tagged(ec2, run_id)
        reported.append((inst.id, inst.launched_at))

    f = fleet(
        [InstanceGroupSpec(instance_type="m5.large", ami=ami, count=2)],
        run_id,
        dead_port,
        ready_timeout_s=0.3,
        on_running=on_running,
    )
    with pytest.raises(LaunchError, match="did not answer SSH"):
        await f.launch()
    assert sorted(i for i, _ in reported) == sorted(i.id for i in f.running)
    assert len(reported) == 2 and all(at > 0 for _, at in reported)
    await f.terminate_all()
    assert running_tagged(ec2, run_id) == []


async def test_wait_for_ssh_rejects_a_non_ssh_banner() -> None:
    async def http(reader, writer):
        writer.write(b"HTTP/1.0 400 Bad\r\n")
        writer.close()

    server = await asyncio.start_server(http, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    with pytest.raises(LaunchError, match="unexpected banner"):
        await wait_for_ssh(host, port, timeout=0.2, poll_s=0.05)
    server.close()


async def test_bad_subnet_is_a_cloud_error_naming_the_group_without_credentials(
    ec2, ami, run_id
) -> None:
    f = fleet(
        [InstanceGroupSpec(instance_type="m5.large", ami=ami, subnet="subnet-0nope")],
        run_id,
        ("127.0.0.1", 1),
    )
    with pytest.raises(CloudError) as info:
        await f.launch()
    message = info.value.user_message()
    assert "nodes[0]" in message and "m5.large" in message
    for secret in (FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN):
        assert secret not in message


class _SlowRunInstances:
    """Wraps an EC2 client: run_instances really runs, then blocks until released."""

    def __init__(self, client) -> None:
        self._client = client
        self.called = threading.Event()
        self.release = threading.Event()

    def run_instances(self, **kwargs):
        reply = self._client.run_instances(**kwargs)
        self.called.set()
        self.release.wait(10)
        return reply

    def __getattr__(self, name):
        return getattr(self._client, name)


async def test_cancel_while_run_instances_in_flight_terminates_what_it_creates(
    ec2, ami, run_id
) -> None:
    slow = _SlowRunInstances(ec2)
    f = EC2Fleet(
        [InstanceGroupSpec(instance_type="m5.large", ami=ami, count=3)],
        run_id=run_id,
        ec2=slow,
        poll_s=0.05,
    )

    async def provision() -> None:
        try:
            await f.launch()
        finally:
            await f.terminate_all()

    task = asyncio.create_task(provision())
    await asyncio.to_thread(slow.called.wait, 10)
    assert len(running_tagged(ec2, run_id)) == 3  # created, reply not back yet
    task.cancel()
    await asyncio.sleep(0.1)
    assert not task.done()  # teardown waits for the in-flight call
    slow.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert running_tagged(ec2, run_id) == []
    assert len(f.terminated) == 3


async def test_no_credentials_is_the_launch_error_not_a_failed_teardown(
    aws_env, ami, run_id, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """run_instances refused before it was sent: nothing exists, so the user reads why the
    launch failed (it read 'could not terminate the instances … terminate them by hand')."""
    from remote.clusters.ec2 import EC2Cluster

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    cluster = EC2Cluster(
        [InstanceGroupSpec(instance_type="g5.xlarge", ami=ami)], users=[None], keys=[None],
        nproc=[1], known_hosts=str(tmp_path / "known_hosts"), poll_s=0.05,
    )  # fmt: skip
    with pytest.raises(CloudError) as info:
        async with cluster:
            await cluster.start(tmp_path / run_id)
    message = info.value.message
    assert message.startswith("could not start 1 on-demand g5.xlarge instance(s) (nodes[0])")
    assert "no AWS credentials found" in message and "terminate" not in message
    assert cluster.fleet is not None and await cluster.fleet.terminate_all() == []


class _AWSGoesAway:
    """An EC2 client whose instances start, after which AWS stops answering."""

    def __init__(self, client) -> None:
        self._client = client

    def describe_instances(self, **kwargs):
        from botocore.exceptions import EndpointConnectionError

        raise EndpointConnectionError(endpoint_url="https://ec2.us-east-1.amazonaws.com/")

    terminate_instances = describe_instances

    def __getattr__(self, name):
        return getattr(self._client, name)


async def test_a_failed_teardown_after_a_failed_launch_says_both(
    ec2, ami, run_id, tmp_path: Path
) -> None:
    """Only the teardown's failure was said: the reason the launch failed was lost."""
    from remote.clusters.ec2 import EC2Cluster

    cluster = EC2Cluster(
        [InstanceGroupSpec(instance_type="m5.large", ami=ami)], users=[None], keys=[None],
        nproc=[1], known_hosts=str(tmp_path / "known_hosts"), poll_s=0.05,
        ec2=_AWSGoesAway(ec2), ready_timeout_s=1.0,
    )  # fmt: skip
    try:
        with pytest.raises(LaunchError) as info:
            async with cluster:
                await cluster.start(tmp_path / run_id)
    finally:
        aws_ids = running_tagged(ec2, run_id)
        ec2.terminate_instances(InstanceIds=aws_ids)
    message = info.value.message
    assert len(aws_ids) == 1 and aws_ids[0] in message
    assert message.startswith(f"could not terminate the instances of run {run_id}")
    first = message.split("; it was tearing down after: ", 1)[1]
    assert "ready_timeout" in first  # why the launch failed (its SSH never answered)
    assert "Could not connect to the endpoint URL" in message.split(first)[0]
    assert info.value.leftovers and f"sentitop teardown {run_id}" in (info.value.hint or "")

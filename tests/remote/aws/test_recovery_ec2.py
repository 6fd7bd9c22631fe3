"""Managed runs on EC2 (moto server + the loopback sshd): a spot node group trains, loses a node
(instance terminated, or an interruption notice from a fake metadata endpoint), and a
replacement tagged with the run id takes over; every instance is gone at the end — also when
the recovery itself fails."""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine.errors import LaunchError
from engine.events import Emitter
from remote.clusters.ec2 import EC2Cluster, InstanceGroupSpec
from remote.clusters.ec2_fleet import describe_tagged
from remote.clusters.local import free_port
from remote.cost import CostMeter
from remote.datasets import PreparedData
from remote.pricing import PriceBook, load_catalog
from remote.profile import load_profile
from remote.recovery import RecoveryLedger
from remote.train_stage import TrainContext, run_training
from tests.remote.aws.conftest import REGION, running_tagged

pytestmark = pytest.mark.aws

PROFILE = """\
name: rec-ec2
provider: ec2
region: us-east-1
nodes:
  - {{instance_type: g4dn.xlarge, count: 2, spot: true, ami: {ami}}}
data: {{synthetic: {{size: 1MB}}}}
train:
  epochs: 2
  batch_size: 32
  log_every: 2
  checkpoint_every_min: 0
  checkpoint_every_steps: {every}
  threads: 1
  balance: {{emulate_s: 0.01}}  # 0.16 s a step whatever the load: a notice lands mid-epoch
recovery: {{on_node_loss: replace, max_restarts: 2, spot_poll_s: 1}}
"""


class ListSink:
    """Keeps every event (the run's events.jsonl stand-in) and calls ``hook`` on each."""

    def __init__(self, hook: Callable[[dict[str, Any]], None]) -> None:
        self.events: list[dict[str, Any]] = []
        self.hook = hook

    def write(self, event: dict[str, Any]) -> None:
        self.events.append(dict(event))
        self.hook(dict(event))

    def close(self) -> None:
        pass


class FakeMetadata:
    """IMDSv2 on loopback: a token, then 404 for spot/instance-action until :meth:`notice`,
    which makes the next poll (one only: the notice is for one instance) answer it."""

    def __init__(self) -> None:
        self.pending = False
        self.served = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_PUT(self) -> None:
                self._reply(200, b"fake-token")

            def do_GET(self) -> None:
                if self.path.endswith("/spot/instance-action") and owner.pending:
                    owner.pending = False
                    owner.served += 1
                    self._reply(200, b'{"action": "terminate", "time": "2026-11-24T04:00:00Z"}')
                else:
                    self._reply(404, b"Not Found")

            def _reply(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def notice(self) -> None:
        self.pending = True


@pytest.fixture
def metadata() -> Iterator[FakeMetadata]:
    fake = FakeMetadata()
    yield fake
    fake.server.shutdown()


@pytest.fixture
def dataset(tmp_path: Path) -> PreparedData:
    from tests.train.conftest import write_dataset

    folder = write_dataset(tmp_path / "dataset", n_train=2048, n_test=64, seq_len=12)
    return PreparedData(dataset_dir=folder, cached=False, stats={})


def _cluster(sshd, tmp_path: Path, ami: str, *, dead_after: int | None = None, **options):
    """Two spot instances reached at the loopback sshd; instances after the first
    ``dead_after`` are reached nowhere (their SSH never answers)."""
    hosts = itertools.cycle(sshd.hosts)
    assigned: dict[str, tuple[str, int]] = {}

    def address_for(inst):
        if inst.id not in assigned:
            dead = dead_after is not None and len(assigned) >= dead_after
            assigned[inst.id] = ("127.0.0.1", free_port()) if dead else (next(hosts), sshd.port)
        return assigned[inst.id]

    groups = [InstanceGroupSpec(instance_type="g4dn.xlarge", ami=ami, count=2, spot=True)]
    settings = dict(
        users=[sshd.user], keys=[str(sshd.key)], nproc=[1], address_for=address_for,
        known_hosts=sshd.known_hosts, python=sys.executable, workdir=str(tmp_path / "nodes"),
        probe_torch=False, poll_s=0.05, rdzv_port=free_port(sshd.hosts[0]),
        ready_timeout_s=20.0,
    )  # fmt: skip
    settings.update(options)
    return EC2Cluster(groups, **settings)


async def _train(
    cluster: EC2Cluster,
    tmp_path: Path,
    run_id: str,
    ami: str,
    dataset: PreparedData,
    on_event: Callable[[dict[str, Any], EC2Cluster], None],
    every: int = 4,
) -> tuple[TrainContext, ListSink, BaseException | None]:
    profile_path = tmp_path / "rec-ec2.yaml"
    profile_path.write_text(PROFILE.format(ami=ami, every=every))
    profile = load_profile(profile_path)
    run_dir = tmp_path / run_id
    run_dir.mkdir()
    sink = ListSink(lambda event: on_event(event, cluster))
    book = PriceBook.from_catalog(load_catalog(), REGION)
    ctx = TrainContext(
        profile=profile, train=profile.to_train_config("", run_dir / "train"), run_dir=run_dir,
        emitter=Emitter(sink, run=run_id), sink=sink, meter=CostMeter(), book=book,
        on_line=None, ledger=RecoveryLedger(profile.recovery, run_started=time.time()),
    )  # fmt: skip
    error: BaseException | None = None
    try:
        async with cluster:
            await run_training(ctx, cluster, dataset)
    except LaunchError as exc:
        error = exc
    return ctx, sink, error


def _after_mid_epoch_checkpoint(event: dict[str, Any], seen: list[int]) -> bool:
    """True once a step follows a stored mid-epoch checkpoint (the moment to lose a node)."""
    if event["type"] == "checkpoint_stored" and event.get("step"):
        seen.append(int(event["global_step"]))
    return event["type"] == "step" and bool(seen) and event["global_step"] >= seen[-1] + 2


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_terminated_spot_instance_is_replaced_and_everything_is_terminated(
    sshd, ec2, ami, run_id, tmp_path: Path, dataset: PreparedData
) -> None:
    seen: list[int] = []
    victim: list[str] = []

    def on_event(event: dict[str, Any], cluster: EC2Cluster) -> None:
        if not victim and _after_mid_epoch_checkpoint(event, seen):
            inst = cluster.instance_of(cluster.nodes[1])
            victim.append(inst.id)
            ec2.terminate_instances(InstanceIds=[inst.id])  # as AWS reclaiming it would

    cluster = _cluster(sshd, tmp_path, ami)
    ctx, sink, error = await _train(cluster, tmp_path, run_id, ami, dataset, on_event)
    assert error is None, error
    (recovery,) = [e for e in sink.events if e["type"] == "recovery"]
    assert recovery["status"] == "ok" and recovery["action"] == "replace"
    assert recovery["cause"] == "instance_terminated" and victim[0] in recovery["detail"]
    (new,) = recovery["replacements"]
    assert new.endswith("-r1") and recovery["world_size"] == 2
    # the replacement was a new instance of the run, tagged with its id, and it trained
    tagged = describe_tagged(ec2, run_id, ("pending", "running", "shutting-down", "terminated"))
    assert len(tagged) == 3
    assert [e["epoch"] for e in sink.events if e["type"] == "epoch"][-1] == 1
    assert any(e["type"] == "rank_start" and e.get("node") == new for e in sink.events)
    assert running_tagged(ec2, run_id) == []
    # every node was billed as spot, at the live price of its zone; the lost one stopped early
    lines = {line["name"]: line for line in ctx.meter.summary()["lines"]}
    assert len(lines) == 3 and {line["market"] for line in lines.values()} == {"spot"}
    assert all(line["price_source"].startswith("live") for line in lines.values())
    rates = sorted(line["usd_per_hour"] for line in lines.values())
    peak = ctx.meter.peak_usd_per_hour()  # the lost instance was not billed beside its
    assert peak == pytest.approx(sum(rates[-2:]), rel=1e-6), (peak, rates)  # replacement


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_interruption_notice_checkpoints_then_replaces_the_node(
    sshd, ec2, ami, run_id, tmp_path: Path, dataset: PreparedData, metadata: FakeMetadata
) -> None:
    def on_event(event: dict[str, Any], cluster: EC2Cluster) -> None:
        if event["type"] == "step" and event["global_step"] >= 6 and not metadata.served:
            metadata.pending = True  # early in epoch 0 (64 steps an epoch)

    # checkpoints only at epoch ends: a mid-epoch one can only be the notice's
    cluster = _cluster(sshd, tmp_path, ami, metadata_url=metadata.url)
    _ctx, sink, error = await _train(cluster, tmp_path, run_id, ami, dataset, on_event, every=0)
    assert error is None, error
    assert metadata.served == 1
    (notice,) = [e for e in sink.events if e["type"] == "spot_notice"]
    (recovery,) = [e for e in sink.events if e["type"] == "recovery"]
    assert recovery["cause"] == "spot_interruption" and recovery["lost"] == [notice["node"]]
    assert "checkpointed first" in recovery["detail"]
    # the notice's checkpoint was taken mid-epoch 0, stored here, and the run resumed from it
    stored = [e for e in sink.events if e["type"] == "checkpoint_stored"]
    asked = [e for e in stored if e["t"] > notice["t"] and e["epoch"] == 0 and e["step"]]
    assert asked and not [e for e in stored if e["t"] < notice["t"]]
    assert recovery["checkpoint"] == {k: asked[0][k] for k in ("epoch", "step", "global_step")}
    # resumed mid-epoch 0 from that checkpoint, not back at the epoch's start (the steps redone
    # are those trained while the node was being stopped: a count that grows with the load)
    assert recovery["resumed_epoch"] == 0 and recovery["resumed_step"]
    assert recovery["redone_steps"] >= 0
    assert [e["epoch"] for e in sink.events if e["type"] == "epoch"] == [0, 1]
    assert running_tagged(ec2, run_id) == []


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_a_failing_replacement_still_terminates_every_instance(
    sshd, ec2, ami, run_id, tmp_path: Path, dataset: PreparedData
) -> None:
    seen: list[int] = []
    victim: list[str] = []

    def on_event(event: dict[str, Any], cluster: EC2Cluster) -> None:
        if not victim and _after_mid_epoch_checkpoint(event, seen):
            victim.append(cluster.instance_of(cluster.nodes[1]).id)
            ec2.terminate_instances(InstanceIds=victim)

    cluster = _cluster(sshd, tmp_path, ami, dead_after=2)  # the replacement never answers SSH
    _ctx, sink, error = await _train(cluster, tmp_path, run_id, ami, dataset, on_event)
    assert isinstance(error, LaunchError) and "recovering from the loss" in error.message
    (recovery,) = [e for e in sink.events if e["type"] == "recovery"]
    assert recovery["status"] == "failed" and "SSH" in recovery["reason"]
    tagged = describe_tagged(ec2, run_id, ("pending", "running", "shutting-down", "terminated"))
    assert len(tagged) == 3  # the replacement was started …
    assert running_tagged(ec2, run_id) == []  # … and terminated with the others

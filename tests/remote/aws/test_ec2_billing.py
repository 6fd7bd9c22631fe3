"""Instances that ran but never became nodes (SSH never answered) are still billed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from engine.errors import LaunchError
from engine.events import Emitter
from remote.clusters.ec2 import EC2Cluster, InstanceGroupSpec
from remote.cost import CostMeter
from remote.datasets import PreparedData
from remote.pricing import PriceBook, load_catalog
from remote.profile import load_profile
from remote.recovery import RecoveryLedger
from remote.train_stage import TrainContext, run_training
from tests.remote.aws.conftest import REGION, running_tagged

pytestmark = pytest.mark.aws

PROFILE = """\
name: bill-ec2
provider: ec2
region: us-east-1
nodes:
  - {{instance_type: g5.xlarge, count: 2, ami: {ami}}}
data: {{synthetic: {{size: 1MB}}}}
"""


class ListSink:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def write(self, event: dict) -> None:
        self.events.append(dict(event))

    def close(self) -> None:
        pass


async def test_instances_whose_ssh_never_answers_are_billed_from_launch(
    ec2, ami, run_id, dead_port, tmp_path: Path
) -> None:
    profile_path = tmp_path / "bill.yaml"
    profile_path.write_text(PROFILE.format(ami=ami))
    profile = load_profile(profile_path)
    run_dir = tmp_path / run_id
    run_dir.mkdir()
    sink = ListSink()
    meter = CostMeter()
    book = PriceBook.from_catalog(load_catalog(), REGION)
    ctx = TrainContext(
        profile=profile, train=profile.to_train_config("", run_dir / "train"), run_dir=run_dir,
        emitter=Emitter(sink, run=run_id), sink=sink, meter=meter, book=book,
        on_line=None, ledger=RecoveryLedger(profile.recovery, run_started=time.time()),
    )  # fmt: skip
    cluster = EC2Cluster(
        [InstanceGroupSpec(instance_type="g5.xlarge", ami=ami, count=2)],
        users=["nobody"], keys=[None], nproc=[1], address_for=lambda inst: dead_port,
        known_hosts=str(tmp_path / "known_hosts"), python=sys.executable,
        workdir=str(tmp_path / "nodes"), probe_torch=False, poll_s=0.05, ready_timeout_s=1.0,
    )  # fmt: skip
    with pytest.raises(LaunchError, match="did not answer SSH"):
        async with cluster:
            await run_training(ctx, cluster, PreparedData(tmp_path, cached=False, stats={}))
    meter.stop_all()
    assert running_tagged(ec2, run_id) == []
    cost = meter.summary()
    ran = {i.id for i in cluster.fleet.running}
    assert len(ran) == 2
    assert {line["name"] for line in cost["lines"]} == {f"instance {i} (unused)" for i in ran}
    rate = book.on_demand_price("g5.xlarge").usd_per_hour
    assert all(line["billed_s"] >= 60 for line in cost["lines"])
    assert cost["usd"] == pytest.approx(2 * rate * 60 / 3600, abs=1e-5)  # the 1-minute minimum

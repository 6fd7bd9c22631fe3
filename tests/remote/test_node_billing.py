"""NodeBilling: an EC2 instance bills from running, and its node goes on in that one line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from remote.clusters.ec2_fleet import LaunchedInstance
from remote.cost import CostLine, CostMeter
from remote.node_billing import NodeBilling
from remote.pricing import PriceBook, load_bundled_catalog
from remote.profile import load_profile

PROFILE = """\
name: bill
provider: ec2
nodes: [{instance_type: g5.xlarge, count: 2, ami: ami-03cf127a}]
data: {synthetic: {size: 1MB}}
"""
LAUNCH = 1_000_000.0


@dataclass
class FakeFleet:
    running: list[LaunchedInstance] = field(default_factory=list)


@dataclass
class FakeEC2Cluster:
    """What NodeBilling reads of an EC2Cluster."""

    nodes: list[str] = field(default_factory=list)
    adopted: dict[str, LaunchedInstance] = field(default_factory=dict)
    fleet: FakeFleet = field(default_factory=FakeFleet)
    on_instance_running: object = None

    def instance_of(self, node: str) -> LaunchedInstance | None:
        return self.adopted.get(node)

    async def reach_running(self, inst: LaunchedInstance) -> None:
        self.fleet.running.append(inst)
        assert self.on_instance_running is not None
        await self.on_instance_running(inst)  # type: ignore[operator]


def instance(name: str) -> LaunchedInstance:
    return LaunchedInstance(
        id=name, instance_type="g5.xlarge", host="10.0.0.1", private_ip=None, spot=False,
        group=0, launched_at=LAUNCH,
    )  # fmt: skip


@pytest.fixture
def billing(tmp_path: Path) -> tuple[NodeBilling, FakeEC2Cluster, CostMeter, float]:
    path = tmp_path / "bill.yaml"
    path.write_text(PROFILE)
    book = PriceBook.from_catalog(load_bundled_catalog(), "us-east-1")
    price = book.on_demand_price("g5.xlarge")
    assert price is not None
    cluster = FakeEC2Cluster()
    meter = CostMeter(clock=lambda: LAUNCH + 600)
    billing = NodeBilling(load_profile(path), cluster, meter, book)  # type: ignore[arg-type]
    billing.listen()
    return billing, cluster, meter, price.usd_per_hour


async def test_instances_bill_from_running_while_ssh_is_awaited(billing) -> None:
    bill, cluster, meter, rate = billing
    await cluster.reach_running(instance("i-a"))
    await cluster.reach_running(instance("i-b"))
    await bill.instance_running(instance("i-a"))  # told twice: still one line
    assert meter.usd_per_hour() == pytest.approx(2 * rate)
    assert meter.usd(LAUNCH + 120) == pytest.approx(2 * rate * 120 / 3600)
    assert [line["name"] for line in meter.summary()["lines"]] == ["instance i-a", "instance i-b"]


async def test_a_node_goes_on_in_its_instance_line_and_the_rest_are_unused(billing) -> None:
    bill, cluster, meter, rate = billing
    a, b = instance("i-a"), instance("i-b")
    await cluster.reach_running(a)
    await cluster.reach_running(b)
    cluster.nodes, cluster.adopted = ["g5.xlarge-0"], {"g5.xlarge-0": a}
    await bill.start()
    assert bill.keys == {"g5.xlarge-0": "node g5.xlarge-0"}
    assert bill.usd_per_hour("g5.xlarge-0") == pytest.approx(rate)
    bill.stop("g5.xlarge-0", at=LAUNCH + 300)
    bill.bill_unused()
    bill.bill_unused()  # idempotent
    cost = meter.summary(now=LAUNCH + 600)
    lines = {line["name"]: line for line in cost["lines"]}
    assert list(lines) == ["node g5.xlarge-0", "instance i-b (unused)"]
    assert lines["node g5.xlarge-0"]["billed_s"] == 300  # from launch, not from SSH answering
    assert lines["instance i-b (unused)"]["billed_s"] == 600
    assert cost["usd"] == pytest.approx(rate * 900 / 3600)  # each instance counted once


def test_relabel_keeps_the_start_and_refuses_a_taken_key() -> None:
    meter = CostMeter(clock=lambda: 100.0)

    def line(name: str) -> CostLine:
        return CostLine(name=name, field="f", instance_type="x.large", count=1, usd_per_hour=36)

    meter.start(line("a"), at=0.0, key="a")
    meter.start(line("b"), at=50.0, key="b")
    assert meter.relabel("a", "node a", line("node a")) == "node a"
    summary = meter.summary()
    assert [(x["name"], x["billed_s"]) for x in summary["lines"]] == [("node a", 100), ("b", 60)]
    with pytest.raises(ValueError, match="exists already"):
        meter.relabel("b", "node a", line("node a"))

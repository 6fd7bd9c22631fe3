"""Bill each training node at the price it actually runs at, from start until it is gone.

EC2 nodes are billed from their instance's launch time: spot instances at the live spot price
of their availability zone (DescribeSpotPriceHistory through the run's EC2 endpoint; else the
price book's cached or cheapest-zone spot price; else on-demand, an upper bound), on-demand
instances at the book's on-demand price. SSH nodes with an ``instance_type`` are billed at
that type's price. A lost, dropped or replaced node stops billing when it is given up; its
replacement starts its own line. An instance that ran but never became a node (its SSH never
answered, or the run was stopped while it booted) is billed too, from its launch until the end
of the run, when teardown has terminated it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from remote.clusters import Cluster
from remote.cost import CostLine, CostMeter
from remote.pricing import LiveUnavailable, Price, PriceBook
from remote.profile import Profile, SSHProfile

log = logging.getLogger(__name__)


class NodeBilling:
    """One cost line per node of the cluster (key: ``node <name>``)."""

    def __init__(self, profile: Profile, cluster: Cluster, meter: CostMeter, book: PriceBook):
        self.profile = profile
        self.cluster = cluster
        self.meter = meter
        self.book = book
        self.keys: dict[str, str] = {}
        self.prices: dict[str, Price] = {}
        """The price each node is billed at (for the run's events and summary)."""
        self._billed: set[str] = set()
        """Instance ids with a cost line (a node's or an unused instance's)."""

    async def start(self, nodes: list[str] | None = None) -> None:
        """Begin billing ``nodes`` (default: every node not billed yet)."""
        for node in nodes or self.cluster.nodes:
            if node in self.keys:
                continue
            priced = await self._price(node)
            if priced is None:
                continue
            price, instance_type, at = priced
            line = CostLine(
                name=f"node {node} {instance_type}",
                field=f"node {node}",
                instance_type=instance_type,
                count=1,
                usd_per_hour=price.usd_per_hour,
                market=price.market,
                stage="train",
                source=price.source + (f" {price.zone}" if price.zone else ""),
            )
            self.prices[node] = price
            self.keys[node] = self.meter.start(line, at=at, key=f"node {node}")
            inst = self._instance(node)
            if inst is not None:
                self._billed.add(inst.id)

    def bill_unused(self) -> None:
        """Bill every instance that reached running but has no line yet (it never became a
        node) from its launch; the line runs on until the meter stops (after teardown)."""
        fleet = getattr(self.cluster, "fleet", None)
        for inst in getattr(fleet, "running", None) or []:
            if inst.id in self._billed:
                continue
            price = (
                self.book.spot_price(inst.instance_type, inst.zone)
                if inst.spot and inst.zone
                else None
            ) or self.book.price(inst.instance_type, spot=inst.spot)
            if price is None:
                log.warning("instance %s (%s) is not priced", inst.id, inst.instance_type)
                continue
            line = CostLine(
                name=f"instance {inst.id} {inst.instance_type}",
                field=f"nodes[{inst.group}].instance_type",
                instance_type=inst.instance_type,
                count=1,
                usd_per_hour=price.usd_per_hour,
                market=price.market,
                stage="train",
                source=price.source + (f" {price.zone}" if price.zone else ""),
            )
            self.meter.start(line, at=inst.launched_at, key=f"instance {inst.id} (unused)")
            self._billed.add(inst.id)

    def _instance(self, node: str) -> Any:
        instance_of = getattr(self.cluster, "instance_of", None)
        return instance_of(node) if instance_of is not None else None

    def stop(self, node: str, at: float | None = None) -> None:
        """Stop billing ``node`` (lost or dropped)."""
        key = self.keys.get(node)
        if key is not None:
            self.meter.stop(key, at=at)

    def stop_all(self) -> None:
        """Stop every node's line."""
        for node in list(self.keys):
            self.stop(node)

    def usd_per_hour(self, node: str) -> float:
        """The node's price (0 when unpriced)."""
        price = self.prices.get(node)
        return price.usd_per_hour if price else 0.0

    async def _price(self, node: str) -> tuple[Price, str, float] | None:
        instance_of = getattr(self.cluster, "instance_of", None)
        if instance_of is not None:
            inst = instance_of(node)
            if inst is None:
                return None
            price = (
                await self._spot_price(inst.instance_type, inst.zone)
                if inst.spot
                else self.book.on_demand_price(inst.instance_type)
            )
            return (price, inst.instance_type, inst.launched_at) if price else None
        if isinstance(self.profile, SSHProfile):
            spec = next((n for n in self.profile.nodes if n.label == node), None)
            if spec is None or not spec.instance_type:
                return None
            price = self.book.on_demand_price(spec.instance_type)
            return (price, spec.instance_type, time.time()) if price else None
        return None

    async def _spot_price(self, instance_type: str, zone: str | None) -> Price | None:
        """The live spot price of the zone the node runs in (else the book's best guess)."""
        fleet = getattr(self.cluster, "fleet", None)
        if fleet is not None and zone and self.book.spot_price(instance_type, zone) is None:
            try:
                zones = await asyncio.to_thread(_fetch_spot, fleet.ec2, instance_type)
            except LiveUnavailable as exc:  # billing falls back to the book's price below
                log.warning("spot price of %s unavailable: %s", instance_type, exc)
            else:
                self.book.add_spot(instance_type, zones, source="live")
        found = self.book.spot_price(instance_type, zone) if zone else None
        return found or self.book.price(instance_type, spot=True)


def _fetch_spot(ec2: Any, instance_type: str) -> dict[str, float]:
    from remote.pricing.live import fetch_spot

    return fetch_spot(ec2, [instance_type]).get(instance_type, {})

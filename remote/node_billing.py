"""Bill each training machine at the price it actually runs at, from its launch until it is gone.

EC2 instances are billed from the moment they reach running (EC2 bills from then), before their
SSH answers, so the live cost and ``budget.max_usd`` see the boot: one line per instance, started
at its launch time, which becomes the node's line (``node <name>``) once the node is set up, or
stays the instance's (``instance <id> (unused)``) when it never became a node (its SSH never
answered, or the run was stopped while it booted) and runs on until the run's teardown has
terminated it. Spot instances are billed at the live spot price of their availability zone
(DescribeSpotPriceHistory through the run's EC2 endpoint; else the price book's cached or
cheapest-zone spot price; else on-demand, an upper bound), on-demand instances at the book's
on-demand price. SSH nodes with an ``instance_type`` are billed at that type's price from the
cluster's start. A lost, dropped or replaced node stops billing when it is given up; its
replacement has its own line.
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
    """One cost line per machine of the cluster (key: ``node <name>`` once it is a node)."""

    def __init__(self, profile: Profile, cluster: Cluster, meter: CostMeter, book: PriceBook):
        self.profile = profile
        self.cluster = cluster
        self.meter = meter
        self.book = book
        self.keys: dict[str, str] = {}
        """Node name → its cost line's key."""
        self.prices: dict[str, Price] = {}
        """The price each node is billed at (for the run's events and summary)."""
        self._lines: dict[str, str] = {}
        """Instance id → its cost line's key (every billed instance, node or not)."""
        self._instance_prices: dict[str, Price] = {}
        """Instance id → the price its line bills."""
        self._nodes: set[str] = set()
        """Instance ids whose line is a node's."""

    def listen(self) -> None:
        """Bill each EC2 instance from the moment it reaches running, while it still boots
        (a no-op for clusters without instances); call before ``cluster.start``."""
        if hasattr(self.cluster, "on_instance_running"):
            self.cluster.on_instance_running = self.instance_running

    async def instance_running(self, inst: Any) -> None:
        """Start billing instance ``inst`` (a LaunchedInstance) from its launch, once."""
        if inst.id in self._lines:
            return
        price = await self._instance_price(inst)
        if price is None:
            log.warning("instance %s (%s) is not priced", inst.id, inst.instance_type)
            return
        self._instance_prices[inst.id] = price
        key = f"instance {inst.id}"
        self._lines[inst.id] = self.meter.start(
            self._instance_line(inst, price), at=inst.launched_at, key=key
        )

    async def start(self, nodes: list[str] | None = None) -> None:
        """Begin billing ``nodes`` (default: every node not billed yet); a node whose instance
        is billed since it ran goes on in that line, now named after the node."""
        for node in nodes or self.cluster.nodes:
            if node in self.keys:
                continue
            inst = self._instance(node)
            if inst is not None and inst.id in self._lines:
                price = self._instance_prices[inst.id]
                line = self._node_line(node, inst.instance_type, price)
                key = self.meter.relabel(self._lines[inst.id], f"node {node}", line)
            else:
                priced = await self._price(node)
                if priced is None:
                    continue
                price, instance_type, at = priced
                line = self._node_line(node, instance_type, price)
                key = self.meter.start(line, at=at, key=f"node {node}")
            self.prices[node] = price
            self.keys[node] = key
            if inst is not None:
                self._lines[inst.id] = key
                self._instance_prices[inst.id] = price
                self._nodes.add(inst.id)

    def bill_unused(self) -> None:
        """Name every instance that reached running but never became a node as unused, billed
        from its launch (also one whose line has not started); the line runs on until the
        meter stops (after teardown)."""
        fleet = getattr(self.cluster, "fleet", None)
        for inst in getattr(fleet, "running", None) or []:
            if inst.id in self._nodes:
                continue
            unused = f"instance {inst.id} (unused)"
            key = self._lines.get(inst.id)
            if key == unused:
                continue
            price = self._instance_prices.get(inst.id) or self._book_price(inst)
            if price is None:
                log.warning("instance %s (%s) is not priced", inst.id, inst.instance_type)
                continue
            line = self._instance_line(inst, price)
            if key is None:
                self.meter.start(line, at=inst.launched_at, key=unused)
            else:
                self.meter.relabel(key, unused, line)
            self._lines[inst.id] = unused
            self._instance_prices[inst.id] = price

    @staticmethod
    def _node_line(node: str, instance_type: str, price: Price) -> CostLine:
        return CostLine(
            name=f"node {node} {instance_type}",
            field=f"node {node}",
            instance_type=instance_type,
            count=1,
            usd_per_hour=price.usd_per_hour,
            market=price.market,
            stage="train",
            source=price.source + (f" {price.zone}" if price.zone else ""),
        )

    @staticmethod
    def _instance_line(inst: Any, price: Price) -> CostLine:
        return CostLine(
            name=f"instance {inst.id} {inst.instance_type}",
            field=f"nodes[{inst.group}].instance_type",
            instance_type=inst.instance_type,
            count=1,
            usd_per_hour=price.usd_per_hour,
            market=price.market,
            stage="train",
            source=price.source + (f" {price.zone}" if price.zone else ""),
        )

    def _book_price(self, inst: Any) -> Price | None:
        """The book's price of ``inst`` (its zone's spot price where known), no network."""
        zoned = (
            self.book.spot_price(inst.instance_type, inst.zone) if inst.spot and inst.zone else None
        )
        return zoned or self.book.price(inst.instance_type, spot=inst.spot)

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
        if getattr(self.cluster, "instance_of", None) is not None:
            inst = self._instance(node)
            if inst is None:
                return None
            price = await self._instance_price(inst)
            return (price, inst.instance_type, inst.launched_at) if price else None
        if isinstance(self.profile, SSHProfile):
            spec = next((n for n in self.profile.nodes if n.label == node), None)
            if spec is None or not spec.instance_type:
                return None
            price = self.book.on_demand_price(spec.instance_type)
            return (price, spec.instance_type, time.time()) if price else None
        return None

    async def _instance_price(self, inst: Any) -> Price | None:
        """What ``inst`` costs: its zone's live spot price, or the book's on-demand price."""
        if inst.spot:
            return await self._spot_price(inst.instance_type, inst.zone)
        return self.book.on_demand_price(inst.instance_type)

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

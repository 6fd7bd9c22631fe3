"""Price the balancer's drop-a-rank advice in dollars: per-rank $/h from the profile's machines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.balance.balancer import advise_from_summary
from remote.clusters.naming import node_names
from remote.pricing import PriceBook
from remote.profile import EC2Profile, LocalProfile, Profile, SSHProfile


def node_rank_prices(profile: Profile, book: PriceBook) -> list[tuple[str, float, int]]:
    """(node name as the cluster calls it, $/h of one of its ranks, its ranks), in profile order."""

    def hourly(instance_type: str | None, spot: bool = False) -> float:
        price = book.price(instance_type, spot=spot) if instance_type else None
        return price.usd_per_hour if price is not None else 0.0

    if isinstance(profile, LocalProfile):
        world = profile.world_size()
        return [("local", hourly(profile.instance_type) / world, world)]
    nodes: list[tuple[str, float, int]] = []
    if isinstance(profile, SSHProfile):
        for node in profile.nodes:
            nproc = node.nproc or max(1, node.gpus)
            nodes.append((node.label, hourly(node.instance_type) / nproc, nproc))
    elif isinstance(profile, EC2Profile):
        for group, names in zip(profile.nodes, node_names(profile.nodes), strict=True):
            nproc = group.nproc or max(1, profile.gpus_per_instance(group))
            per_rank = hourly(group.instance_type, group.spot) / nproc
            nodes += [(name, per_rank, nproc) for name in names]
    return nodes


def rank_prices(
    profile: Profile, book: PriceBook, rank_nodes: Sequence[str] | None = None
) -> list[float] | None:
    """$/h of each training rank (a machine's price split over its ranks).

    ``rank_nodes`` (rank → node, as the ranks reported it) places each rank on its machine:
    multi-node rendezvous numbers nodes itself, so rank order need not follow the profile's.
    Without it, or when it names a node the profile does not have, ranks follow the profile's
    node order. None when the profile prices nothing (then the advice stays in rank-hours).
    """
    nodes = node_rank_prices(profile, book)
    per_rank = {name: price for name, price, _ in nodes}
    if rank_nodes is not None and all(node in per_rank for node in rank_nodes):
        prices = [per_rank[node] for node in rank_nodes]
    else:
        prices = [price for _, price, nproc in nodes for _ in range(nproc)]
    return prices if any(prices) else None


def priced_advice(
    profile: Profile,
    book: PriceBook,
    train_summary: dict[str, Any],
    rank_nodes: Sequence[str] | None = None,
) -> dict[str, Any] | None:
    """The advice of a run's ``balance`` block, in $ where the machines have prices (ranks
    placed on the nodes ``rank_nodes`` names, see :func:`rank_prices`)."""
    block = train_summary.get("balance")
    if not isinstance(block, dict):
        return None
    prices = rank_prices(profile, book, rank_nodes)
    sps = block.get("sec_per_sample") or []
    if prices is not None and len(prices) != len(sps):
        prices = None  # world size differs from the profile's (e.g. a resumed run): rank-hours
    advice = advise_from_summary(block, usd_per_hour=prices)
    return advice.as_dict() if advice is not None else None

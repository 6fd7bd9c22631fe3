"""Price the balancer's drop-a-rank advice in dollars: per-rank $/h from the profile's machines."""

from __future__ import annotations

from typing import Any

from engine.balancer import advise_from_summary
from remote.pricing import PriceBook
from remote.profile import EC2Profile, LocalProfile, Profile, SSHProfile


def rank_prices(profile: Profile, book: PriceBook) -> list[float] | None:
    """$/h of each training rank, in launch order (a machine's price split over its ranks).

    None when the profile prices nothing (then the advice stays in rank-hours). Ranks follow the
    profile's node order, as torchrun's node ranks do.
    """

    def hourly(instance_type: str | None, spot: bool = False) -> float:
        price = book.price(instance_type, spot=spot) if instance_type else None
        return price.usd_per_hour if price is not None else 0.0

    prices: list[float] = []
    if isinstance(profile, LocalProfile):
        world = profile.world_size()
        prices = [hourly(profile.instance_type) / world] * world
    elif isinstance(profile, SSHProfile):
        for node in profile.nodes:
            nproc = node.nproc or max(1, node.gpus)
            prices += [hourly(node.instance_type) / nproc] * nproc
    elif isinstance(profile, EC2Profile):
        for group in profile.nodes:
            nproc = group.nproc or max(1, profile.gpus_per_instance(group))
            prices += [hourly(group.instance_type, group.spot) / nproc] * (nproc * group.count)
    return prices if any(prices) else None


def priced_advice(
    profile: Profile, book: PriceBook, train_summary: dict[str, Any]
) -> dict[str, Any] | None:
    """The advice of a run's ``balance`` block, in $ where the machines have prices."""
    block = train_summary.get("balance")
    if not isinstance(block, dict):
        return None
    prices = rank_prices(profile, book)
    sps = block.get("sec_per_sample") or []
    if prices is not None and len(prices) != len(sps):
        prices = None  # world size differs from the profile's (e.g. a resumed run): rank-hours
    advice = advise_from_summary(block, usd_per_hour=prices)
    return advice.as_dict() if advice is not None else None

"""Prices with their source and age: user overrides > live > cache > bundled catalog."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from datetime import time as dtime
from pathlib import Path
from typing import Any, Literal

from remote.pricing.cache import DEFAULT_MAX_AGE_S, SPOT_MAX_AGE_S, CachedPrice, PriceCache
from remote.pricing.catalog import DEFAULT_REGION, Catalog, InstanceType, load_catalog
from remote.pricing.live import (
    LiveClients,
    LiveUnavailable,
    fetch_on_demand,
    fetch_spot,
    make_clients,
)

PriceSource = Literal["live", "cache", "bundled", "user"]
Market = Literal["on_demand", "spot"]

NO_NETWORK = "this command reads no network (`sentitop prices --refresh` fetches them)"
"""Why live prices were not fetched, when the command did not ask for them (the default of
price_book's ``not_fetched``)."""
EMR_ESTIMATE_FRACTION = 0.25
"""EMR surcharge assumed, as a fraction of the EC2 price, when the catalog has none recorded."""


@dataclass(frozen=True, slots=True)
class Price:
    """One hourly price with where it came from and when it was true."""

    instance_type: str
    region: str
    usd_per_hour: float
    market: Market
    source: PriceSource
    as_of: float
    """Unix time the price was fetched (live/cache) or recorded (bundled/user: price_date)."""
    zone: str | None = None
    """Availability zone of a spot price."""

    def age_s(self, now: float | None = None) -> float:
        """Seconds since the price was fetched or recorded."""
        return max(0.0, (time.time() if now is None else now) - self.as_of)

    def describe(self, now: float | None = None) -> str:
        """E.g. '$1.006/h on-demand (bundled, 2024-06-01, 538 d old)'."""
        day = datetime.fromtimestamp(self.as_of, UTC).date().isoformat()
        where = f" in {self.zone}" if self.zone else ""
        market = self.market.replace("_", "-")
        return (
            f"${self.usd_per_hour:.4g}/h {market}{where} "
            f"({self.source}, {day}, {format_age(self.age_s(now))} old)"
        )

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        """JSON-ready fields plus age_s."""
        return {**asdict(self), "age_s": round(self.age_s(now), 1)}


def format_age(seconds: float) -> str:
    """A short age: 42 s, 17 min, 5 h, 538 d."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} d"


def _date_ts(row: InstanceType) -> float:
    return datetime.combine(row.price_date, dtime(), UTC).timestamp()


@dataclass(slots=True)
class PriceBook:
    """The prices of one region, each with source and age, plus warnings to show the user."""

    region: str
    catalog: Catalog
    on_demand: dict[str, Price] = field(default_factory=dict)
    spot: dict[str, dict[str, Price]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def from_catalog(cls, catalog: Catalog, region: str = DEFAULT_REGION) -> PriceBook:
        """Bundled and user prices only: no cache, no network."""
        book = cls(region=region, catalog=catalog)
        book.on_demand = _bundled_prices(catalog, region, book.warnings)
        book.spot = _recorded_spot(catalog, region)
        return book

    def on_demand_price(self, instance_type: str) -> Price | None:
        """The on-demand price of ``instance_type``, or None when nothing knows it."""
        return self.on_demand.get(instance_type)

    def spot_price(self, instance_type: str, zone: str | None = None) -> Price | None:
        """The spot price in ``zone``, or the lowest over zones; None when unknown."""
        zones = self.spot.get(instance_type, {})
        if zone is not None:
            return zones.get(zone)
        return min(zones.values(), key=lambda p: p.usd_per_hour, default=None)

    def spot_prices(self, instance_type: str) -> list[Price]:
        """The spot price in every zone that has one, cheapest first (each with source, age)."""
        return sorted(self.spot.get(instance_type, {}).values(), key=lambda p: p.usd_per_hour)

    def add_spot(
        self,
        instance_type: str,
        zones: dict[str, float],
        *,
        source: PriceSource = "live",
        now: float | None = None,
    ) -> None:
        """Record spot prices by zone (e.g. fetched for the zone a node landed in)."""
        now = time.time() if now is None else now
        known = self.spot.setdefault(instance_type, {})
        for zone, usd in zones.items():
            known[zone] = Price(instance_type, self.region, usd, "spot", source, now, zone)

    def price(self, instance_type: str, *, spot: bool = False) -> Price | None:
        """The price to budget with: spot when asked and known, else on-demand (an upper bound)."""
        if spot:
            found = self.spot_price(instance_type)
            if found is not None:
                return found
        return self.on_demand_price(instance_type)

    def hourly_usd(self, instance_type: str, *, spot: bool = False) -> float | None:
        """USD per hour of one instance (see :meth:`price`)."""
        found = self.price(instance_type, spot=spot)
        return None if found is None else found.usd_per_hour

    def emr_usd(self, instance_type: str) -> float | None:
        """EMR surcharge per instance-hour: recorded, else an estimate; None when unpriced."""
        row = self.catalog.get(instance_type, self.region) or self.catalog.specs(instance_type)
        if row is not None and row.emr_usd is not None:
            return row.emr_usd
        base = self.on_demand_price(instance_type)
        return None if base is None else round(base.usd_per_hour * EMR_ESTIMATE_FRACTION, 4)

    def emr_is_estimate(self, instance_type: str) -> bool:
        """True when :meth:`emr_usd` had to estimate the surcharge."""
        row = self.catalog.get(instance_type, self.region) or self.catalog.specs(instance_type)
        return row is None or row.emr_usd is None

    def sources(self) -> set[str]:
        """The sources the on-demand prices came from."""
        return {p.source for p in self.on_demand.values()}

    def basis(self, names: Sequence[str], now: float | None = None) -> str:
        """Where the on-demand prices of ``names`` came from and how old they are, e.g.
        'prices (us-east-1, on-demand): 37 types from the bundled catalog, 2024-06-01 (910 d
        old); not live ...': what a plan's dollars rest on."""
        by_source: dict[str, list[Price]] = {}
        for name in dict.fromkeys(names):
            found = self.on_demand.get(name)
            if found is not None:
                by_source.setdefault(found.source, []).append(found)
        if not by_source:
            return f"prices ({self.region}): none known for {', '.join(names) or 'any type'}"
        what = {"bundled": "the bundled catalog", "user": "your user catalog"}
        parts = []
        for source, prices in sorted(by_source.items()):
            oldest = min(prices, key=lambda p: p.as_of)
            day = datetime.fromtimestamp(oldest.as_of, UTC).date().isoformat()
            parts.append(
                f"{len(prices)} type(s) from {what.get(source, source + ' prices')}, "
                f"{'oldest ' if len(prices) > 1 else ''}{day} "
                f"({format_age(oldest.age_s(now))} old)"
            )
        text = f"prices ({self.region}, on-demand): " + "; ".join(parts)
        if not by_source.keys() & {"live", "cache"}:
            text += (
                "; no live or cached AWS price: today's prices may differ "
                "(`sentitop prices --refresh` fetches and caches them)"
            )
        return text


def _bundled_prices(catalog: Catalog, region: str, warnings: list[str]) -> dict[str, Price]:
    prices: dict[str, Price] = {}
    fallback_used = False
    for name in catalog.names():
        row = catalog.get(name, region)
        if row is None and region != DEFAULT_REGION:
            row = catalog.get(name, DEFAULT_REGION)
            fallback_used = fallback_used or row is not None
        if row is None or row.on_demand_usd is None:
            continue
        prices[name] = Price(
            name, row.region, row.on_demand_usd, "on_demand", row.source, _date_ts(row)
        )
    if fallback_used:
        warnings.append(
            f"the bundled catalog has {DEFAULT_REGION} prices only; {region} prices differ "
            "(use live prices or add rows for the region to the user catalog)"
        )
    return prices


def _recorded_spot(catalog: Catalog, region: str) -> dict[str, dict[str, Price]]:
    """Spot prices recorded in catalog rows (the optional spot_usd column), zone unknown."""
    return {
        row.name: {"": Price(row.name, region, row.spot_usd, "spot", row.source, _date_ts(row))}
        for row in catalog.rows()
        if row.region == region and row.spot_usd is not None
    }


def _from_cache(
    cached: PriceCache, region: str, source: PriceSource
) -> tuple[dict[str, Price], dict[str, dict[str, Price]]]:
    on_demand = {
        name: Price(name, region, c.usd, "on_demand", source, c.fetched_at)
        for name, c in cached.on_demand.items()
    }
    spot = {
        name: {
            z: Price(name, region, c.usd, "spot", source, c.fetched_at, z) for z, c in zones.items()
        }
        for name, zones in cached.spot.items()
    }
    return on_demand, spot


def _fresh(
    entries: dict[str, CachedPrice], names: Sequence[str], max_age: float, now: float
) -> bool:
    return all(n in entries and now - entries[n].fetched_at <= max_age for n in names)


def _fresh_spot(cached: PriceCache, names: Sequence[str], now: float) -> bool:
    return all(
        n in cached.spot
        and all(now - c.fetched_at <= SPOT_MAX_AGE_S for c in cached.spot[n].values())
        for n in names
    )


def price_book(
    region: str = DEFAULT_REGION,
    *,
    instance_types: Sequence[str] | None = None,
    spot_types: Sequence[str] | None = None,
    live: bool = True,
    refresh: bool = False,
    max_age_s: float = DEFAULT_MAX_AGE_S,
    catalog: Catalog | None = None,
    cache_folder: Path | None = None,
    clients: LiveClients | None = None,
    session: Any | None = None,
    endpoint_url: str | None = None,
    not_fetched: str = NO_NETWORK,
    workers: int = 8,
    now: float | None = None,
) -> PriceBook:
    """Prices of ``region``: bundled catalog, then cache, then live (when stale or ``refresh``).

    ``not_fetched`` says why live prices were not fetched when ``live`` is off (a command's
    flag, a screen's key). ``instance_types`` limits what is fetched live (default: every
    catalog type); spot prices are fetched for ``spot_types`` (default: the same types). When
    live prices cannot be had
    (offline, no credentials, access denied) the book falls back to the cache or the bundled
    catalog and says so in ``warnings``. The user's override rows always win.
    """
    now = time.time() if now is None else now
    catalog = catalog or load_catalog()
    book = PriceBook(region=region, catalog=catalog)
    book.on_demand = _bundled_prices(catalog, region, book.warnings)
    book.spot = _recorded_spot(catalog, region)
    names = list(instance_types) if instance_types is not None else catalog.names()
    spot_names = list(spot_types) if spot_types is not None else names

    cached = PriceCache.load(region, cache_folder)
    cached_od, cached_spot = _from_cache(cached, region, "cache")
    book.on_demand.update(cached_od)
    book.spot.update(cached_spot)

    stale = refresh or not (
        _fresh(cached.on_demand, names, max_age_s, now) and _fresh_spot(cached, spot_names, now)
    )
    if live and stale and (names or spot_names):
        try:
            clients = clients or make_clients(region, session=session, endpoint_url=endpoint_url)
            on_demand = fetch_on_demand(clients.pricing, region, names, workers=workers)
            spot = fetch_spot(clients.ec2, spot_names)
        except LiveUnavailable as exc:
            book.warnings.append(_fallback_message(exc.reason, book, cached, now))
        else:
            for name, usd in on_demand.items():
                cached.on_demand[name] = CachedPrice(usd, now)
                book.on_demand[name] = Price(name, region, usd, "on_demand", "live", now)
            for name, zones in spot.items():
                cached.spot[name] = {z: CachedPrice(usd, now) for z, usd in zones.items()}
                book.spot[name] = {
                    z: Price(name, region, usd, "spot", "live", now, z) for z, usd in zones.items()
                }
            missing = [n for n in names if n not in on_demand]
            if missing:
                book.warnings.append(
                    f"the Pricing API has no {region} price for {', '.join(missing[:6])}"
                    + (" …" if len(missing) > 6 else "")
                    + "; using cached or bundled prices for them"
                )
            try:
                cached.save(cache_folder)
            except OSError as exc:
                book.warnings.append(f"could not write the price cache ({exc})")
    elif not live and stale:
        reason = not_fetched
        book.warnings.append(_fallback_message(reason, book, cached, now, fetched=False))

    for row in catalog.rows():  # the user's edits win over everything
        if row.source == "user" and row.region == region and row.on_demand_usd is not None:
            book.on_demand[row.name] = Price(
                row.name, region, row.on_demand_usd, "on_demand", "user", _date_ts(row)
            )
    return book


def _fallback_message(
    reason: str, book: PriceBook, cached: PriceCache, now: float, *, fetched: bool = True
) -> str:
    if cached.on_demand:
        newest = max(c.fetched_at for c in cached.on_demand.values())
        using = f"cached prices from {format_age(now - newest)} ago"
    else:
        dated = book.catalog.oldest_date()
        using = f"the bundled catalog ({DEFAULT_REGION}, dated {dated})"
    if any(row.source == "user" for row in book.catalog.rows()):
        using += " beneath your own prices (source: user)"
    lead = "live prices unavailable" if fetched else "live prices not fetched"
    return f"{lead}: {reason}; using {using}"

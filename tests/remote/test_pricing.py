"""Price catalog, cache ages, user overrides and fallbacks (no network: fake clients)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from engine.errors import InputError
from remote.pricing import (
    LiveClients,
    PriceBook,
    PriceCache,
    load_bundled_catalog,
    load_catalog,
    price_book,
)
from remote.pricing.cache import DEFAULT_MAX_AGE_S
from remote.pricing.catalog import COLUMNS
from remote.pricing.live import parse_on_demand_usd

ISSUE_PRICES = {  # us-east-1 on-demand prices named in the issue (issue 5, item 4)
    "p2.xlarge": 0.90,
    "g3.4xlarge": 1.14,
    "g3.16xlarge": 4.56,
    "p3.2xlarge": 3.06,
    "g4dn.xlarge": 0.526,
    "g5.xlarge": 1.006,
    "m4.xlarge": 0.20,
}


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SENTITOP_PRICES_FILE", str(tmp_path / "user-prices.csv"))


def test_bundled_catalog_has_the_issue_prices_and_hardware() -> None:
    catalog = load_bundled_catalog()
    for name, usd in ISSUE_PRICES.items():
        row = catalog.get(name, "us-east-1")
        assert row is not None and row.on_demand_usd == pytest.approx(usd), name
        assert row.source == "bundled" and isinstance(row.price_date, date)
    assert catalog.get("m4.xlarge").emr_usd == pytest.approx(0.06)
    assert catalog.get("g5.xlarge").gpu_model == "A10G" and catalog.get("g5.xlarge").gpus == 1
    assert catalog.get("g3.16xlarge").gpus == 4
    gpu = catalog.names(gpu_only=True)
    assert "g5.xlarge" in gpu and "m4.xlarge" not in gpu
    assert len(catalog) >= 40


def test_catalog_rows_are_consistent() -> None:
    for row in load_bundled_catalog().rows():
        assert row.vcpus > 0 and row.memory_gib > 0 and row.on_demand_usd and row.on_demand_usd > 0
        assert (row.gpus > 0) == bool(row.gpu_model), row.name
        if row.emr_usd is not None:
            assert 0 < row.emr_usd < row.on_demand_usd


def test_user_override_wins_and_is_never_rewritten(tmp_path: Path) -> None:
    user = tmp_path / "user-prices.csv"
    text = "instance_type,on_demand_usd,price_date\ng5.xlarge,0.5,2026-01-01\nz9.huge,2.0,\n"
    user.write_text(text)
    fake = FakeClients({"g5.xlarge": 1.2, "g4dn.xlarge": 0.6})
    book = price_book(instance_types=["g5.xlarge", "g4dn.xlarge"], clients=fake.clients, now=1000.0)
    assert book.on_demand_price("g5.xlarge").source == "user"
    assert book.hourly_usd("g5.xlarge") == 0.5
    assert book.on_demand_price("g4dn.xlarge").source == "live"
    assert book.hourly_usd("z9.huge") == 2.0  # a type only the user knows
    assert user.read_text() == text
    cached = PriceCache.load("us-east-1")
    assert cached.on_demand["g5.xlarge"].usd == 1.2  # the cache holds what AWS said
    # hardware of a known type is kept when the user row only gives a price
    assert load_catalog().specs("g5.xlarge").gpus == 1


def test_bad_user_catalog_names_file_and_line(tmp_path: Path) -> None:
    user = tmp_path / "user-prices.csv"
    user.write_text("# my prices\ninstance_type,on_demand_usd\ng5.xlarge,cheap\n")
    with pytest.raises(InputError, match=r"user-prices\.csv:3: "):
        load_catalog()
    user.write_text("instance_type,price\ng5.xlarge,1\n")
    with pytest.raises(InputError, match="bad header"):
        load_catalog()
    for bad in ("-1", "nan", "inf"):  # each passed every budget check and read as a price
        user.write_text(f"instance_type,on_demand_usd,spot_usd\ng5.xlarge,1,{bad}\n")
        with pytest.raises(InputError, match=rf"user-prices\.csv:2: spot_usd = {bad} is not"):
            load_catalog()
    assert set(COLUMNS) >= {"instance_type", "on_demand_usd", "emr_usd", "price_date"}
    user.write_bytes(b"instance_type,on_demand_usd\ng5.xlarge,1\n\xff\xfe\x00garbage\n")
    with pytest.raises(InputError, match=r"user-prices\.csv:3: the price override file is not"):
        load_catalog()  # a UnicodeDecodeError traceback before


class FakePaginator:
    def __init__(self, owner: FakeClients, op: str) -> None:
        self.owner, self.op = owner, op

    def paginate(self, **kwargs: Any) -> list[dict[str, Any]]:
        self.owner.calls.append((self.op, kwargs))
        if self.op == "get_products":
            name = next(f["Value"] for f in kwargs["Filters"] if f["Field"] == "instanceType")
            if name not in self.owner.prices:
                return [{"PriceList": []}]
            return [{"PriceList": [product(name, self.owner.prices[name])]}]
        history = [
            {"InstanceType": t, "AvailabilityZone": z, "SpotPrice": str(usd), "Timestamp": None}
            for t in kwargs["InstanceTypes"]
            for z, usd in self.owner.spot.get(t, {}).items()
        ]
        return [{"SpotPriceHistory": history}]


class FakeClients:
    """Pricing and EC2 stand-ins that count calls."""

    def __init__(self, prices: dict[str, float], spot: dict[str, dict[str, float]] | None = None):
        self.prices, self.spot = prices, spot or {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.clients = LiveClients(pricing=self, ec2=self)

    def get_paginator(self, name: str) -> FakePaginator:
        return FakePaginator(self, name)


def product(name: str, usd: float, operation: str = "RunInstances") -> str:
    sku = f"SKU{name}{operation}"
    return json.dumps(
        {
            "product": {"sku": sku, "attributes": {"instanceType": name, "operation": operation}},
            "terms": {
                "OnDemand": {
                    f"{sku}.T": {
                        "priceDimensions": {
                            f"{sku}.T.D": {"unit": "Hrs", "pricePerUnit": {"USD": f"{usd:.10f}"}}
                        }
                    }
                }
            },
        }
    )


def test_parse_on_demand_prefers_plain_linux() -> None:
    items = [product("g5.xlarge", 1.9, "RunInstances:0002"), product("g5.xlarge", 1.006)]
    assert parse_on_demand_usd(items) == pytest.approx(1.006)
    assert parse_on_demand_usd([]) is None


def test_cache_is_used_until_max_age_then_refreshed(tmp_path: Path) -> None:
    fake = FakeClients({"g5.xlarge": 1.1}, {"g5.xlarge": {"us-east-1a": 0.4, "us-east-1b": 0.35}})
    names = ["g5.xlarge"]
    first = price_book(instance_types=names, clients=fake.clients, now=1000.0)
    assert first.on_demand_price("g5.xlarge").source == "live"
    assert first.spot_price("g5.xlarge").usd_per_hour == 0.35
    assert first.spot_price("g5.xlarge").zone == "us-east-1b"
    assert first.warnings == []
    calls = len(fake.calls)

    later = 1000.0 + 600
    second = price_book(instance_types=names, clients=fake.clients, now=later)
    assert len(fake.calls) == calls  # fresh cache: no AWS call
    price = second.on_demand_price("g5.xlarge")
    assert price.source == "cache" and price.usd_per_hour == 1.1
    assert price.age_s(later) == pytest.approx(600)
    assert "cache" in price.describe(later) and "10 min" in price.describe(later)

    fake.prices["g5.xlarge"] = 1.2
    third = price_book(
        instance_types=names, clients=fake.clients, now=1000.0 + DEFAULT_MAX_AGE_S + 1
    )
    assert len(fake.calls) > calls
    assert third.on_demand_price("g5.xlarge").usd_per_hour == 1.2
    assert third.on_demand_price("g5.xlarge").source == "live"

    calls = len(fake.calls)
    price_book(
        instance_types=names, clients=fake.clients, refresh=True, now=1000.0 + DEFAULT_MAX_AGE_S + 2
    )
    assert len(fake.calls) > calls  # --refresh always asks


def test_offline_uses_bundled_and_says_so() -> None:
    book = price_book(live=False)
    assert book.sources() == {"bundled"}
    assert len(book.warnings) == 1 and "bundled catalog" in book.warnings[0]
    assert book.hourly_usd("g5.xlarge") == pytest.approx(1.006)
    assert book.hourly_usd("g5.xlarge", spot=True) == pytest.approx(1.006)  # unknown spot: bound
    assert "your own prices" not in book.warnings[0]


def test_offline_with_user_prices_says_they_win(tmp_path: Path) -> None:
    (tmp_path / "user-prices.csv").write_text("instance_type,on_demand_usd\ng5.xlarge,0.5\n")
    book = price_book(live=False)
    assert book.on_demand_price("g5.xlarge").source == "user"
    assert "bundled catalog" in book.warnings[0] and "beneath your own prices" in book.warnings[0]


def test_other_region_falls_back_to_us_east_1_with_a_warning() -> None:
    book = price_book("eu-west-1", live=False)
    assert book.hourly_usd("g5.xlarge") == pytest.approx(1.006)
    assert book.on_demand_price("g5.xlarge").region == "us-east-1"
    assert any("us-east-1 prices only" in w for w in book.warnings)


def test_types_the_api_does_not_price_keep_bundled_prices() -> None:
    fake = FakeClients({"g5.xlarge": 1.1})
    book = price_book(instance_types=["g5.xlarge", "p2.xlarge"], clients=fake.clients, now=5.0)
    assert book.on_demand_price("p2.xlarge").source == "bundled"
    assert any("p2.xlarge" in w for w in book.warnings)


def test_emr_surcharge_recorded_or_estimated() -> None:
    book = PriceBook.from_catalog(load_bundled_catalog())
    assert book.emr_usd("m4.xlarge") == pytest.approx(0.06) and not book.emr_is_estimate(
        "m4.xlarge"
    )
    assert book.emr_is_estimate("g5.xlarge")
    assert book.emr_usd("g5.xlarge") == pytest.approx(book.hourly_usd("g5.xlarge") * 0.25, abs=1e-4)
    assert book.emr_usd("nope.xlarge") is None


def test_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    path = PriceCache.path_for("us-east-1")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert PriceCache.load("us-east-1").on_demand == {}
    book = price_book(live=False)
    assert book.sources() == {"bundled"}


def test_cached_prices_that_are_not_prices_are_dropped() -> None:
    """A damaged or edited cache's $0, negative, NaN or infinite price showed as the live
    price (a free machine to the budget checks); a future stamp never grew stale."""
    import json
    import time

    now = time.time()
    entries = {
        "g5.xlarge": {"usd": 0, "fetched_at": now},
        "g4dn.xlarge": {"usd": -1, "fetched_at": now},
        "p3.2xlarge": {"usd": float("nan"), "fetched_at": now},
        "p3.8xlarge": {"usd": float("inf"), "fetched_at": now},
        "g5.2xlarge": {"usd": 1.2, "fetched_at": 9e12},
        "g5.4xlarge": {"usd": 1.6, "fetched_at": now - 60},
    }
    path = PriceCache.path_for("us-east-1")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "on_demand": entries,
                "spot": {"g5.xlarge": {"us-east-1a": entries["g5.xlarge"]}},
            }
        )
    )
    cached = PriceCache.load("us-east-1")
    assert list(cached.on_demand) == ["g5.4xlarge"] and cached.spot == {"g5.xlarge": {}}
    book = price_book(live=False)
    g5 = book.on_demand_price("g5.xlarge")
    assert g5 is not None and g5.source == "bundled" and g5.usd_per_hour > 0

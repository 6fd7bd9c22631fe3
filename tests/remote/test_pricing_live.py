"""Live prices through the real boto3 code: Stubber (Pricing), moto's server (spot), offline."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber

from remote.pricing import LiveClients, make_clients, price_book
from remote.pricing.live import LiveUnavailable, fetch_on_demand, fetch_spot

pytestmark = pytest.mark.aws

FAKE = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SENTITOP_PRICES_FILE", str(tmp_path / "none.csv"))


@pytest.fixture
def no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment where the standard AWS chain finds nothing (and never asks IMDS)."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    env = {
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """moto's HTTP server on 127.0.0.1 (a real endpoint; only endpoint_url differs from AWS)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def pricing_product(name: str, usd: str, operation: str = "RunInstances") -> str:
    sku = f"{name}-{operation}"
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "sku": sku,
                "attributes": {
                    "instanceType": name,
                    "operation": operation,
                    "regionCode": "us-east-1",
                    "operatingSystem": "Linux",
                    "marketoption": "OnDemand",
                },
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    f"{sku}.JRTCKXETXF": {
                        "offerTermCode": "JRTCKXETXF",
                        "sku": sku,
                        "priceDimensions": {
                            f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "description": f"${usd} per On Demand Linux {name} Instance Hour",
                                "pricePerUnit": {"USD": usd},
                            }
                        },
                    }
                }
            },
        }
    )


def stubbed_pricing(prices: dict[str, str]) -> tuple[object, Stubber]:
    client = boto3.client("pricing", region_name="us-east-1", **FAKE)
    stubber = Stubber(client)
    for name, usd in prices.items():
        expected = {"ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1", "Filters": ANY}
        items = [pricing_product(name, "9.99", "RunInstances:0002"), pricing_product(name, usd)]
        stubber.add_response(
            "get_products", {"PriceList": items, "FormatVersion": "aws_v1"}, expected
        )
    stubber.activate()
    return client, stubber


def test_pricing_api_through_stubber() -> None:
    client, stubber = stubbed_pricing({"g5.xlarge": "1.0060000000", "g4dn.xlarge": "0.5260000000"})
    prices = fetch_on_demand(client, "us-east-1", ["g5.xlarge", "g4dn.xlarge"], workers=1)
    stubber.assert_no_pending_responses()
    assert prices == {"g5.xlarge": pytest.approx(1.006), "g4dn.xlarge": pytest.approx(0.526)}


def test_pricing_filters_name_type_region_and_linux() -> None:
    client = boto3.client("pricing", region_name="us-east-1", **FAKE)
    stubber = Stubber(client)
    filters = [
        {"Type": "TERM_MATCH", "Field": k, "Value": v}
        for k, v in {
            "instanceType": "p3.2xlarge",
            "regionCode": "eu-west-1",
            "operatingSystem": "Linux",
            "tenancy": "Shared",
            "preInstalledSw": "NA",
            "capacitystatus": "Used",
        }.items()
    ]
    stubber.add_response(
        "get_products",
        {"PriceList": [pricing_product("p3.2xlarge", "3.3")]},
        {"ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1", "Filters": filters},
    )
    with stubber:
        assert fetch_on_demand(client, "eu-west-1", ["p3.2xlarge"]) == {"p3.2xlarge": 3.3}


def test_pricing_access_denied_is_explained() -> None:
    client = boto3.client("pricing", region_name="us-east-1", **FAKE)
    stubber = Stubber(client)
    stubber.add_client_error("get_products", "AccessDeniedException", "not allowed pricing:*")
    with stubber, pytest.raises(LiveUnavailable, match="AccessDeniedException"):
        fetch_on_demand(client, "us-east-1", ["g5.xlarge"])


@pytest.mark.slow
def test_spot_history_from_moto_server(moto_endpoint: str) -> None:
    session = boto3.Session(region_name="us-east-1", **FAKE)
    clients = make_clients("us-east-1", session=session, endpoint_url=moto_endpoint)
    spot = fetch_spot(clients.ec2, ["g5.xlarge", "m5.large"])
    ec2 = session.client("ec2", endpoint_url=moto_endpoint)
    offered = ec2.describe_instance_type_offerings(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": ["g5.xlarge"]}],
    )["InstanceTypeOfferings"]
    zones = {o["Location"] for o in offered}
    assert zones and set(spot["g5.xlarge"]) == zones
    assert all(usd > 0 for usd in spot["g5.xlarge"].values())


@pytest.mark.slow
def test_price_book_live_end_to_end(moto_endpoint: str, tmp_path: Path) -> None:
    session = boto3.Session(region_name="us-east-1", **FAKE)
    ec2 = session.client("ec2", endpoint_url=moto_endpoint)
    pricing, stubber = stubbed_pricing({"g5.xlarge": "1.2"})
    book = price_book(instance_types=["g5.xlarge"], clients=LiveClients(pricing, ec2), now=100.0)
    stubber.assert_no_pending_responses()
    assert book.warnings == []
    on_demand = book.on_demand_price("g5.xlarge")
    assert (on_demand.usd_per_hour, on_demand.source) == (1.2, "live")
    spot = book.spot_price("g5.xlarge")
    assert spot is not None and spot.source == "live" and spot.zone
    assert book.hourly_usd("g5.xlarge", spot=True) == spot.usd_per_hour
    cache = json.loads((tmp_path / "cache" / "prices-us-east-1.json").read_text())
    assert cache["on_demand"]["g5.xlarge"]["usd"] == 1.2 and cache["spot"]["g5.xlarge"]


def test_no_credentials_falls_back_to_bundled_and_says_so(no_credentials: dict[str, str]) -> None:
    book = price_book(instance_types=["g5.xlarge"])
    assert book.sources() == {"bundled"}
    assert len(book.warnings) == 1
    assert "no AWS credentials" in book.warnings[0] and "bundled catalog" in book.warnings[0]


def test_unreachable_endpoint_falls_back_with_a_clear_message() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again below: nothing listens there
    dead = f"http://127.0.0.1:{port}"
    session = boto3.Session(region_name="us-east-1", **FAKE)
    clients = make_clients(
        "us-east-1", session=session, endpoint_url=dead, pricing_endpoint_url=dead, timeout_s=1.0
    )
    book = price_book(instance_types=["g5.xlarge"], clients=clients)
    assert book.sources() == {"bundled"}
    assert len(book.warnings) == 1 and "cannot reach AWS" in book.warnings[0]


def test_prices_command_offline_json(no_credentials: dict[str, str], tmp_path: Path) -> None:
    env = {**os.environ, "SENTITOP_CACHE_DIR": str(tmp_path / "c")}
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", "prices", "--gpu", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert any("no AWS credentials" in w for w in data["warnings"])
    rows = {r["instance_type"]: r for r in data["instances"]}
    assert "m4.xlarge" not in rows and rows["g5.xlarge"]["gpus"] == 1
    assert rows["g5.xlarge"]["on_demand"]["source"] == "bundled"
    assert rows["g5.xlarge"]["on_demand"]["age_s"] > 0


def test_prices_command_table_says_bundled(no_credentials: dict[str, str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", "prices", "--type", "g3.4xlarge"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "g3.4xlarge" in out.stdout and "1.1400" in out.stdout and "bundled" in out.stdout
    assert out.stderr.startswith("warning: live prices unavailable: no AWS credentials")


def test_the_endpoint_variable_reaches_both_price_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`sentitop prices --refresh` with $SENTITOP_AWS_ENDPOINT_URL set (a moto server) still
    asked the real AWS endpoints, with whatever credentials were at hand."""
    monkeypatch.setenv("SENTITOP_AWS_ENDPOINT_URL", "http://127.0.0.1:9/")
    session = boto3.Session(region_name="us-east-1", **FAKE)
    clients = make_clients("us-east-1", session=session)
    assert clients.ec2.meta.endpoint_url == "http://127.0.0.1:9"
    assert clients.pricing.meta.endpoint_url == "http://127.0.0.1:9"
    monkeypatch.delenv("SENTITOP_AWS_ENDPOINT_URL")
    real = make_clients("us-east-1", session=session)
    assert real.pricing.meta.endpoint_url.startswith("https://api.pricing.")

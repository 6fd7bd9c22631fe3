"""Live EC2 prices: Pricing API `get_products` (on-demand) and `describe_spot_price_history`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

PRICING_REGION = "us-east-1"
"""The Pricing API is served from a few regions only; us-east-1 answers for every region."""


class LiveUnavailable(Exception):
    """Live prices could not be fetched; ``reason`` says why in a few words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class LiveClients:
    """boto3 clients for live prices (inject your own, e.g. with a Stubber, in tests)."""

    pricing: Any
    """A `pricing` client (region us-east-1)."""
    ec2: Any
    """An `ec2` client in the region whose spot prices are wanted."""


def make_clients(
    region: str,
    *,
    session: Any | None = None,
    endpoint_url: str | None = None,
    pricing_endpoint_url: str | None = None,
    timeout_s: float = 5.0,
) -> LiveClients:
    """Clients from the standard AWS credential chain; raises LiveUnavailable without credentials.

    ``endpoint_url`` (else $SENTITOP_AWS_ENDPOINT_URL, as every other AWS call of sentitop
    reads it) points EC2 elsewhere (a moto server), and the pricing API too unless
    ``pricing_endpoint_url`` is given: with the variable set, nothing reaches real AWS.
    """
    import boto3
    from botocore.config import Config

    from remote.aws import endpoint_url as configured_endpoint

    endpoint_url = configured_endpoint(endpoint_url)
    pricing_endpoint_url = pricing_endpoint_url or endpoint_url

    session = session or boto3.Session()
    if session.get_credentials() is None:
        raise LiveUnavailable("no AWS credentials found (standard credential chain)")
    config = Config(
        connect_timeout=timeout_s,
        read_timeout=max(timeout_s, 10.0),
        retries={"max_attempts": 2, "mode": "standard"},
    )
    pricing = session.client(
        "pricing", region_name=PRICING_REGION, endpoint_url=pricing_endpoint_url, config=config
    )
    ec2 = session.client("ec2", region_name=region, endpoint_url=endpoint_url, config=config)
    return LiveClients(pricing=pricing, ec2=ec2)


def _explain(exc: Exception) -> str:
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
        ReadTimeoutError,
    )

    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return "no usable AWS credentials"
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError):
        return f"cannot reach AWS ({exc})"
    if isinstance(exc, ReadTimeoutError):
        return f"AWS did not answer in time ({exc})"
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        said = one_line(str(error.get("Message", "")))
        return f"AWS refused: {error.get('Code', '?')}: {said}".rstrip(": ")
    return f"{type(exc).__name__}: {exc}"


def one_line(text: str, limit: int = 200) -> str:
    """An error body as one short line: an HTML page (a proxy's, or an endpoint without the
    Pricing API) gives its <title>, not 5 lines of markup in a warning."""
    if "<" in text and (title := re.search(r"<title>(.*?)</title>", text, re.I | re.S)):
        text = title.group(1)
    text = " ".join(re.sub(r"<[^>]*>", " ", text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _guard(call: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a boto3 call; botocore failures become LiveUnavailable with a short reason."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call(*args, **kwargs)
    except (BotoCoreError, ClientError) as exc:
        raise LiveUnavailable(_explain(exc)) from exc


def _product_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    terms = {
        "instanceType": instance_type,
        "regionCode": region,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in terms.items()]


def parse_on_demand_usd(price_list: Iterable[str]) -> float | None:
    """The hourly on-demand USD price in a `get_products` PriceList (plain Linux preferred)."""
    candidates: list[tuple[int, float]] = []
    for item in price_list:
        product = json.loads(item) if isinstance(item, str) else item
        attributes = product.get("product", {}).get("attributes", {})
        rank = 0 if attributes.get("operation", "RunInstances") == "RunInstances" else 1
        if attributes.get("marketoption", "OnDemand") != "OnDemand":
            rank += 2
        for offer in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in offer.get("priceDimensions", {}).values():
                if not str(dimension.get("unit", "Hrs")).lower().startswith("hr"):
                    continue
                usd = float(dimension.get("pricePerUnit", {}).get("USD", "0"))
                if usd > 0:
                    candidates.append((rank, usd))
    return min(candidates)[1] if candidates else None


def fetch_on_demand(
    pricing: Any, region: str, instance_types: Sequence[str], *, workers: int = 8
) -> dict[str, float]:
    """On-demand USD/h by instance type (types the API does not price are left out)."""

    def one(instance_type: str) -> tuple[str, float | None]:
        paginator = pricing.get_paginator("get_products")
        pages = paginator.paginate(
            ServiceCode="AmazonEC2",
            Filters=_product_filters(instance_type, region),
            FormatVersion="aws_v1",
        )
        price_list: list[str] = []
        for page in _guard(list, pages):
            price_list.extend(page.get("PriceList", []))
        return instance_type, parse_on_demand_usd(price_list)

    if not instance_types:
        return {}
    results = [one(instance_types[0])]  # alone first: offline fails once, not once per type
    rest = list(instance_types[1:])
    if workers <= 1 or len(rest) <= 1:
        results += [one(t) for t in rest]
    else:
        with ThreadPoolExecutor(max_workers=min(workers, len(rest))) as pool:
            results += list(pool.map(one, rest))
    return {name: usd for name, usd in results if usd is not None}


def fetch_spot(
    ec2: Any, instance_types: Sequence[str], *, now: datetime | None = None
) -> dict[str, dict[str, float]]:
    """Current Linux spot USD/h by instance type and availability zone."""
    if not instance_types:
        return {}
    paginator = ec2.get_paginator("describe_spot_price_history")
    pages = paginator.paginate(
        InstanceTypes=list(instance_types),
        ProductDescriptions=["Linux/UNIX"],
        StartTime=now or datetime.now(UTC),
    )
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for page in _guard(list, pages):
        for record in page.get("SpotPriceHistory", []):
            key = (record["InstanceType"], record["AvailabilityZone"])
            stamp = record.get("Timestamp") or datetime.min.replace(tzinfo=UTC)
            if key not in latest or stamp >= latest[key][0]:
                latest[key] = (stamp, float(record["SpotPrice"]))
    out: dict[str, dict[str, float]] = {}
    for (instance_type, zone), (_, usd) in sorted(latest.items()):
        out.setdefault(instance_type, {})[zone] = usd
    return out

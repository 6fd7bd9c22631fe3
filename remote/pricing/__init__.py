"""EC2 prices: a dated bundled catalog, live Pricing/spot prices, a cache, and user overrides.

boto3 is imported only when live prices are fetched, so this package loads fast.
"""

from remote.pricing.book import Price, PriceBook, format_age, price_book
from remote.pricing.cache import DEFAULT_MAX_AGE_S, PriceCache, cache_dir
from remote.pricing.catalog import (
    DEFAULT_REGION,
    Catalog,
    InstanceType,
    load_bundled_catalog,
    load_catalog,
    user_catalog_path,
)
from remote.pricing.live import LiveClients, LiveUnavailable, make_clients

__all__ = [
    "DEFAULT_MAX_AGE_S",
    "DEFAULT_REGION",
    "Catalog",
    "InstanceType",
    "LiveClients",
    "LiveUnavailable",
    "Price",
    "PriceBook",
    "PriceCache",
    "cache_dir",
    "format_age",
    "load_bundled_catalog",
    "load_catalog",
    "make_clients",
    "price_book",
    "user_catalog_path",
]

"""Live prices cached per region in the user's cache folder (JSON, written atomically)."""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CACHE_VERSION = 1
DEFAULT_MAX_AGE_S = 24 * 3600.0
"""On-demand prices older than this are refreshed (they change a few times a year)."""
SPOT_MAX_AGE_S = 3600.0
"""Spot prices older than this are refreshed (they move during the day)."""


def cache_dir() -> Path:
    """Where cached prices live ($SENTITOP_CACHE_DIR or the user cache folder)."""
    env = os.environ.get("SENTITOP_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("sentitop"))


@dataclass(slots=True)
class CachedPrice:
    """A price as fetched, with when it was fetched (Unix seconds)."""

    usd: float
    fetched_at: float


@dataclass(slots=True)
class PriceCache:
    """Cached live prices of one region: on-demand by type, spot by type and zone."""

    region: str
    on_demand: dict[str, CachedPrice] = field(default_factory=dict)
    spot: dict[str, dict[str, CachedPrice]] = field(default_factory=dict)

    @staticmethod
    def path_for(region: str, folder: Path | None = None) -> Path:
        """The cache file of ``region``."""
        return (folder or cache_dir()) / f"prices-{region}.json"

    @classmethod
    def load(cls, region: str, folder: Path | None = None) -> PriceCache:
        """The cache of ``region``; empty when missing or unreadable (it is only a cache)."""
        path = cls.path_for(region, folder)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(region=region)
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
            return cls(region=region)
        try:
            return cls(
                region=region,
                on_demand=_valid(data.get("on_demand", {})),
                spot={k: _valid(zones) for k, zones in data.get("spot", {}).items()},
            )
        except (TypeError, KeyError, ValueError, AttributeError):
            return cls(region=region)

    def save(self, folder: Path | None = None) -> Path:
        """Write the cache atomically (a reader never sees half a file)."""
        path = self.path_for(self.region, folder)
        path.parent.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {
            "version": CACHE_VERSION,
            "region": self.region,
            "on_demand": {k: _plain(v) for k, v in sorted(self.on_demand.items())},
            "spot": {
                k: {z: _plain(v) for z, v in sorted(zones.items())}
                for k, zones in sorted(self.spot.items())
            },
        }
        fd, tmp = tempfile.mkstemp(prefix=".prices-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path


def _valid(entries: dict[str, Any]) -> dict[str, CachedPrice]:
    """The entries that are prices: a finite amount above 0 fetched in the past (an edited or
    damaged file's $0, NaN or future stamp would show a free machine, or never grow stale)."""
    now = time.time() + 300.0  # clocks differ a little
    found = {key: _cached(value) for key, value in entries.items()}
    return {
        key: price
        for key, price in found.items()
        if math.isfinite(price.usd) and price.usd > 0 and 0 < price.fetched_at <= now
    }


def _cached(value: Any) -> CachedPrice:
    return CachedPrice(usd=float(value["usd"]), fetched_at=float(value["fetched_at"]))


def _plain(value: CachedPrice) -> dict[str, float]:
    return {"usd": value.usd, "fetched_at": value.fetched_at}

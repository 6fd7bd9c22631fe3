"""The EC2 instance catalog: the bundled dated CSV merged with the user's override file."""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass, replace
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from engine.errors import InputError

DEFAULT_REGION = "us-east-1"
"""The region the bundled prices are for."""

COLUMNS = (
    "instance_type",
    "region",
    "gpus",
    "gpu_model",
    "gpu_memory_gib",
    "vcpus",
    "memory_gib",
    "on_demand_usd",
    "emr_usd",
    "price_date",
    "spot_usd",
)
"""CSV columns of the bundled catalog and of the user override file (spot_usd optional)."""

CatalogSource = Literal["bundled", "user"]


@dataclass(frozen=True, slots=True)
class InstanceType:
    """One row of the catalog: an instance type's hardware and its prices in one region."""

    name: str
    """EC2 instance type, e.g. g5.xlarge."""
    region: str
    """Region of the prices."""
    gpus: int
    """Number of GPUs (0 for CPU-only types)."""
    gpu_model: str
    """GPU model, e.g. A10G ('' for CPU-only types)."""
    gpu_memory_gib: float
    """Memory per GPU in GiB."""
    vcpus: int
    """Virtual CPUs."""
    memory_gib: float
    """Main memory in GiB."""
    on_demand_usd: float | None
    """On-demand Linux price in USD per hour (None = not recorded)."""
    emr_usd: float | None
    """EMR surcharge in USD per instance-hour on top of the EC2 price (None = not recorded)."""
    price_date: date
    """When the prices of this row were recorded."""
    spot_usd: float | None = None
    """A spot price per hour recorded with the row (None = unknown; live spot prices win)."""
    source: CatalogSource = "bundled"
    """Where the row came from: the shipped CSV or the user's override file."""


def user_catalog_path() -> Path:
    """The user's price override CSV ($SENTITOP_PRICES_FILE or the user config folder)."""
    env = os.environ.get("SENTITOP_PRICES_FILE")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("sentitop")) / "prices.csv"


def _price(record: dict[str, Any], column: str) -> float | None:
    """A price column: blank (unknown) or a finite number >= 0 (a negative, NaN or infinite
    price would pass every budget check and make the cost meter lie)."""
    text = (record.get(column) or "").strip()
    if not text:
        return None
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{column} = {text} is not a price (expected a number >= 0 or blank)")
    return value


def _parse_rows(text: str, origin: str, source: CatalogSource) -> list[InstanceType]:
    """Rows of a catalog CSV; lines starting with # are comments."""
    lines = [
        (n, line)
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.startswith("#")
    ]
    if not lines:
        return []
    reader = csv.DictReader(io.StringIO("\n".join(line for _, line in lines)))
    header = reader.fieldnames or []
    missing = {"instance_type", "on_demand_usd"} - set(header)
    unknown = set(header) - set(COLUMNS)
    if missing or unknown:
        raise InputError(
            f"{origin}:{lines[0][0]}: bad header "
            f"(missing {sorted(missing)}, unknown {sorted(unknown)})",
            hint=f"use the columns {','.join(COLUMNS)}",
        )
    rows: list[InstanceType] = []
    for index, record in enumerate(reader, 1):
        line_no = lines[index][0] if index < len(lines) else lines[-1][0]
        try:
            name = (record.get("instance_type") or "").strip()
            if not name:
                raise ValueError("instance_type is empty")
            rows.append(
                InstanceType(
                    name=name,
                    region=(record.get("region") or "").strip() or DEFAULT_REGION,
                    gpus=int(record.get("gpus") or 0),
                    gpu_model=(record.get("gpu_model") or "").strip(),
                    gpu_memory_gib=float(record.get("gpu_memory_gib") or 0),
                    vcpus=int(record.get("vcpus") or 0),
                    memory_gib=float(record.get("memory_gib") or 0),
                    on_demand_usd=_price(record, "on_demand_usd"),
                    emr_usd=_price(record, "emr_usd"),
                    price_date=date.fromisoformat((record.get("price_date") or "").strip())
                    if (record.get("price_date") or "").strip()
                    else date.today(),
                    spot_usd=_price(record, "spot_usd"),
                    source=source,
                )
            )
        except ValueError as exc:
            raise InputError(
                f"{origin}:{line_no}: {exc}",
                hint="numbers for gpus/vcpus/memory/prices, YYYY-MM-DD for price_date",
            ) from None
    return rows


class Catalog:
    """Instance types by (name, region); user rows replace bundled ones field by field."""

    def __init__(self, rows: list[InstanceType]) -> None:
        self._rows: dict[tuple[str, str], InstanceType] = {}
        for row in rows:
            self._rows[(row.name, row.region)] = row

    def merged(self, overrides: list[InstanceType]) -> Catalog:
        """A new catalog with override rows on top (hardware taken from bundled rows if blank)."""
        rows = dict(self._rows)
        for row in overrides:
            base = self.specs(row.name)
            if base is not None and row.vcpus == 0 and row.gpus == 0:
                row = replace(
                    row,
                    gpus=base.gpus,
                    gpu_model=base.gpu_model,
                    gpu_memory_gib=base.gpu_memory_gib,
                    vcpus=base.vcpus,
                    memory_gib=base.memory_gib,
                )
            if row.emr_usd is None:
                old = rows.get((row.name, row.region))
                if old is not None:
                    row = replace(row, emr_usd=old.emr_usd)
            rows[(row.name, row.region)] = row
        return Catalog(list(rows.values()))

    def get(self, name: str, region: str = DEFAULT_REGION) -> InstanceType | None:
        """The row for ``name`` in ``region``, or None."""
        return self._rows.get((name, region))

    def specs(self, name: str) -> InstanceType | None:
        """Any row of ``name`` (hardware is the same in every region); us-east-1 preferred."""
        row = self._rows.get((name, DEFAULT_REGION))
        if row is not None:
            return row
        return next((r for (n, _), r in self._rows.items() if n == name), None)

    def names(self, *, gpu_only: bool = False) -> list[str]:
        """Distinct instance type names, sorted by family then size."""
        names = {r.name for r in self._rows.values() if r.gpus > 0 or not gpu_only}
        return sorted(names, key=_sort_key)

    def rows(self) -> list[InstanceType]:
        """Every row."""
        return list(self._rows.values())

    def oldest_date(self) -> date | None:
        """The oldest price_date of the bundled rows (what 'bundled catalog dated …' says)."""
        dates = [r.price_date for r in self._rows.values() if r.source == "bundled"]
        return min(dates) if dates else None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.specs(name) is not None

    def __len__(self) -> int:
        return len(self._rows)


_SIZES = ["nano", "micro", "small", "medium", "large", "xlarge"]


def _sort_key(name: str) -> tuple[str, int, str]:
    family, _, size = name.partition(".")
    if size in _SIZES:
        rank = _SIZES.index(size)
    elif size.endswith("xlarge") and size[:-6].isdigit():
        rank = len(_SIZES) + int(size[:-6])
    else:
        rank = 10_000
    return (family, rank, size)


def load_bundled_catalog() -> Catalog:
    """The catalog shipped with sentitop (remote/pricing/catalog.csv)."""
    text = resources.files("remote.pricing").joinpath("catalog.csv").read_text(encoding="utf-8")
    return Catalog(_parse_rows(text, "remote/pricing/catalog.csv", "bundled"))


def load_user_rows(path: Path | None = None) -> list[InstanceType]:
    """Rows of the user's override CSV (none when the file does not exist)."""
    path = path or user_catalog_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise InputError(f"{path}: cannot read the price override file ({exc})") from None
    except UnicodeDecodeError as exc:
        line = text_line_of(path, exc.start)
        raise InputError(
            f"{path}:{line}: the price override file is not UTF-8 text (byte {exc.start})",
            hint=f"write it as CSV text with the columns {','.join(COLUMNS)}",
        ) from None
    return _parse_rows(text, str(path), "user")


def text_line_of(path: Path, offset: int) -> int:
    """The 1-based line of byte ``offset`` in ``path``."""
    with path.open("rb") as fh:
        return fh.read(offset).count(b"\n") + 1


def load_catalog(user_file: Path | None = None) -> Catalog:
    """The bundled catalog with the user's override rows on top."""
    return load_bundled_catalog().merged(load_user_rows(user_file))

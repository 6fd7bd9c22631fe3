"""`sentitop prices`: EC2 prices with their source and age (live, cache, bundled or user)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tui.cli.commands import region_arg

DESCRIPTION = """\
Show EC2 instance prices: on-demand (Pricing API), spot (lowest zone) and the EMR surcharge.
Live prices are cached for a day; without network or AWS credentials the bundled, dated
catalog is shown and a warning says so. Your own prices go in the user catalog (same CSV
columns as remote/pricing/catalog.csv); they win over every other source and are never
overwritten."""


def register(subparsers: Any) -> None:
    """Add the `prices` subcommand."""
    from remote.pricing.catalog import user_catalog_path

    parser = subparsers.add_parser(
        "prices",
        help="EC2 prices with source and age",
        description=DESCRIPTION,
        epilog=f"user catalog: {user_catalog_path()}",
    )
    parser.add_argument("--gpu", action="store_true", help="GPU instance types only")
    parser.add_argument(
        "--region", default="us-east-1", type=region_arg, help="AWS region (default us-east-1)"
    )
    parser.add_argument(
        "--type",
        action="append",
        dest="types",
        metavar="TYPE",
        help="only this instance type (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--refresh", action="store_true", help="fetch live prices now")
    group.add_argument("--offline", action="store_true", help="never contact AWS")
    parser.set_defaults(func=run)


def _rows(book: Any, names: list[str], now: float) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        spec = book.catalog.specs(name)
        on_demand = book.on_demand_price(name)
        spot = book.spot_price(name)
        rows.append(
            {
                "instance_type": name,
                "gpus": spec.gpus if spec else None,
                "gpu_model": spec.gpu_model if spec else None,
                "gpu_memory_gib": spec.gpu_memory_gib if spec else None,
                "vcpus": spec.vcpus if spec else None,
                "memory_gib": spec.memory_gib if spec else None,
                "on_demand": on_demand.to_dict(now) if on_demand else None,
                "spot": spot.to_dict(now) if spot else None,
                "emr_usd": book.emr_usd(name),
                "emr_estimated": book.emr_is_estimate(name),
            }
        )
    return rows


def run(args: argparse.Namespace) -> int:
    """Print the price table (or JSON); warnings go to stderr."""
    import time

    from engine.errors import InputError
    from remote.pricing import format_age, load_catalog, price_book

    catalog = load_catalog()
    names = catalog.names(gpu_only=args.gpu)
    if args.types:
        unknown = [t for t in args.types if t not in catalog]
        if unknown:
            raise InputError(
                f"not in the catalog: {', '.join(unknown)}",
                hint="`sentitop prices` lists the known types",
            )
        names = [n for n in names if n in args.types]
    book = price_book(
        args.region,
        instance_types=names,
        live=not args.offline,
        refresh=args.refresh,
        catalog=catalog,
    )
    now = time.time()
    rows = _rows(book, names, now)
    if args.json:
        print(
            json.dumps(
                {"region": args.region, "warnings": book.warnings, "instances": rows}, indent=1
            )
        )
        return 0
    for warning in book.warnings:
        print(f"warning: {warning}", file=sys.stderr)

    from rich.table import Table

    from tui.cli.console import make_console

    table = Table(title=f"EC2 prices, {args.region} (USD per hour)")
    for column in ("instance", "GPUs", "vCPU", "GiB", "$/h", "spot", "EMR+", "source", "age"):
        table.add_column(
            column,
            no_wrap=True,
            justify="left" if column in ("instance", "GPUs", "source") else "right",
        )
    for row in rows:
        od, spot = row["on_demand"], row["spot"]
        gpus = f"{row['gpus']}× {row['gpu_model']}" if row["gpus"] else "-"
        emr = (
            "-"
            if row["emr_usd"] is None
            else f"{row['emr_usd']:.3f}" + ("~" if row["emr_estimated"] else "")
        )
        table.add_row(
            row["instance_type"],
            gpus,
            str(row["vcpus"] or "-"),
            f"{row['memory_gib']:g}" if row["memory_gib"] else "-",
            f"{od['usd_per_hour']:.4f}" if od else "-",
            f"{spot['usd_per_hour']:.4f}" if spot else "-",
            emr,
            od["source"] if od else "-",
            format_age(od["age_s"]) if od else "-",
        )
    make_console(min_width=100).print(table)
    print("~ EMR surcharge estimated as 25% of the EC2 price; spot shows the cheapest zone.")
    return 0

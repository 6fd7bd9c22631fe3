"""`sentitop profiles`: list the profiles and validate them (errors with file, line and field)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tui.cli.commands import preview


def register(subparsers: Any) -> None:
    """Add the `profiles` subcommand."""
    parser = subparsers.add_parser(
        "profiles",
        help="list and validate cluster profiles",
        description="List the profiles of a folder (default: $SENTITOP_PROFILES_DIR, else "
        "./profiles, else the profiles sentitop ships), or validate the files "
        "given. Exits 2 when any profile is invalid. Prices come from the cache or the bundled "
        "catalog (no network).",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="profile files or folders (default: the profiles folder)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--schema", action="store_true", help="print the JSON schema of profiles (every field)"
    )
    parser.set_defaults(func=run)


def _entries(paths: list[Path]) -> list[Any]:
    from remote.profile import check_profile_file, list_profiles

    if not paths:
        return list_profiles()
    entries = []
    for path in paths:
        entries += list_profiles(path) if path.is_dir() else [check_profile_file(path)]
    return entries


def _describe(entry: Any, books: dict[str, Any]) -> dict[str, Any]:
    from remote.pricing import price_book

    info: dict[str, Any] = {
        "path": str(entry.path),
        "ok": entry.ok,
        "error": entry.error,
        "problems": [
            {"line": p.line, "field": p.path, "message": p.message} for p in entry.problems
        ],
        "warnings": list(entry.warnings),
    }
    profile = entry.profile
    if profile is None:
        return info
    if profile.region not in books:
        books[profile.region] = price_book(profile.region, live=False)
    book = books[profile.region]
    info.update(
        name=profile.name,
        provider=profile.provider,
        description=profile.description,
        region=profile.region,
        world_size=profile.world_size(book.catalog),
    )
    if unpriced := profile.price_error(book):  # `run` refuses it, so it is invalid
        info.update(usd_per_hour=None, ok=False, error=unpriced.user_message().split(": ", 1)[1])
        field = unpriced.message.removeprefix(f"{profile.where}: ").split(":", 1)[0]
        info["warnings"] = [w for w in info["warnings"] if not w.startswith(f"{field}:")]
    else:
        lines = profile.cost_lines(book)
        info.update(
            usd_per_hour=round(sum(x.total_usd_per_hour for x in lines), 4),
            price_sources=sorted({x.source for x in lines}),
            machines=[
                {
                    "name": x.name,
                    "count": x.count,
                    "stage": x.stage,
                    "usd_per_hour": round(x.total_usd_per_hour, 4),
                }
                for x in lines
            ],
        )
    return info


def _short(text: str, width: int) -> str:
    """``text`` on one line (control characters escaped: a file's text never drives the
    terminal), cut to ``width`` with "…"."""
    flat = preview(text, sys.maxsize)
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def run(args: argparse.Namespace) -> int:
    """Print one line per profile, then each problem and warning; 2 when any is invalid."""
    if args.schema:
        from remote.profile import profile_schema

        print(json.dumps(profile_schema(), indent=1))
        return 0
    entries = _entries(list(args.paths))
    books: dict[str, Any] = {}
    infos = [_describe(e, books) for e in entries]
    invalid = sum(1 for i in infos if not i["ok"])
    if args.json:
        print(json.dumps({"profiles": infos, "invalid": invalid}, indent=1))
        return 2 if invalid else 0
    if not infos:
        print("no profiles found", file=sys.stderr)
        return 0
    from rich.table import Table
    from rich.text import Text

    from tui.cli.console import make_console

    table = Table(title="profiles")
    for column in ("name", "provider", "procs", "$/h", "status", "description"):
        table.add_column(column, no_wrap=True, min_width=7 if column == "$/h" else None)
    for info in infos:
        if not info["ok"]:
            table.add_row(Text(Path(info["path"]).stem), "-", "-", "-", "[red]invalid[/red]", "")
            continue
        rate = "?" if info["usd_per_hour"] is None else f"{info['usd_per_hour']:.3f}"
        status = (
            f"[yellow]{len(info['warnings'])} warning(s)[/yellow]"
            if info["warnings"]
            else "[green]ok[/green]"
        )
        table.add_row(
            Text(info["name"]),
            Text(info["provider"]),
            str(info["world_size"]),
            rate,
            status,
            Text(_short(info["description"], 44)),
        )
    console = make_console(min_width=120)
    console.print(table)
    for info in infos:
        if info["error"]:
            print(f"error: {info['error']}", file=sys.stderr)
        for warning in info["warnings"]:
            print(f"warning: {info['path']}: {warning}", file=sys.stderr)
    return 2 if invalid else 0

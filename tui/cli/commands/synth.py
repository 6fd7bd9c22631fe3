"""`sentitop synth`: write a synthetic McAuley 2014 review file of a given size."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(subparsers: Any) -> None:
    """Add the `synth` subcommand."""
    parser = subparsers.add_parser(
        "synth",
        help="write synthetic Amazon-style reviews (real skew, duplicates, lengths, noise)",
        description=(
            "Write McAuley 2014 review lines whose text carries a learnable sentiment signal, "
            "with the real corpus's duplicate rate (85 %), rating skew (59 % 5-star), length "
            "distribution and noise. The same seed and size give the same bytes."
        ),
    )
    parser.add_argument("--output", "-o", required=True, help="file to write (.jsonl or .gz)")
    parser.add_argument(
        "--size", required=True, help="uncompressed size: 50KB, 200MB, 1GB (powers of 1000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--malformed-rate",
        type=float,
        default=0.001,
        help="share of deliberately broken lines (default 0.001)",
    )
    parser.add_argument("--gzip", action="store_true", help="gzip the output")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Generate the file with a progress bar, then print a summary (or JSON)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.table import Table
    from rich.text import Text

    from engine.errors import InputError
    from engine.synth import generate, parse_size
    from tui.cli.console import make_console

    size = parse_size(args.size, name="--size")
    if not 0.0 <= args.malformed_rate <= 1.0:
        raise InputError(
            f"--malformed-rate: must be between 0 and 1, got {args.malformed_rate}",
            hint="for example --malformed-rate 0.001",
        )
    console = Console(stderr=True)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=args.json or not console.is_terminal,
    ) as bar:
        task = bar.add_task("synth", total=size)
        stats = generate(
            args.output,
            size,
            seed=args.seed,
            malformed_rate=args.malformed_rate,
            gzip=args.gzip,
            progress=lambda done: bar.update(task, completed=done),
        )
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    table = Table(title=Text(f"synthetic reviews → {stats['path']}"), show_header=False)
    table.add_row("records", f"{stats['records']:,}")
    table.add_row("bytes (uncompressed)", f"{stats['bytes']:,}")
    table.add_row("file bytes", f"{stats['file_bytes']:,}")
    table.add_row("distinct texts", f"{stats['distinct_texts']:,}")
    table.add_row("duplicate rate", f"{stats['duplicate_rate']:.1%}")
    ratings = stats["ratings"]
    well_formed = max(1, sum(ratings.values()))
    table.add_row(
        "ratings 1..5", " / ".join(f"{ratings[str(r)] / well_formed:.1%}" for r in range(1, 6))
    )
    table.add_row("malformed lines", f"{stats['malformed']:,}")
    table.add_row("python-literal lines", f"{stats['python_literal']:,}")
    table.add_row("speed", f"{stats['mb_per_s']} MB/s in {stats['seconds']} s")
    make_console().print(table)
    return 0

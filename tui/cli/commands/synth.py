"""`sentitop synth`: write a synthetic McAuley 2014 review file of a given size, or a large
preprocessed-layout dataset.h5 directly (for training benchmarks)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tui.cli.arguments import take_negative_values

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn, TaskID

    from tui.cli.stop_signals import StopGuard

MIN_SPLIT_ROWS = 2
"""--dataset: rows each split needs at least (the writer then gives it both labels)."""


def register(subparsers: Any) -> None:
    """Add the `synth` subcommand."""
    parser = subparsers.add_parser(
        "synth",
        help="write synthetic Amazon-style reviews (real skew, duplicates, lengths, noise)",
        description=(
            "Write McAuley 2014 review lines whose text carries a learnable sentiment signal, "
            "with the real corpus's duplicate rate (85 %), rating skew (59 % 5-star), length "
            "distribution and noise. The same seed and size give the same bytes. "
            "With --dataset DIR --reviews N it writes dataset.h5, vocab.json and stats.json "
            "in the preprocessor's layout directly (random token rows with a learnable "
            "signal), for training at sizes that would take long to preprocess. "
            "An existing output file (or dataset in DIR) is replaced once the new one is "
            "complete; nothing is left behind and the old one stays when synth fails or is "
            "interrupted (Ctrl-C, SIGTERM)."
        ),
    )
    parser.add_argument(
        "--output",
        "-o",
        help="review file to write: NAME.jsonl (plain) or NAME.jsonl.gz (a .gz name means gzip)",
    )
    parser.add_argument(
        "--size",
        help="uncompressed size: 50KB, 200MB, 1GB (powers of 1000; at least 1KB, and no more "
        "than the output folder's free space)",
    )
    parser.add_argument(
        "--distinct",
        type=float,
        default=None,
        help="share of reviews whose text is distinct, 0..1 (default 0.15, the real corpus's)",
    )
    parser.add_argument(
        "--dataset", metavar="DIR", help="write a dataset folder instead of a review file"
    )
    parser.add_argument(
        "--reviews",
        help="rows of --dataset over both splits, a whole number: 100000, 2M, 30M (powers of "
        f"1000); each split needs at least {MIN_SPLIT_ROWS} rows",
    )
    parser.add_argument(
        "--seq-len", type=int, default=100, help="--dataset: tokens per row (default 100)"
    )
    parser.add_argument(
        "--vocab-size", type=int, default=10_000, help="--dataset: words (default 10000)"
    )
    parser.add_argument(
        "--test-fraction",
        type=float,
        default=0.1,
        help="--dataset: test share, above 0 and below 1 (default 0.1)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed, >= 0 (default 0)")
    parser.add_argument(
        "--malformed-rate",
        type=float,
        default=0.001,
        help="share of deliberately broken lines (default 0.001)",
    )
    parser.add_argument(
        "--gzip",
        action="store_true",
        help="gzip the output; its name must end in .gz (a .gz name alone means gzip too)",
    )
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    take_negative_values(parser)  # --size -5MB: "must be positive", not "expected one argument"
    parser.set_defaults(func=run)


def _progress(quiet: bool, *amount: ProgressColumn) -> Progress:
    """A progress bar on stderr (description, bar, ``amount`` columns, time left), shown only
    on a terminal and never with --json."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TimeRemainingColumn

    console = Console(stderr=True)
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        *amount,
        TimeRemainingColumn(),
        console=console,
        disable=quiet or not console.is_terminal,
    )


def _step(guard: StopGuard, bar: Progress, task: TaskID) -> Callable[[int], None]:
    """A progress callback: `guard.check` (a Ctrl-C or SIGTERM that Python dropped stops the
    writer here), then move `bar`'s `task` to the amount done."""

    def update(done: int) -> None:
        guard.check()
        bar.update(task, completed=done)

    return update


def run(args: argparse.Namespace) -> int:
    """Check the arguments, write the file or dataset; Ctrl-C (exit 130) and SIGTERM (143) stop
    it with the partial output removed, even where Python drops the KeyboardInterrupt."""
    from engine.errors import InputError
    from tui.cli.stop_signals import Terminated, ending, stop_signals

    if args.seed < 0:
        raise InputError(f"--seed: must be >= 0, got {args.seed}", hint="for example --seed 0")
    try:
        with stop_signals() as guard:
            if args.dataset is not None or args.reviews is not None:
                return _run_dataset(args, guard)
            return _run_reviews(args, guard)
    except (KeyboardInterrupt, Terminated) as exc:
        code, words = ending(exc)
        print(f"{words}: no partial output was left behind", file=sys.stderr)
        return code


def _run_reviews(args: argparse.Namespace, guard: StopGuard) -> int:
    """Generate the file with a progress bar, then print a summary (or JSON)."""
    from rich.progress import DownloadColumn, TransferSpeedColumn
    from rich.table import Table
    from rich.text import Text

    from engine.errors import InputError
    from engine.synth import generate, parse_size
    from tui.cli.console import make_console

    if args.output is None or args.size is None:
        raise InputError(
            "synth needs --output FILE --size SIZE (reviews) or --dataset DIR --reviews N",
            hint="for example: sentitop synth -o reviews.jsonl --size 200MB",
        )
    size = parse_size(args.size, name="--size")
    if not 0.0 <= args.malformed_rate <= 1.0:
        raise InputError(
            f"--malformed-rate: must be between 0 and 1, got {args.malformed_rate}",
            hint="for example --malformed-rate 0.001",
        )
    with _progress(args.json, DownloadColumn(), TransferSpeedColumn()) as bar:
        task = bar.add_task("synth", total=size)
        stats = generate(
            args.output,
            size,
            seed=args.seed,
            malformed_rate=args.malformed_rate,
            distinct=args.distinct,
            gzip=args.gzip,
            progress=_step(guard, bar, task),
        )
    guard.check()  # a stop Python dropped after the writer's last check is no success
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


def _run_dataset(args: argparse.Namespace, guard: StopGuard) -> int:
    """`--dataset DIR --reviews N`: write the dataset folder directly, then print its stats."""
    from rich.console import Console
    from rich.progress import MofNCompleteColumn

    from engine.errors import InputError
    from engine.synth.dataset import write_synthetic_dataset
    from engine.synth.size import parse_count

    if args.dataset is None or args.reviews is None:
        raise InputError(
            "--dataset DIR and --reviews N go together",
            hint="for example: sentitop synth --dataset data/big --reviews 30M --seq-len 100",
        )
    if args.output is not None or args.size is not None or args.distinct is not None:
        raise InputError(
            "--dataset writes token rows: --output, --size and --distinct do not apply"
        )
    reviews = parse_count(args.reviews, name="--reviews")
    if not 0.0 < args.test_fraction < 1.0:
        raise InputError(
            f"--test-fraction: must be above 0 and below 1, got {args.test_fraction}",
            hint="both splits are needed to train; for example --test-fraction 0.1",
        )
    n_test = round(reviews * args.test_fraction)
    if min(n_test, reviews - n_test) < MIN_SPLIT_ROWS:
        least = _min_reviews(args.test_fraction)
        raise InputError(
            f"--reviews: {reviews:,} with --test-fraction {args.test_fraction} gives "
            f"{reviews - n_test:,} train and {n_test:,} test rows; each split needs at least "
            f"{MIN_SPLIT_ROWS} (one of each label), so give --reviews {least:,} or more",
        )
    console = Console(stderr=True)
    with _progress(args.json, MofNCompleteColumn()) as bar:
        task = bar.add_task("synth dataset", total=reviews)
        stats = write_synthetic_dataset(
            args.dataset,
            reviews - n_test,
            n_test,
            seq_len=args.seq_len,
            vocab_size=args.vocab_size,
            seed=args.seed,
            progress=_step(guard, bar, task),
        )
    guard.check()  # a stop Python dropped after the writer's last check is no success
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    from rich.markup import escape

    console.print(
        f"wrote {escape(str(args.dataset))}: {stats['train']:,} train + {stats['test']:,} test "
        f"rows × {args.seq_len} tokens in {stats['seconds']} s",
        soft_wrap=True,  # the terminal wraps it: Rich broke "9.127 s" across lines at 80 columns
    )
    return 0


def _min_reviews(test_fraction: float) -> int:
    """The fewest --reviews whose train and test splits both get MIN_SPLIT_ROWS rows."""
    need = MIN_SPLIT_ROWS - 0.5  # round() reaches MIN_SPLIT_ROWS from here on
    reviews = max(
        2 * MIN_SPLIT_ROWS,
        math.floor(need / test_fraction) - 2,
        math.floor(need / (1.0 - test_fraction)) - 2,
    )
    while min(n_test := round(reviews * test_fraction), reviews - n_test) < MIN_SPLIT_ROWS:
        reviews += 1
    return reviews

"""Command line of preprocessing, shared by `sentitop preprocess` and `python -m engine.preprocess`:
arguments, a rich progress bar and summary table, `--json` (stats only), `--events` (JSON lines)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from engine.config import PreprocessConfig
from engine.config_flags import add_config_flags, flag_values
from engine.errors import SentitopError, visible

QUALITY_FIELDS = ("max_skipped_share", "min_class_share")
"""PreprocessConfig fields of the data-quality gates (their flags in a group of their own)."""
_CUSTOM_FLAGS = ("output", "keep_negations", "memory_budget")
"""Fields with a hand-made flag: -o, --keep/--drop-negations, --memory-budget SIZE (the rest
of PreprocessConfig's scalar fields get generated flags: declared once, in engine/config.py)."""
HELP = "raw review files → de-duplicated, encoded dataset.h5 + vocab.json + stats.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the preprocess options to a parser."""
    parser.add_argument(
        "--input",
        "-i",
        nargs="+",
        required=True,
        metavar="PATH",
        help="input files (JSON lines, plain or .gz; s3:// with emr/hadoop), or folders: every "
        "review file in one (.jsonl, .json, .ndjson, plain or .gz), sorted by name",
    )
    parser.add_argument("--output", "-o", required=True, metavar="DIR", help="output folder")
    add_config_flags(parser, PreprocessConfig, skip=_CUSTOM_FLAGS + QUALITY_FIELDS)
    parser.add_argument(
        "--rating-max",
        type=int,
        default=None,
        help="highest valid rating (default 5; 10 for IMDB when detected)",
    )
    parser.add_argument(
        "--negative-max",
        type=int,
        default=None,
        help="ratings up to this are negative (default 3; 4 for IMDB)",
    )
    negations = parser.add_mutually_exclusive_group()
    negations.add_argument(
        "--keep-negations",
        action="store_true",
        default=None,
        help="keep not/no/nor/n't forms (the default preset does)",
    )
    negations.add_argument(
        "--drop-negations",
        action="store_false",
        dest="keep_negations",
        help="drop not/no/nor/n't forms as stopwords (the seed preset does)",
    )
    quality = parser.add_argument_group("data-quality warnings")
    add_config_flags(quality, PreprocessConfig, only=QUALITY_FIELDS)
    parser.add_argument(
        "--memory-budget",
        type=_size,
        default=None,
        metavar="SIZE",
        help="local runner: memory its worker processes may use together; past their share "
        "they spill the distinct texts to disk in the output's scratch folder and merge them "
        "after, e.g. 512MB, 4GB (default: half the memory available now, "
        f"{_default_budget_text()}; each worker needs ≈ 200 MB whatever the budget)",
    )
    parser.add_argument(
        "--mrjob-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra mrjob option for inline/hadoop/emr (repeat), e.g. --mrjob-arg=--conf-path=X",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print stats.json only")
    out.add_argument("--events", action="store_true", help="write JSON-lines events to stdout")


def config_from_args(args: argparse.Namespace) -> PreprocessConfig:
    """The PreprocessConfig of parsed arguments (raises ConfigError on bad values)."""
    return PreprocessConfig(inputs=list(args.input), **flag_values(args, PreprocessConfig))


def ignored_options(args: argparse.Namespace, runner: str) -> str | None:
    """A warning naming options that ``runner`` does not use (they were ignored silently)."""
    given = []
    if runner != "local" and args.memory_budget is not None:
        given.append("--memory-budget")
    if runner not in ("local", "spark") and args.workers is not None:  # spark: local[N]
        given.append("--workers")
    if runner in ("local", "spark") and args.mrjob_arg:
        given.append("--mrjob-arg")
    if not given:
        return None
    said = " and ".join(given)
    return f"{said} do{'es' if len(given) == 1 else ''} not apply to --runner {runner}: ignored"


def _size(text: str) -> int:
    """argparse type of --memory-budget (an ArgumentTypeError names the option)."""
    from engine.errors import InputError
    from engine.synth.size import parse_size

    try:
        return parse_size(text, name="--memory-budget")
    except InputError as exc:
        raise argparse.ArgumentTypeError(exc.message.removeprefix("--memory-budget: ")) from None


def _default_budget_text() -> str:
    from engine.preprocess.budget import default_budget

    return f"{default_budget() / 1e9:.1f} GB"


class _RichProgressSink:
    """Event sink that drives a rich progress bar from `progress` events; the bar starts with
    the first of them (a bad output folder or option was refused under an empty bar)."""

    def __init__(self, console: Any, columns: tuple[Any, ...], total: int | None) -> None:
        self.console, self.columns, self.total = console, columns, total
        self.progress: Any = None
        self.task_id: Any = None

    def write(self, event: Mapping[str, Any]) -> None:
        """Update the bar on progress events (and print their notes once)."""
        if event.get("type") != "progress":
            return
        if self.progress is None:
            from rich.progress import Progress

            self.progress = Progress(*self.columns, console=self.console, transient=False)
            self.progress.start()
            self.task_id = self.progress.add_task("preprocess", total=self.total, rps="0")
        if event.get("note"):
            from rich.markup import escape

            self.progress.console.print(f"[yellow]note:[/] {escape(str(event['note']))}")
        self.progress.update(
            self.task_id,
            completed=event["done"],
            total=event["total"],
            rps=f"{event.get('records_per_s', 0):,.0f}",
        )

    def close(self) -> None:
        """Stop the bar (when it started)."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def run_cli(args: argparse.Namespace) -> int:
    """Run preprocessing for parsed arguments; returns the exit code (128 + signal, said in
    one line, when SIGTERM or SIGHUP stopped the run)."""
    from engine.preprocess.termination import Terminated

    try:
        return _run_cli(args)
    except Terminated as exc:
        print(exc, file=sys.stderr)  # "terminated (SIGTERM)"
        return 128 + exc.signum


def _run_cli(args: argparse.Namespace) -> int:
    from engine.events import Emitter, StreamSink
    from engine.preprocess import run_preprocess
    from engine.preprocess.budget import budget_warning
    from engine.preprocess.inputs import expand_folders
    from engine.preprocess.readers import check_inputs

    cfg = config_from_args(args)
    remote = cfg.runner in ("emr", "hadoop")
    found = expand_folders(cfg.inputs)  # again in run_preprocess, whose stats list its warnings
    local = [p for p in found.files if not (remote and p.startswith("s3://"))]
    total = sum(check_inputs(local)) if len(local) == len(found.files) else None  # s3: unknown
    for folder, taken in found.folders.items():
        print(f"{folder}: {taken} review file(s) taken", file=sys.stderr)
    if cfg.runner == "local" and (too_big := budget_warning(cfg.memory_budget)):
        print_warnings({"warnings": [too_big]})  # now, while a Ctrl-C costs nothing
    if ignored := ignored_options(args, cfg.runner):
        print_warnings({"warnings": [{"message": ignored}]})
    options = {
        "rating_max": args.rating_max,
        "negative_max": args.negative_max,
        "mrjob_args": args.mrjob_arg,
    }
    if args.json:
        stats = run_preprocess(cfg, None, **options)
        print(json.dumps(stats, indent=2))
        print_warnings(stats)
        return 0
    if args.events:
        run_preprocess(cfg, Emitter(StreamSink()), **options)
        return 0
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (
        TextColumn("preprocess"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TextColumn("{task.fields[rps]} records/s"),
        TimeRemainingColumn(),
    )
    sink = _RichProgressSink(Console(stderr=True), columns, total)
    try:
        stats = run_preprocess(cfg, Emitter(sink), **options)
    finally:
        sink.close()
    Console().print(summary_table(stats))
    print_warnings(stats)
    return 0


def print_warnings(stats: Mapping[str, Any]) -> None:
    """The data-quality warnings of a stats dict, loudly, on stderr."""
    from rich.console import Console
    from rich.text import Text

    console = Console(stderr=True)
    for warning in stats.get("warnings") or []:
        console.print(Text(visible(f"WARNING: {warning['message']}"), style="bold yellow"))


def _short(example: str) -> str:
    """An example's file name and line, without its folders (the table cut the line off)."""
    return example.rsplit("/", 1)[-1]


def summary_table(stats: Mapping[str, Any]) -> Any:
    """A rich table of the main counts of a stats dict."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="preprocess summary", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right", overflow="fold")  # an example's line stays
    for key in (
        "read",
        "kept",
        "duplicates",
        "skipped_total",
        "positive",
        "negative",
        "train",
        "test",
        "vocab_size",
    ):
        table.add_row(key, f"{stats[key]:,}")
        if key == "read" and stats.get("title_rows"):
            table.add_row("  + title rows", f"{stats['title_rows']:,}")
    for reason, n in stats["skipped"].items():
        if n:
            shown = [_short(e) for e in stats["skipped_examples"].get(reason, [])[:2]]
            examples = escape(", ".join(shown))  # the file's name and line (--json: the path)
            table.add_row(
                f"  skipped: {reason}", f"{n:,}" + (f"  (e.g. {examples})" if examples else "")
            )
    table.add_row("input", f"{stats['input_bytes'] / 1e6:,.1f} MB")
    table.add_row("time", f"{stats['seconds']:.1f} s ({stats['mb_per_s']:.1f} MB/s)")
    spill = stats.get("spill")
    if spill and spill.get("runs"):
        table.add_row(
            "spilled to disk",
            f"{spill['runs']} runs, {spill['bytes'] / 1e6:,.0f} MB "
            f"(budget {stats['memory_budget'] / 1e6:,.0f} MB)",
        )
    return table


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m engine.preprocess`: the same command line as `sentitop preprocess`."""
    parser = argparse.ArgumentParser(prog="python -m engine.preprocess", description=HELP)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_cli(args)
    except SentitopError as exc:
        print(exc.user_message(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

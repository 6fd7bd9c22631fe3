"""`sentitop embed`: word embeddings — SGNS with N local processes (sync or async), or SVD."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from engine.errors import visible
from engine.events import parse_event_line


def register(subparsers: Any) -> None:
    """Add the `embed` parser."""
    from engine.embeddings.cli import add_embed_arguments

    parser = subparsers.add_parser(
        "embed",
        help="word embeddings: SGNS sync (DDP) or async (PS), or the SVD of PPMI (--mode svd)",
        description=(
            "Train SGNS embeddings on raw reviews (--input) or a preprocessed folder (--data); "
            "PIP loss against the SPPMI/SVD reference per epoch. --mode svd trains nothing: "
            "the truncated SVD of the corpus's PPMI matrix, seconds on a CPU. Events go to "
            "stdout and RUN_DIR/events.jsonl."
        ),
    )
    add_embed_arguments(parser)
    parser.add_argument(
        "--json", action="store_true", help="print only the final summary as one JSON object"
    )
    parser.set_defaults(func=run)


class _Printer:
    """Turns rank output into short progress lines (or keeps quiet for --json)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def __call__(self, rank: int, stream: str, line: str) -> None:
        event = parse_event_line(line) if stream == "stdout" else None
        if event is not None and event["type"] == "warning" and event.get("stage") == "prepare":
            print(f"WARNING: {event.get('message')}", file=sys.stderr)  # the input's, now
            return
        if self.quiet:
            if event is None and stream == "stderr":
                print(f"[rank {rank}] {line}", file=sys.stderr)
            return
        if event is None:
            print(f"[rank {rank}] {line}", file=sys.stderr if stream == "stderr" else sys.stdout)
        elif event["type"] == "stage_start" and event.get("stage") == "train":
            print(
                f"{event['mode']} · {event['workers']} worker(s) · {event['encoder']} encoder · "
                f"dim {event['dim']} · batch {event['batch']} · vocab {event['vocab']} · "
                f"initial PIP loss {event['pip_loss']:.4f}"
            )
        elif event["type"] == "epoch":
            print(
                f"epoch {event['epoch'] + 1}: SGNS loss {event['train_loss']:.4f}  "
                f"PIP loss {event['pip_loss']:.4f}  {event['seconds']:.1f} s  "
                f"{event['words_per_s']:,.0f} words/s"
            )


def _stopped(run_dir: str) -> str:
    """What an interrupted run leaves, for the line that says it stopped."""
    from pathlib import Path

    folder = Path(run_dir)
    if not folder.is_dir():
        return "the run was stopped before it wrote anything"
    from engine.embeddings.prepare import previous_run

    again = "The same command starts it again"
    if (folder / "prepare.json").is_file():
        again += ", reusing the prepared corpus"
    kept = previous_run(folder)
    earlier = (
        f" The finished run it was replacing is kept whole in {kept} (a run folder as it was: "
        "--model-init-embeddings reads it; the next finished run here removes it)."
        if kept
        else ""
    )
    return (
        f"the run was stopped; {run_dir} holds no finished vectors (no summary.json or "
        f"embeddings.npy). {again}.{earlier}"
    )


def run(args: argparse.Namespace) -> int:
    """Prepare the corpus, launch the ranks and report the summary."""
    from engine.embeddings.cli import config_from_args, run_local

    cfg = config_from_args(args)
    try:
        summary = run_local(cfg, args.nproc, on_line=_Printer(quiet=args.json))
    except KeyboardInterrupt:
        print(f"interrupted: {_stopped(cfg.run_dir)}", file=sys.stderr)
        return 130
    except SystemExit as exc:  # SIGTERM or SIGHUP (engine.embeddings.cli.termination_raises)
        if not (isinstance(exc.code, int) and exc.code > 128):
            raise
        from engine.run_end import ending

        print(f"{ending(exc)[1]}: {_stopped(cfg.run_dir)}", file=sys.stderr)
        return exc.code
    if args.json:
        print(json.dumps(summary))
        return 0
    if summary["mode"] == "svd":
        print(
            f"SVD of the PPMI matrix ({summary['tokens']:,} tokens, vocab {summary['vocab']:,}): "
            f"PIP loss {summary['pip_loss']:.4f} against the reference  "
            f"{summary['wall_s']:.1f} s  → {cfg.run_dir}"
        )
    else:
        print(
            f"PIP loss {summary['pip_loss_initial']:.4f} → {summary['pip_loss']:.4f}  "
            f"{summary['s_per_epoch']:.1f} s/epoch  {summary['words_per_s']:,.0f} words/s  "
            f"→ {cfg.run_dir}"
        )
    for word, near in summary["neighbours"].items():
        print(f"  {word}: {', '.join(near)}")
    for warning in summary.get("warnings") or []:
        if warning.get("stage") != "prepare":  # the input's: said as it was read (_Printer)
            print(visible(f"WARNING: {warning['message']}"), file=sys.stderr)
    return 0

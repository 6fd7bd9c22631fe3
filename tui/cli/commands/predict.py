"""`sentitop predict`: P(positive) of each text with a trained run."""

from __future__ import annotations

import argparse
import codecs
import json
import sys
from typing import Any

from tui.cli.commands import RUN_HELP


def register(subparsers: Any) -> None:
    """Add the `predict` parser."""
    parser = subparsers.add_parser("predict", help="P(positive) of each given text")
    parser.add_argument("run_dir", metavar="RUN", help=RUN_HELP)
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="review texts")
    parser.add_argument(
        "--input",
        metavar="FILE",
        help="also score FILE: one review per line (UTF-8; blank lines skipped; - for stdin)",
    )
    parser.add_argument(
        "--adapt-prior",
        action="store_true",
        help="re-weight the probabilities to the batch's positive rate as the model estimates "
        "it (EM over all the texts given; needs at least 50)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    parser.set_defaults(func=run, trailing_positionals="texts")  # texts after options too


def read_lines(path: str) -> list[str]:
    """The non-blank lines of a UTF-8 file (or stdin for ``-``), newline stripped."""
    from engine.errors import InputError

    try:
        if path == "-":
            raw = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as fh:
                raw = fh.read()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    texts = []
    raw = raw.removeprefix(codecs.BOM_UTF8)  # a UTF-8 signature (Windows editors) is no text
    for number, line in enumerate(raw.split(b"\n"), start=1):
        try:
            text = line.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise InputError(f"{path}, line {number}: not UTF-8 text") from None
        if text:
            texts.append(text)
    return texts


def run(args: argparse.Namespace) -> int:
    """Print one probability per text (and the batch's estimated positive rate when asked)."""
    from engine.errors import InputError
    from engine.sentiment.evaluate import batch_prior, load_run, score_texts
    from engine.sentiment.prior_shift import shift_warning
    from tui.cli.commands import train_folder

    blank = [i + 1 for i, text in enumerate(args.texts) if not text.strip()]
    if blank:  # a score of nothing would look like a verdict (lines of --input skip blanks)
        raise InputError(
            f"TEXT {blank[0]} is empty or only spaces: there is nothing to score",
            hint="leave it out, or give the review's text",
        )
    texts = list(args.texts) + (read_lines(args.input) if args.input else [])
    if not texts:
        raise InputError("no text to score", hint="give TEXT arguments or --input FILE")
    loaded = load_run(train_folder(args.run_dir))
    if loaded.from_checkpoint:
        print(f"warning: {loaded.from_checkpoint}", file=sys.stderr)
    raw, known = score_texts(loaded, texts)
    proba, estimate = batch_prior(loaded, raw, args.adapt_prior)
    if args.json:
        print(
            json.dumps(
                [
                    {"text": t, "p_positive": float(p), "known_words": int(n)}
                    for t, p, n in zip(texts, proba, known, strict=True)
                ]
            )
        )
    else:
        for text, p in zip(texts, proba, strict=True):
            print(f"{p:.4f}  {text}")
    blind = [i + 1 for i, n in enumerate(known) if n == 0]
    if blind:
        print(unread_warning(blind, len(texts)), file=sys.stderr)
    if estimate is not None:
        note = (
            f"positive rate: training {estimate.source_rate:.4f}, this batch "
            f"{estimate.target_rate:.4f} as the model estimates it"
            + ("; probabilities re-weighted to it" if args.adapt_prior else "")
        )
        print(note, file=sys.stderr)
        warning = None if args.adapt_prior else shift_warning(estimate)
        if warning:
            print(warning, file=sys.stderr)
    return 0


def unread_warning(numbers: list[int], total: int) -> str:
    """The warning for texts with no word of the model's vocabulary (1-based numbers)."""
    shown = ", ".join(map(str, numbers[:10])) + (", …" if len(numbers) > 10 else "")
    which = f"text {shown}" if len(numbers) == 1 else f"texts {shown}"
    return (
        f"warning: {len(numbers)} of {total} texts have no word the model knows ({which}): "
        "their scores say nothing about what they mean"
    )

"""`sentitop predict`: P(positive) of each text with a trained run."""

from __future__ import annotations

import argparse
import codecs
import json
import sys
from typing import Any

from tui.cli.commands import PREVIEW_CHARS, RUN_HELP, preview


def register(subparsers: Any) -> None:
    """Add the `predict` parser."""
    parser = subparsers.add_parser(
        "predict",
        help="P(positive) of each given text",
        description="Scores review texts with a trained run's model, through the run's own "
        "preprocessing and vocabulary: one line per text with its P(positive).",
    )
    parser.add_argument("run_dir", metavar="RUN", help=RUN_HELP)
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="review texts")
    parser.add_argument(
        "--input",
        metavar="FILE",
        help="also score FILE: one review text per line (UTF-8, plain or gzip; blank lines "
        "skipped; - for stdin); for JSON review records with ratings use `sentitop eval`",
    )
    parser.add_argument(
        "--adapt-prior",
        action="store_true",
        help="re-weight the probabilities to the batch's positive rate as the model estimates "
        "it (EM over all the texts given; needs at least 50)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list, one object per text in input order (TEXT arguments, then the "
        "lines of --input): index (0-based), line (of --input; null for a TEXT), text, preview "
        f"(the text shortened to {PREVIEW_CHARS} characters on one line, as the plain output "
        "shows it), chars (the text's length), p_positive, known_words, words (the text's "
        "length in the model's words) and words_read (the model reads at most the run's "
        "preprocess.seq_len of them, as in training)",
    )
    parser.set_defaults(func=run, trailing_positionals="texts")  # texts after options too


def read_lines(path: str) -> list[str]:
    """The non-blank lines of a UTF-8 file (or stdin for ``-``), newline stripped."""
    return [text for _, text in read_numbered_lines(path)]


def read_numbered_lines(path: str) -> list[tuple[int, str]]:
    """(1-based line number, text) of each non-blank line of a UTF-8 text file, plain or gzip
    (or stdin for ``-``); InputError for a file of JSON records, which are reviews for `eval`
    rather than texts."""
    import gzip
    import zlib

    from engine.errors import InputError

    try:
        if path == "-":
            raw = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as fh:
                raw = fh.read()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if raw.startswith(b"\x1f\x8b"):  # gzip's magic number
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(
                f"{path}: not a readable gzip file ({exc})",
                hint="the file is truncated or damaged (`gzip -t FILE` checks one)",
            ) from None
    texts = []
    raw = raw.removeprefix(codecs.BOM_UTF8)  # a UTF-8 signature (Windows editors) is no text
    for number, line in enumerate(raw.split(b"\n"), start=1):
        try:
            text = line.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise InputError(f"{path}, line {number}: not UTF-8 text") from None
        if text:
            texts.append((number, text))
    if texts and _is_json_record(texts[0][1]):
        raise InputError(
            f"{path}, line {texts[0][0]}: a JSON record, not a review text: predict would "
            "score its field names and values as words",
            hint="`sentitop eval RUN --input FILE` scores review records (with their ratings); "
            "predict takes plain texts, one per line",
        )
    return texts


def _is_json_record(line: str) -> bool:
    """Whether a line is a whole JSON object (a review record rather than a text)."""
    if not (line.startswith("{") and line.endswith("}")):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    """Print one probability per text (and the batch's estimated positive rate when asked)."""
    from engine.errors import InputError
    from engine.sentiment.evaluate import batch_prior, cut_note, load_run, score_texts
    from engine.sentiment.prior_shift import refusal_warning, shift_warning
    from tui.cli.commands.evaluate import classifier_folder, training_words

    blank = [i + 1 for i, text in enumerate(args.texts) if not text.strip()]
    if blank:  # a score of nothing would look like a verdict (lines of --input skip blanks)
        raise InputError(
            f"TEXT {blank[0]} is empty or only spaces: there is nothing to score",
            hint="leave it out, or give the review's text",
        )
    for number, text in enumerate(args.texts, start=1):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:  # argv bytes that were not UTF-8 (surrogate escapes)
            raise InputError(
                f"TEXT {number} is not UTF-8 text (a byte that is not UTF-8 at character "
                f"{exc.start + 1})",
                hint="convert it to UTF-8 first (e.g. iconv -f latin1 -t utf-8), as --input "
                "files must be",
            ) from None
    numbered = read_numbered_lines(args.input) if args.input else []
    if args.input and not numbered:
        raise InputError(
            f"{args.input}: no text to score (the file is empty or all its lines are blank)",
            hint="one review text per line",
        )
    texts = list(args.texts) + [text for _, text in numbered]
    lines: list[int | None] = [None] * len(args.texts) + [n for n, _ in numbered]
    if not texts:
        raise InputError("no text to score", hint="give TEXT arguments or --input FILE")
    loaded = load_run(classifier_folder(args.run_dir))
    if loaded.from_checkpoint:
        print(f"warning: {loaded.from_checkpoint}", file=sys.stderr)
    scored = score_texts(loaded, texts)
    proba, estimate = batch_prior(loaded, scored.proba, args.adapt_prior)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "index": i,
                        "line": line,
                        "text": t,
                        "preview": preview(t),
                        "chars": len(t),
                        "p_positive": float(p),
                        "known_words": int(n),
                        "words": int(w),
                        "words_read": min(int(w), scored.seq_len),
                    }
                    for i, (t, line, p, n, w) in enumerate(
                        zip(texts, lines, proba, scored.known, scored.words, strict=True)
                    )
                ]
            )
        )
    else:
        for text, p in zip(texts, proba, strict=True):
            print(f"{p:.4f}  {preview(text)}")
    blind = [i + 1 for i, n in enumerate(scored.known) if n == 0]
    if blind:
        print(unread_warning(blind, len(texts)), file=sys.stderr)
    cut = [i + 1 for i in scored.cut()]
    if cut:
        print(cut_note(len(cut), len(texts), scored.seq_len, cut), file=sys.stderr)
    if estimate is not None:
        adapted = args.adapt_prior and estimate.trusted
        note = (
            f"positive rate: {training_words(estimate.to_dict())}, this batch "
            f"{estimate.target_rate:.4f} as the model estimates it"
            + ("; probabilities re-weighted to it" if adapted else "")
            + ("" if estimate.trusted else "; not trusted, no shift claimed")
        )
        print(note, file=sys.stderr)
        if args.adapt_prior and not estimate.trusted:
            print(refusal_warning(estimate), file=sys.stderr)
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

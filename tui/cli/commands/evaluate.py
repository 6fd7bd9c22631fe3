"""`sentitop eval`: score a finished run on new raw review files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from engine.errors import visible
from tui.cli.commands import RUN_HELP, integer_at_least, preview


def register(subparsers: Any) -> None:
    """Add the `eval` parser."""
    parser = subparsers.add_parser(
        "eval",
        help="accuracy/F1/ROC AUC of a trained run on raw review files, vs the majority rate",
        description="Applies the run's own preprocessing and vocabulary to the files.",
    )
    parser.add_argument("run_dir", metavar="RUN", nargs="?", help=RUN_HELP)
    parser.add_argument(
        "--input",
        nargs="+",
        required=True,
        metavar="PATH",
        help="raw review files (McAuley JSON / JSON lines, optionally .gz), or folders of them "
        "(RUN may also come last: `--input FILE... RUN`)",
    )
    parser.add_argument(
        "--adapt-prior",
        action="store_true",
        help="re-weight the probabilities to the files' positive rate as the model estimates "
        "it without their labels (EM; for reviews whose share of positives differs from the "
        "training data's, e.g. another product category)",
    )
    parser.add_argument(
        "--format",
        choices=["auto", "mcauley", "jsonl"],
        help="the files' record format, when it differs from what the run was trained on",
    )
    parser.add_argument("--text-field", metavar="NAME", help="the files' review-text field")
    parser.add_argument("--rating-field", metavar="NAME", help="the files' rating field")
    parser.add_argument(
        "--label-field",
        metavar="NAME",
        help="the files' 0/1 label field (1 = positive), instead of a rating (files holding "
        "only text and label are recognised without it)",
    )
    parser.add_argument(
        "--misses",
        type=integer_at_least(0),
        default=0,
        metavar="N",
        help="also list N of the reviews the model got wrong, the most confident mistakes "
        "first, with file, line, true label and P(positive) (in --json: `misses`, full texts)",
    )
    parser.add_argument(
        "--max-line-bytes",
        type=integer_at_least(1),
        metavar="BYTES",
        help="read lines up to this long (default: the run's preprocessing limit, 1,048,576 "
        "unless it set another); longer ones are skipped as too_long",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the metrics (and a warning on stderr when the model does not beat the majority);
    with --json the warnings are in the object too, under ``warnings``."""
    from engine.errors import InputError
    from engine.sentiment.evaluate import evaluate_files, load_run

    if "-" in args.input:
        raise InputError(
            "--input -: eval reads review files, not stdin",
            hint="save the reviews to a file (.jsonl or .jsonl.gz) and pass its name",
        )
    fields = {"format": args.format, "text_field": args.text_field}
    fields["rating_field"] = args.rating_field
    fields["label_field"] = args.label_field
    fields["max_line_bytes"] = args.max_line_bytes
    run_folder = run_after_inputs(args) if args.run_dir is None else classifier_folder(args.run_dir)
    loaded = load_run(run_folder)
    notes = [loaded.from_checkpoint] if loaded.from_checkpoint else []
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    metrics = evaluate_files(loaded, args.input, args.adapt_prior, fields, args.misses)
    for left_out in metrics["input_warnings"]:
        print(visible(f"warning: {left_out['message']}"), file=sys.stderr)
    checks = (skipped_warning, majority_warning, chance_warning, repeats_warning, prior_warning)
    warnings = [w for w in (check(metrics) for check in checks) if w]
    if args.json:
        metrics["from_checkpoint"] = loaded.from_checkpoint
        metrics["warnings"] = [
            *notes,
            *(left_out["message"] for left_out in metrics["input_warnings"]),
            *(w.removeprefix("warning: ") for w in warnings),
        ]
        print(json.dumps(metrics))
    else:
        print("\n".join(report_lines(metrics) + miss_lines(metrics)))
    for warning in warnings:
        print(warning, file=sys.stderr)
    return 0


def run_after_inputs(args: argparse.Namespace) -> Path:
    """RUN written after the input files (`eval --input a.jsonl b.jsonl RUN`: --input takes
    every path, so argparse leaves RUN empty): the last --input path when it is a run and not
    a file; InputError naming what is missing otherwise."""
    from engine.errors import InputError

    last = args.input[-1]
    if len(args.input) > 1 and not Path(last).is_file():
        try:
            folder = classifier_folder(last)
        except InputError:
            pass
        else:
            args.input = args.input[:-1]
            return folder
    raise InputError(
        "no RUN given: name the run whose model scores the files",
        hint="sentitop eval RUN --input FILE [FILE ...] (RUN: a runs/<id> folder or run id)",
    )


def classifier_folder(ref: str) -> Path:
    """The training folder of RUN (as RUN_HELP says); InputError that says so when RUN is an
    embeddings run, which holds word vectors and no classifier."""
    from engine.embeddings.config import CONFIG_FILE
    from engine.errors import InputError
    from tui.cli.commands import train_folder

    try:
        return train_folder(ref)
    except InputError:
        if (Path(ref) / CONFIG_FILE).is_file():
            raise InputError(
                f"{ref} is an embeddings run (`sentitop embed`): it holds word vectors, not a "
                "sentiment classifier to score with",
                hint=f"pass a `sentitop run`/`train` folder; to use these vectors, train one "
                f"with `sentitop train --model-init-embeddings {ref}`",
            ) from None
        raise


def prior_warning(metrics: dict[str, Any]) -> str | None:
    """A warning when the files' estimated positive rate is far from the training data's and
    the probabilities were not adapted to it, or when --adapt-prior was asked for but refused
    (an estimate that cannot be trusted: the probabilities are kept)."""
    from engine.sentiment.prior_shift import PriorEstimate, refusal_warning, shift_warning

    if metrics.get("prior_adapted") or not metrics.get("prior"):
        return None
    estimate = PriorEstimate(**metrics["prior"])
    if metrics.get("prior_refused"):
        return refusal_warning(estimate)
    return shift_warning(estimate)


def prior_line(metrics: dict[str, Any]) -> str | None:
    """The estimated positive rate of the files, and what adapting to it changed."""
    prior = metrics.get("prior")
    if not prior:
        return None
    line = (
        f"positive rate: {training_words(prior)}, these files "
        f"{prior['target_rate']:.4f} as the model estimates it (true "
        f"{_true_rate(metrics):.4f})"
    )
    if metrics.get("prior_adapted"):
        line += (
            f"; decisions re-weighted to it (accuracy without: {metrics['unadapted_accuracy']:.4f})"
        )
    elif prior.get("doubt"):
        line += f"; not trusted, no shift claimed: {prior['doubt']}"
    return line


def training_words(prior: dict[str, Any]) -> str:
    """The model's prior as the positive-rate line names it: the training data's rate, or the
    prior a pos_weight made of it (with the data's rate beside it)."""
    if prior.get("data_rate") is None:
        return f"training {prior['source_rate']:.4f}"
    return (
        f"model's prior {prior['source_rate']:.4f} (pos_weight; training data "
        f"{prior['data_rate']:.4f})"
    )


def _true_rate(metrics: dict[str, Any]) -> float:
    rate = float(metrics["majority_rate"])
    return rate if metrics["majority_label"] else 1.0 - rate


def report_lines(metrics: dict[str, Any]) -> list[str]:
    """The metrics as plain text lines: scores, the majority baseline, the confusion matrix."""
    (tn, fp), (fn, tp) = metrics["confusion"]
    auc = metrics.get("auc")
    name = "positive" if metrics["majority_label"] else "negative"
    low, high = metrics["accuracy_interval"]
    return [
        f"n {metrics['n']}  accuracy {metrics['accuracy']:.4f}  precision "
        f"{metrics['precision']:.4f}  recall {metrics['recall']:.4f}  f1 {metrics['f1']:.4f}  "
        f"roc_auc {'n/a (one class)' if auc is None else f'{auc:.4f}'}",
        f"accuracy 95 % interval {low:.4f} to {high:.4f} (Wilson, {metrics['n']} reviews)",
        f"majority rate {metrics['majority_rate']:.4f} (always {name}); accuracy "
        f"{100 * (metrics['accuracy'] - metrics['majority_rate']):+.2f} points over it "
        f"(one-sided McNemar p {p_text(metrics['majority_p'])})",
        *filter(None, [prior_line(metrics), skipped_line(metrics), longer_line(metrics)]),
        "confusion (rows = true, columns = predicted)",
        f"            pred neg  pred pos\ntrue neg  {tn:>9} {fp:>9}\ntrue pos  {fn:>9} {tp:>9}",
    ]


def longer_line(metrics: dict[str, Any]) -> str | None:
    """How many texts were longer than the model reads (only their start is scored)."""
    from engine.sentiment.evaluate import cut_note

    cut = metrics.get("longer_than_read") or 0
    return cut_note(cut, metrics["n"], metrics["seq_len"]) if cut else None


def miss_lines(metrics: dict[str, Any]) -> list[str]:
    """The listed mistakes (``misses``), one line each: true label, P(positive), where, and
    the text as the model read it (cleaned), shortened to one line."""
    listed = metrics.get("misses")
    if listed is None:
        return []
    (_, fp), (fn, _) = metrics["confusion"]
    if not listed:
        return ["mistakes: none (every review decided right)"]
    lines = [
        f"most confident mistakes ({len(listed)} of {fp + fn:,}; text as the model read it)",
        "true  p(pos)  where",
    ]
    for miss in listed:
        label = "pos " if miss["label"] else "neg "
        where = preview(f"{miss['file']}:{miss['line']}", 200)
        if miss.get("repeats"):  # the same text wrong at more lines: listed once
            where += f" (+{miss['repeats']} more line{'s' if miss['repeats'] > 1 else ''})"
        lines.append(f"{label}  {miss['p_positive']:.4f}  {where}  {preview(miss['text'])}")
    return lines


CHANCE_P = 0.05
"""`sentitop eval` warns when a gain over the majority rate is this likely by chance or more."""


P_FLOOR = 1e-16
"""p-values below this are shown as "< 1e-16" (the exact tail underflows to 0 on large sets)."""


def p_text(p: float) -> str:
    """A p-value as shown: two significant digits, never "0"."""
    return f"< {P_FLOOR:.0e}" if p < P_FLOOR else f"{p:.2g}"


def chance_warning(metrics: dict[str, Any]) -> str | None:
    """A warning when the model beats the majority rate, but by a margin these reviews cannot
    tell from chance (one-sided McNemar p >= CHANCE_P)."""
    if not metrics["beats_majority"] or metrics["majority_p"] < CHANCE_P:
        return None
    name = "positive" if metrics["majority_label"] else "negative"
    return (
        f"warning: the gain over always predicting {name} is within chance on these "
        f"{metrics['n']} reviews (McNemar p {p_text(metrics['majority_p'])}): more labelled "
        "reviews are needed to tell whether the model beats it"
    )


def skipped_line(metrics: dict[str, Any]) -> str | None:
    """How many lines were skipped and why: the three commonest reasons explained, the count
    of each other one after them (the parts add up to the total)."""
    skipped = metrics.get("skipped") or {}
    total = sum(skipped.values())
    if not total:
        return None
    from engine.preprocess.records import SKIP_REASONS

    commonest = sorted(skipped.items(), key=lambda item: -item[1])
    at = metrics.get("skipped_at") or {}

    def lines_of(reason: str) -> str:  # which lines, to look at them: "r.jsonl:3, r.jsonl:9"
        shown = at.get(reason) or []
        return f", e.g. {', '.join(shown)}" if shown else ""

    why = "; ".join(
        f"{n:,} {reason} ({SKIP_REASONS.get(reason, reason)}{lines_of(reason)})"
        for reason, n in commonest[:3]
    )
    if commonest[3:]:
        why += "; " + ", ".join(f"{n:,} {reason}" for reason, n in commonest[3:])
    return f"skipped {total:,} of {metrics['lines']:,} lines: {why}"


def skipped_warning(metrics: dict[str, Any]) -> str | None:
    """A warning when more lines were skipped than preprocessing lets pass quietly."""
    from dataclasses import fields

    from engine.config import PreprocessConfig

    limit = next(f.default for f in fields(PreprocessConfig) if f.name == "max_skipped_share")
    assert isinstance(limit, float)
    skipped, lines = sum((metrics.get("skipped") or {}).values()), metrics.get("lines") or 0
    if not lines or skipped / lines <= limit:
        return None
    return (
        f"warning: {skipped / lines:.0%} of the {lines:,} lines were skipped (more than "
        f"{limit:.0%}): the figures cover only the {metrics['n']:,} readable reviews"
    )


REPEATS_SHARE = 0.9
"""`sentitop eval` warns when fewer than this share of the reviews have distinct texts."""


def repeats_warning(metrics: dict[str, Any]) -> str | None:
    """A warning when many reviews repeat a text: the interval and p count each as new
    evidence, so they look surer than the files are."""
    distinct = metrics.get("distinct_texts")
    if distinct is None or distinct >= REPEATS_SHARE * metrics["n"]:
        return None
    verb = "has a distinct text" if distinct == 1 else "have distinct texts"
    return (
        f"warning: only {distinct:,} of these {metrics['n']:,} reviews {verb}: the "
        "interval and p count each repeat as new evidence and look surer than they are"
    )


def majority_warning(metrics: dict[str, Any]) -> str | None:
    """A warning when the accuracy does not beat always predicting the majority label (when
    the reviews hold one class only, a warning that says so: no model can beat that)."""
    if metrics["beats_majority"]:
        return None
    name = "positive" if metrics["majority_label"] else "negative"
    if metrics["majority_rate"] >= 1.0:
        return (
            f"warning: all {metrics['n']} reviews are {name} (one class): ROC AUC is undefined "
            f"and always predicting {name} is right every time, so no model can beat it; the "
            f"accuracy {metrics['accuracy']:.4f} only says how often the model predicted "
            f"{name}. Evaluate on reviews of both classes"
        )
    return (
        f"warning: accuracy {metrics['accuracy']:.4f} does not beat always predicting "
        f"{name} ({metrics['majority_rate']:.4f}) on these {metrics['n']} reviews: "
        "the model is no better than the majority class here"
    )

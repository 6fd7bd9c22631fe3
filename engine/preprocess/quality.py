"""Data-quality gates of a preprocessing result: unusable input is an error, a suspicious one a
warning (no dataset is published for an error; warnings go to stats.json and `warning` events)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.config import PreprocessConfig
from engine.errors import InputError
from engine.preprocess.readers import check_label_values, is_label_spec
from engine.preprocess.records import SKIP_REASONS, RecordSpec


def _files(cfg: PreprocessConfig) -> str:
    shown = ", ".join(cfg.inputs[:3])
    return shown + (f" (+{len(cfg.inputs) - 3} more)" if len(cfg.inputs) > 3 else "")


def _skip_breakdown(
    stats: Mapping[str, Any], cfg: PreprocessConfig, specs: Sequence[RecordSpec], top: int = 3
) -> str:
    """'13 invalid_utf8 (line is not valid UTF-8, e.g. f.json:1), 2 ...' for the largest reasons."""
    skipped = stats.get("skipped") or {}
    examples = stats.get("skipped_examples") or {}
    ranked = sorted(((n, r) for r, n in skipped.items() if n), reverse=True)[:top]
    parts = []
    for n, reason in ranked:
        where = ", ".join((examples.get(reason) or [])[:1])
        why = _reason(reason, cfg, specs) + (f", e.g. {where}" if where else "")
        parts.append(f"{n:,} {reason} ({why})")
    return "; ".join(parts)


def _reason(reason: str, cfg: PreprocessConfig, specs: Sequence[RecordSpec]) -> str:
    """What a skip reason means, naming the field read when every file was read alike (a
    --label-field run said "rating field absent" of its label)."""
    fields = {(spec.text_field, spec.rating_field) for spec in specs}
    if len(fields) != 1:
        return SKIP_REASONS.get(reason, reason)
    ((text, rating),) = fields
    score = f"label field `{rating}`" if cfg.label_field else f"rating field `{rating}`"
    named = {
        "missing_text": f"text field `{text}` absent or null",
        "text_not_string": f"text field `{text}` is not a string",
        "missing_rating": f"{score} absent or null",
        "bad_rating": f"{score} not a whole number",
        "rating_out_of_range": f"{score} outside {_scale(specs)}",
    }
    if cfg.label_field:
        named["bad_rating"] = named["rating_out_of_range"] = f"{score} not 0 or 1"
    return named.get(reason) or SKIP_REASONS.get(reason, reason)


def _scale(specs: Sequence[RecordSpec]) -> str:
    """The rating scale the files were read with ("1..5"), or its setting names when they differ."""
    scales = {(spec.rating_min, spec.rating_max) for spec in specs}
    if len(scales) != 1:
        return "rating_min..rating_max"
    ((low, high),) = scales
    return f"{low}..{high} (--rating-max sets the top)"


def check_preprocess(
    cfg: PreprocessConfig, stats: Mapping[str, Any], specs: Sequence[RecordSpec] = ()
) -> list[dict[str, str]]:
    """Raise InputError (exit 2) when no usable review or only one class remains, or a label
    field is not 0/1 on many lines (a star rating); return the warnings ({code, message}) for
    empty input files, a high skipped share or a rare class."""
    read, kept = int(stats["read"]), int(stats["kept"])
    files = _files(cfg)
    if kept == 0:
        if read == 0:
            raise InputError(
                f"{files}: empty input, no review lines to preprocess",
                hint="pass a file of JSON-lines reviews (`sentitop synth` makes one)",
            )
        why = _skip_breakdown(stats, cfg, specs)
        why = why or f"{int(stats.get('duplicates', 0)):,} duplicates"
        hint = _fix(stats, cfg)
        raise InputError(f"{files}: no usable review in {read:,} line(s): {why}", hint=hint)
    if specs and all(is_label_spec(spec) for spec in specs):  # one rule for all (resolve_specs)
        skipped_by = stats.get("skipped") or {}
        check_label_values(cfg.inputs, specs[0], skipped_by, read, cfg.max_line_bytes)
    positive, negative = int(stats["positive"]), int(stats["negative"])
    if not positive or not negative:
        have = "positive" if positive else "negative"
        each = "the one usable review is" if kept == 1 else f"all {kept:,} usable reviews are"
        dropped = int(stats.get("duplicates", 0))  # 500 identical lines read as one review
        also = f" ({dropped:,} more of the {read:,} lines repeated a text)" if dropped else ""
        skipped = int(stats.get("skipped_total", 0))  # the other class may be among them
        why = _skip_breakdown(stats, cfg, specs) if skipped else ""
        lost = f"; {skipped:,} of the {read:,} lines were skipped: {why}" if why else ""
        hint = "ratings up to --negative-max are negative; add reviews of the other class"
        raise InputError(
            f"{files}: {each} {have}{also}{lost}; a classifier needs both classes",
            hint=_fix(stats, cfg) + "; or " + hint if skipped * 2 > read else hint,
        )
    warnings = []
    empty = list(stats.get("empty_files") or [])
    if empty:  # a folder's empty files are left out before, with a warning of their own
        shown = ", ".join(empty[:3]) + (f" (+{len(empty) - 3} more)" if len(empty) > 3 else "")
        warnings.append(
            {
                "code": "empty_input_file",
                "message": f"{len(empty)} input file(s) hold no lines: {shown}",
            }
        )
    skipped = int(stats["skipped_total"])
    if read and skipped / read > cfg.max_skipped_share:
        warnings.append(
            {
                "code": "skipped_share",
                "message": f"{files}: skipped {share_text(skipped, read)} of {read:,} lines "
                "(more than "
                f"max_skipped_share {cfg.max_skipped_share:.0%}): "
                + _skip_breakdown(stats, cfg, specs),
            }
        )
    warnings.extend(_files_mostly_skipped(stats, cfg, specs))
    if cfg.title_rows and not int(stats.get("title_rows", 0)):
        fields = sorted({s.title_field or "" for s in specs} - {""})
        warnings.append(
            {
                "code": "no_title_rows",
                "message": f"{files}: title_rows is on but no training review had a title "
                f"(field {' / '.join(fields) or 'none'}): the dataset has review rows only",
            }
        )
    if not int(stats.get("test", 0)):
        warnings.append(
            {
                "code": "empty_test_split",
                "message": f"the test split is empty (test_fraction {cfg.test_fraction:g} of "
                f"{kept:,} reviews): `sentitop train` needs held-out reviews to pick its best "
                "epoch and measure accuracy, and will refuse this dataset (`sentitop embed "
                "--data` can still use it: word vectors need no held-out reviews)",
            }
        )
    rare, name = min((positive, "positive"), (negative, "negative"))
    if rare / kept < cfg.min_class_share:
        warnings.append(
            {
                "code": "class_share",
                "message": f"{files}: only {rare / kept:.1%} of {kept:,} usable reviews are "
                f"{name} ({rare:,}; less than min_class_share {cfg.min_class_share:.0%})",
            }
        )
    return warnings


def _files_mostly_skipped(
    stats: Mapping[str, Any], cfg: PreprocessConfig, specs: Sequence[RecordSpec]
) -> list[dict[str, str]]:
    """A warning per input file (of several) whose own skipped share passes
    max_skipped_share: a file of binary data beside good files was only a count in a table."""
    lines = stats.get("lines_per_file") or []
    per_file = stats.get("skipped_per_file") or []
    if len(cfg.inputs) < 2 or len(per_file) != len(cfg.inputs):
        return []
    out = []
    for path, read, skips in zip(cfg.inputs, lines, per_file, strict=False):
        skipped = sum(skips.values())
        if not read or skipped / read <= cfg.max_skipped_share:
            continue
        ranked = sorted(((n, r) for r, n in skips.items()), reverse=True)[:3]
        why = "; ".join(f"{n:,} {r} ({_reason(r, cfg, specs)})" for n, r in ranked)
        hint = layout_fix(skips, [path])
        out.append(
            {
                "code": "skipped_share_file",
                "message": f"{path}: skipped {share_text(skipped, read)} of its {read:,} lines "
                f"(more than max_skipped_share {cfg.max_skipped_share:.0%}): {why}"
                + (f"; {hint}" if hint else ""),
            }
        )
    return out


def _fix(stats: Mapping[str, Any], cfg: PreprocessConfig) -> str:
    """The hint for input with no usable review, by its commonest skip reason: an encoding or a
    JSON array is not fixed by naming fields, nor are long lines or a preset's stopwords."""
    skipped = stats.get("skipped") or {}
    commonest = max(skipped, key=lambda reason: skipped[reason], default=None)
    if commonest == "too_long":
        return (
            f"its lines are longer than --max-line-bytes ({cfg.max_line_bytes:,} bytes; in a "
            "profile preprocess.max_line_bytes): raise it if they are reviews, e.g. "
            f"--max-line-bytes {max(cfg.max_line_bytes * 64, 64 << 20)}"
        )
    if commonest == "only_stopwords" and cfg.preset != "default":
        return (
            f"--preset {cfg.preset} drops stopwords, and these reviews hold nothing else: "
            "--preset default keeps every word"
        )
    return layout_fix(skipped, cfg.inputs) or (
        "check the file format: --format, --text-field, --rating-field or --label-field "
        "(in a profile: preprocess.format, .text_field, .rating_field, .label_field)"
    )


def layout_fix(skipped: Mapping[str, int], inputs: Sequence[str]) -> str | None:
    """What fixes files of which no line could be read, when naming fields would not: not
    gzip under a .gz name, not UTF-8, one JSON array (by the commonest skip reason); None
    otherwise. (Shared with `sentitop eval`.)"""
    commonest = max(skipped, key=lambda reason: skipped[reason], default=None)
    fake = [p for p in inputs if p.endswith(".gz") and _not_gzip(p)]
    if commonest in ("invalid_utf8", "malformed_json") and fake:
        return (
            f"{fake[0]} is named .gz but is not gzip (no gzip header): it may be damaged, or "
            "another format (zip, bz2, xz) under that name; check it with `file`, and give the "
            "review lines as JSON lines, plain or gzip"
        )
    binary = [p for p in inputs if _binary(p)] if commonest == "invalid_utf8" else []
    if binary:  # converting random bytes from Latin-1 gives UTF-8 junk
        return (
            f"{binary[0]} is binary data, not text (NUL or control bytes in its first 64 KB): "
            "not a review file, or compressed in another format (zip, bz2, xz); check it with "
            "`file`"
        )
    if commonest == "python_literal":
        return (
            "the lines are Python literals ({'reviewText': ...}, as McAuley's files are), not "
            "JSON: --format auto (the default) or mcauley reads them"
        )
    if commonest == "invalid_utf8":
        return (
            "the file is not UTF-8 text (Latin-1 or Windows-1252?): convert it first, e.g. "
            "iconv -f latin1 -t utf-8 FILE > FILE.utf8.jsonl"
        )
    if commonest in ("not_an_object", "malformed_json") and any(map(_json_array, inputs)):
        return (
            "the file is one JSON array, not JSON lines: preprocessing reads one review "
            "object per line; e.g. jq -c '.[]' FILE > FILE.jsonl"
        )
    return None


CONTROL_BYTES = bytes(set(range(32)) - {9, 10, 13}) + b"\x7f"
"""Bytes no text encoding a review file might use puts in text (tab and line ends aside)."""


def _binary(path: str, sample: int = 1 << 16) -> bool:
    """Whether a local file's first ``sample`` bytes hold a NUL or over 5 % control bytes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(sample)
    except OSError:
        return False
    if not head or head[:2] == b"\x1f\x8b":  # gzip: its text is read through it
        return False
    control = len(head) - len(head.translate(None, CONTROL_BYTES))
    return b"\0" in head or control > 0.05 * len(head)


def _not_gzip(path: str) -> bool:
    """Whether a local file named .gz lacks the gzip magic bytes (read as plain text)."""
    from engine.preprocess.readers import is_gzip

    try:
        return not is_gzip(path)
    except OSError:
        return False


def _json_array(path: str) -> bool:
    """Whether a local input file starts with "[" (one JSON array, not JSON lines)."""
    from engine.preprocess.readers import open_binary

    try:
        with open_binary(path) as fh:
            return fh.read(4096).lstrip().startswith(b"[")
    except (OSError, EOFError, ValueError):
        return False


def share_text(part: int, whole: int) -> str:
    """``part / whole`` as a percentage that reads 100 % (or 0 %) only when it is: 5,000 of
    5,002 lines is "99.96%", not "100%"."""
    share = part / whole
    if not 0 < part < whole or f"{share:.0%}" not in ("0%", "100%"):
        return f"{share:.0%}"
    if f"{share:.2%}" not in ("0.00%", "100.00%"):
        return f"{share:.2%}"
    return "under 0.01%" if share < 0.5 else "over 99.99%"


def one_class_splits(h5_path: str | Path) -> list[dict[str, str]]:
    """A warning for each split of a written dataset.h5 whose reviews are all of one class:
    `sentitop train` refuses such a dataset (a small or skewed input can put the rare class in
    the train split only), so preprocessing says so instead of ending as if all were well."""
    import h5py

    warnings = []
    with h5py.File(h5_path, "r") as fh:
        for split in ("train", "test"):
            labels = fh[f"{split}/labels"]
            n = int(labels.shape[0])
            have = _only_class(labels, n)
            if have is not None:
                more = " or a larger test_fraction" if split == "test" else ""
                each = (
                    f"the one review of the {split} split is"
                    if n == 1
                    else f"all {n:,} reviews of the {split} split are"
                )
                warnings.append(
                    {
                        "code": "one_class_split",
                        "message": f"{each} {have}: `sentitop train` will refuse this "
                        "dataset (each split needs both classes); preprocess more reviews of "
                        f"the other class{more}",
                    }
                )
    return warnings


def _only_class(labels: Any, n: int) -> str | None:
    """The class of every one of the ``n`` labels ("positive" or "negative"); None when both
    occur (read a chunk at a time, stopping at the first chunk that shows both: at the corpus's
    size the train split's labels are ≈ 20 M values, of which a few thousand decide)."""
    step = int(labels.chunks[0]) if labels.chunks else 1 << 20
    positive = negative = False
    for start in range(0, n, step):
        block = labels[start : start + step]
        ones = int(np.count_nonzero(block))
        positive, negative = positive or ones > 0, negative or ones < len(block)
        if positive and negative:
            return None
    if not n:
        return None
    return "positive" if positive else "negative"

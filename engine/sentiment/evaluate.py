"""Score new raw reviews with a finished run: its own preprocessing, vocabulary and weights."""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from engine.errors import InputError, TrainError
from engine.preprocess.records import RecordSpec
from engine.preprocess.reduce import UNK_ID
from engine.sentiment import checkpoint as ckpt
from engine.sentiment.metrics import score_labels
from engine.sentiment.model import ModelShape, SentimentLSTM, build_model
from engine.sentiment.prior_shift import (
    MIN_TEXTS,
    PriorEstimate,
    adapt,
    estimate_rate,
    source_rate_of,
)

_BATCH = 1024


@dataclass(slots=True)
class LoadedRun:
    """A trained model with the encoder of the dataset it was trained on."""

    run_dir: Path
    model: SentimentLSTM
    encoder: Any
    """engine.preprocess.encode.Encoder recorded in RUN_DIR/vocab.json."""
    from_checkpoint: str | None = None
    """Why the weights are a mid-training checkpoint's (no model.pt), for a warning; None
    when they are the finished run's."""


def confusion_stats(
    model: torch.nn.Module, batches: Iterable[Any], loss_sum: torch.nn.Module
) -> torch.Tensor:
    """[tp, fp, tn, fn, loss sum] (float64, on the batches' device) of ``model`` on ``batches``
    (engine.sentiment.data.Batch, already on the device); ready for an all-reduce."""
    was_training = model.training
    model.eval()
    stats: torch.Tensor | None = None
    with torch.no_grad():
        for batch in batches:
            logits = model(batch.tokens, batch.lengths).float()  # (B,)
            pred, true = logits > 0, batch.labels > 0.5
            row = torch.stack(
                [
                    (pred & true).sum(),
                    (pred & ~true).sum(),
                    (~pred & ~true).sum(),
                    (~pred & true).sum(),
                    loss_sum(logits, batch.labels),
                ]
            ).double()
            stats = row if stats is None else stats + row
    model.train(was_training)
    if stats is None:
        device = next(model.parameters()).device
        stats = torch.zeros(5, dtype=torch.float64, device=device)
    return stats


def load_run(run_dir: str | Path, network_only: bool = False) -> LoadedRun:
    """Model weights (model.pt, else the latest checkpoint), shape and vocabulary of a run;
    ``network_only`` leaves out what was fitted after training (blend and companion). A file
    of the run that cannot be read, or a vocab.json of another dataset, is an InputError
    naming it (exit 2)."""
    run = Path(run_dir)
    spec_path = run / ckpt.MODEL_SPEC
    if not spec_path.is_file():
        raise InputError(
            f"{spec_path} not found: {run} is not a training run folder",
            hint="pass the --run-dir of a `sentitop train` run",
        )
    spec = _read_spec(spec_path)
    weights = run / ckpt.MODEL_WEIGHTS
    from_checkpoint = None
    if weights.exists() and not weights.is_file():
        raise InputError(
            f"{weights} is not a file (a folder?): it should hold the run's weights",
            hint=_NOT_THE_RUNS,
        )
    if weights.is_file():
        state = _read_weights(weights)
    else:
        try:
            saved = ckpt.load_checkpoint(run)
        except TrainError as exc:
            raise InputError(exc.message, hint=exc.hint) from None
        if saved is None:
            finished = (run / ckpt.SUMMARY).is_file()  # its weights were there: now removed
            raise InputError(
                f"{run} has neither model.pt nor a checkpoint"
                + (" (the run finished: its weights were removed since)" if finished else ""),
                hint=_NOT_THE_RUNS if finished else "wait for the first epoch to finish",
            )
        state = saved["model"]
        # a checkpoint holds the network as it trained: what is fitted after training (the
        # blend, the companion; recorded in model.json by a finished run) is not in it
        network_only = True
        where = f"epoch {int(saved.get('epoch', 0)) + 1}, step {int(saved.get('step', 0))}"
        from_checkpoint = (
            f"{weights} is missing (training did not finish?): using the last training "
            f"checkpoint, taken to continue at {where}: the network alone, without what a "
            "finished run fits after training"
        )
    if network_only:
        spec = replace(spec, blend=None, companion_features=0)
        state = {k: v for k, v in state.items() if not k.startswith("companion.")}
    model = build_model(spec)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:  # weights of another model shape or another version
        first = str(exc).strip().splitlines()
        raise InputError(
            f"{weights if weights.is_file() else run}: the saved weights do not fit "
            f"{spec_path.name}: {' '.join(line.strip() for line in first[:3])}",
            hint="written by another version of sentitop? a run's blend and companion "
            "can be fitted again: engine.sentiment.after_training.refit_saved_run",
        ) from None
    model.eval()
    return LoadedRun(run, model, _read_encoder(run, spec), from_checkpoint)


_NOT_THE_RUNS = "restore the file from the run's training, or train the run again"


def _read_spec(path: Path) -> ModelShape:
    """model.json as a ModelShape (InputError naming it when it is not one)."""
    try:
        return ModelShape.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise InputError(
            f"{path}: not a model shape written by `sentitop train` ({type(exc).__name__}: {exc})",
            hint=_NOT_THE_RUNS,
        ) from None


def _read_weights(path: Path) -> dict[str, Any]:
    """The state_dict saved in model.pt (InputError naming it when it holds none)."""
    try:
        state = torch.load(path, map_location="cpu")
    except PermissionError as exc:  # not damage: "train the run again" would not help
        raise InputError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except ckpt.UNREADABLE as exc:
        raise InputError(
            f"{path}: not readable as model weights (truncated, or not a torch save): "
            f"{ckpt.unreadable_reason(exc)}",
            hint=_NOT_THE_RUNS,
        ) from None
    if not isinstance(state, dict):
        raise InputError(
            f"{path}: holds a {type(state).__name__}, not model weights", hint=_NOT_THE_RUNS
        )
    return state


def _read_encoder(run: Path, spec: ModelShape) -> Any:
    """The encoder of RUN/vocab.json; InputError when the file is not a vocabulary, or not the
    one the model was trained with (its ids would index another embedding table)."""
    from engine.preprocess.encode import load_encoder

    path = run / ckpt.VOCAB
    if not path.is_file():  # (load_encoder's own message is about a dataset folder)
        what = "is not a file" if path.exists() else "not found"
        raise InputError(
            f"{path} {what}: the run's vocabulary, which maps words to the model's ids",
            hint=_NOT_THE_RUNS,
        )
    try:
        encoder = load_encoder(run)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(
            f"{path}: not a vocabulary written by `sentitop preprocess` "
            f"({type(exc).__name__}: {exc})",
            hint=_NOT_THE_RUNS,
        ) from None
    if encoder.num_ids != spec.vocab_size:
        raise InputError(
            f"{path} holds {encoder.num_ids:,} token ids but the model's embedding table "
            f"(model.json vocab_size) has {spec.vocab_size:,}: it is the vocabulary of another "
            "dataset, so every text would be read as other words",
            hint="copy in the vocab.json of the dataset this run was trained on, or train "
            "the run again",
        )
    return encoder


def predict_proba(run: LoadedRun, texts: Sequence[str], batch_size: int = _BATCH) -> np.ndarray:
    """P(positive) of each raw text, encoded exactly as the training data was."""
    return score_texts(run, texts, batch_size).proba


class TextScores(NamedTuple):
    """What score_texts() gives for each text."""

    proba: np.ndarray
    """P(positive)."""
    known: np.ndarray
    """Tokens read that are words of the run's vocabulary (0: the model read nothing it
    knows, so its score is only the learned bias)."""
    words: np.ndarray
    """Content words (stopwords dropped) before the seq_len cut: where above ``seq_len``,
    the rest of the text was not read."""
    seq_len: int
    """Tokens the model reads of a text: the run's preprocessing cut, as in training."""

    def cut(self) -> list[int]:
        """0-based indices of the texts longer than the model reads."""
        return [int(i) for i in np.flatnonzero(self.words > self.seq_len)]


def score_texts(run: LoadedRun, texts: Sequence[str], batch_size: int = _BATCH) -> TextScores:
    """predict_proba(), with how many of each text's tokens the model knows and how long each
    text is in the model's tokens (see TextScores)."""
    out = np.empty(len(texts), dtype=np.float64)
    known = np.empty(len(texts), dtype=np.int64)
    words = np.empty(len(texts), dtype=np.int64)
    device = next(run.model.parameters()).device  # the model's (CPU unless moved)
    for lo in range(0, len(texts), batch_size):
        chunk = list(texts[lo : lo + batch_size])
        tokens, lengths = run.encoder.encode_texts(chunk, words[lo : lo + len(chunk)])
        known[lo : lo + len(chunk)] = (tokens > UNK_ID).sum(axis=1)
        width = max(1, int(lengths.max(initial=1)))
        with torch.no_grad():
            logits = run.model(
                torch.from_numpy(tokens[:, :width].astype(np.int32)).to(device),
                torch.from_numpy(lengths.astype(np.int64)),
            )
        out[lo : lo + len(chunk)] = torch.sigmoid(logits.float()).cpu().numpy()
    return TextScores(out, known, words, int(run.encoder.seq_len))


def cut_note(cut: int, total: int, seq_len: int, numbers: Sequence[int] = ()) -> str:
    """The note for ``cut`` of ``total`` texts longer than the model reads (``numbers``: their
    1-based numbers, to name them): only their first seq_len words are scored, as in training."""
    shown = ", ".join(map(str, numbers[:10])) + (", …" if len(numbers) > 10 else "")
    which = f" ({'text' if len(numbers) == 1 else 'texts'} {shown})" if shown else ""
    share = f" ({cut / total:.1%})" if total and not shown else ""
    return (
        f"note: {cut:,} of {total:,} texts{share} {'is' if cut == 1 else 'are'} longer than "
        f"the {seq_len:,} words the "
        f"model reads{which}: only their first {seq_len:,} are scored, as in its training "
        "(the run's preprocess.seq_len; stopwords, where the run drops them, not counted)"
    )


def read_labelled(
    run: LoadedRun,
    paths: Iterable[str],
    skipped: Counter[str] | None = None,
    fields: dict[str, Any] | None = None,
    folder_warnings: list[dict[str, str]] | None = None,
    where: list[tuple[str, int]] | None = None,
    skipped_at: dict[str, list[str]] | None = None,
) -> tuple[list[str], np.ndarray]:
    """Texts and 0/1 labels of raw review files (a folder: its review files), read with the
    run's preprocessing settings (``fields``: format, text_field, rating_field or label_field
    given for these files instead); the lines skipped are counted by reason into ``skipped``
    and the files a folder left out are warned about in ``folder_warnings``, and each text's
    (file, line) is appended to ``where``, and the first lines skipped for each reason
    (`name:line`) to ``skipped_at``, when given. A
    label field that is not 0/1 on many lines of a file (a star rating), or a text or label
    field (nearly) no line of a file has (a wrong name), is an InputError."""
    from engine.config import PreprocessConfig
    from engine.preprocess.inputs import expand_folders
    from engine.preprocess.readers import check_label_values, detect_spec, iter_numbered_records

    given = {k: v for k, v in (fields or {}).items() if v}
    settings = {**run.encoder.settings, **given}
    for named, other in (("label_field", "rating_field"), ("rating_field", "label_field")):
        if named in given and other not in given:  # the files' field replaces the run's other
            settings[other] = None
    texts: list[str] = []
    labels: list[int] = []
    paths = list(paths)
    expanded = expand_folders(paths)  # a folder stands for its review files, as in preprocess
    if folder_warnings is not None:
        folder_warnings.extend(expanded.warnings)
    for path in expanded.files:
        if not Path(path).is_file():
            what = "is not a regular file" if Path(path).exists() else "not found"
            raise InputError(f"{path} {what}", hint="pass raw review files (.json/.jsonl[.gz])")
        cfg = PreprocessConfig(
            inputs=[path],
            output=str(run.run_dir),
            format=settings.get("format", "auto"),
            text_field=settings.get("text_field"),
            rating_field=settings.get("rating_field"),
            label_field=settings.get("label_field"),
            append_summary=bool(settings.get("append_summary", False)),
            max_line_bytes=int(settings.get("max_line_bytes", 1 << 20)),
        )
        spec, in_file, read = detect_spec(path, cfg), Counter[str](), len(texts)
        at: dict[str, list[int]] = {}
        for line, record in iter_numbered_records(path, cfg, spec, in_file, at):
            texts.append(record.text)
            labels.append(record.label)
            if where is not None:
                where.append((path, line))
        lines = len(texts) - read + sum(in_file.values())
        check_fields_present(path, spec, in_file, lines, given)
        check_label_values([path], spec, in_file, lines, cfg.max_line_bytes)
        if skipped is not None:
            skipped.update(in_file)
        for reason, numbers in at.items():
            if skipped_at is not None:
                shown = skipped_at.setdefault(reason, [])
                shown += [f"{Path(path).name}:{n}" for n in numbers][: 3 - len(shown)]
    if not texts:
        why = ", ".join(f"{n} {reason}" for reason, n in (skipped or Counter()).most_common(3))
        empty = [path for path in expanded.files if Path(path).stat().st_size == 0]
        causes = [f"{', '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty: 0 bytes"]
        causes = (causes if empty else []) + ([f"skipped: {why}"] if why else [])
        from engine.preprocess.quality import layout_fix

        raise InputError(
            f"no usable review in {', '.join(paths)}"
            + (f" ({'; '.join(causes)})" if causes else ""),
            hint=_too_long_fix(skipped or Counter(), settings)
            or layout_fix(skipped or {}, expanded.files)
            or "the files need the text and rating fields the run was trained on, or "
            "--text-field / --rating-field / --format naming theirs",
        )
    return texts, np.asarray(labels, dtype=np.int64)


def _too_long_fix(skipped: Counter[str], settings: dict[str, Any]) -> str | None:
    """The hint when most lines skipped were longer than the limit they were read with."""
    if not skipped or skipped.most_common(1)[0][0] != "too_long":
        return None
    limit = int(settings.get("max_line_bytes") or 1 << 20)
    return (
        f"the lines are longer than {limit:,} bytes (the run's preprocessing limit unless "
        f"--max-line-bytes gave another): --max-line-bytes {max(limit * 64, 64 << 20)} reads them"
    )


def source_rate(run: LoadedRun) -> float:
    """The prior the loaded model's probabilities are calibrated to (from the run's
    summary.json; the validation split's rate when the model applies the blend fitted there)."""
    path = run.run_dir / ckpt.SUMMARY
    if not path.is_file():
        raise InputError(
            f"{path} not found: the run has not finished, so its training prior is unknown",
            hint="score without --adapt-prior, or wait for the run to finish",
        )
    blended = run.model.spec.blend is not None
    return source_rate_of(json.loads(path.read_text()), blended=blended)


def batch_prior(
    run: LoadedRun, proba: np.ndarray, adapt_prior: bool
) -> tuple[np.ndarray, PriorEstimate | None]:
    """(probabilities to decide on, the batch's estimated positive rate): re-weighted to that
    rate with ``adapt_prior`` when the estimate can be trusted (else kept: ``estimate.doubt``
    says why); without it the estimate is made when it can be (a finished run, enough texts)
    so a caller can warn about a prior shift, and the probabilities are kept."""
    if adapt_prior:
        decided, estimate = adapt(proba, source_rate(run))
        return decided, replace(estimate, data_rate=_data_rate(run))
    if len(proba) < MIN_TEXTS or not (run.run_dir / ckpt.SUMMARY).is_file():
        return proba, None
    try:
        estimate = estimate_rate(proba, source_rate(run))
    except InputError:
        return proba, None
    return proba, replace(estimate, data_rate=_data_rate(run))


def _data_rate(run: LoadedRun) -> float | None:
    """The training split's positive rate where the run's pos_weight moved the model's prior
    away from it (no blend applied: a blend refits the prior without the weight); else None."""
    summary = json.loads((run.run_dir / ckpt.SUMMARY).read_text())
    rate = summary.get("train_positive_rate")
    if not summary.get("pos_weight") or run.model.spec.blend is not None or rate is None:
        return None
    return float(rate)


MISSING_SHARE = 0.99
"""A text or label field more than this share of a file's records lack is a wrong name, not a
field left out of a few reviews: an InputError naming it and the fields the file has."""
PROBE_LINES = 200
"""Lines read for the field names such an error lists."""
_UNPARSED = (
    "empty_line", "too_long", "invalid_utf8", "malformed_json", "python_literal", "not_an_object"
)  # fmt: skip
"""Skip reasons of lines that hold no record, so no field either."""
_FIELD_KINDS = {
    "text_field": ("text", "review-text", ""),
    "rating_field": ("rating", "1-5 star", " (or a 0/1 label with --label-field)"),
    "label_field": ("label", "0/1 label", " (or star ratings with --rating-field)"),
}
"""Per option: the field's kind, what the files' own field holds, the other way to name it."""


def check_fields_present(
    path: str,
    spec: RecordSpec,
    skipped: Counter[str],
    lines: int,
    given: dict[str, str],
) -> None:
    """Raise InputError when (nearly: MISSING_SHARE) every record of ``path`` lacks the text
    field or the rating/label field ``spec`` reads, naming the option that set it when
    ``given`` (the fields named for these files) has it, and the fields the file's records
    hold. ``skipped``: the file's skip counts; ``lines``: its lines read. The rating/label
    field is judged on the records that have a text."""
    from engine.preprocess.readers import is_label_spec

    records = lines - sum(skipped[reason] for reason in _UNPARSED)
    with_text = records - skipped["missing_text"] - skipped["text_not_string"]
    label = "label_field" if is_label_spec(spec) else "rating_field"
    for option, field, reason, among in (
        ("text_field", spec.text_field, "missing_text", records),
        (label, spec.rating_field, "missing_rating", with_text),
    ):
        missing = skipped[reason]
        if not among or missing <= MISSING_SHARE * among:
            continue
        from engine.preprocess.readers import field_names, probe_records

        flag = "--" + option.replace("_", "-")
        kind, holds, other = _FIELD_KINDS[option]
        named = option in given
        subject = f"{flag} {field!r}" if named else f"the {kind} field {field!r}"
        seen = field_names(probe_records(path, PROBE_LINES))
        if missing == among and field not in seen:
            lack = f"no line of {path} has this field"
        else:
            lack = f"{missing:,} of {among:,} lines of {path} lack a value for it (absent or null)"
        close = difflib.get_close_matches(field, seen, n=1)
        raise InputError(
            f"{subject}: {lack}; fields seen: {', '.join(seen[:12]) or 'none'}",
            hint=(f"did you mean {flag} {close[0]}? " if close else "")
            + f"name the files' {holds} field with {flag}{other}"
            + ("" if named else f"; the run reads {field!r} when none is named"),
        )


def evaluate_files(
    run: LoadedRun,
    paths: Sequence[str],
    adapt_prior: bool = False,
    fields: dict[str, Any] | None = None,
    misses: int = 0,
) -> dict[str, Any]:
    """accuracy, precision, recall, f1, ROC AUC, n, the confusion matrix and the majority
    rate (with whether the model beats it) on raw review files (or folders of them:
    ``input_warnings`` names the files a folder left out), and how many of their texts
    differ (``distinct_texts``: the intervals treat repeats as independent), the lines read
    and skipped by reason (``fields``: as in :func:`read_labelled`); ``prior`` holds
    the files' positive rate as the model estimates it without their labels, and with
    ``adapt_prior`` the decisions use probabilities re-weighted to that rate when it can be
    trusted (``prior_adapted``; ``unadapted_accuracy`` is the accuracy without; else
    ``prior_refused`` and the plain probabilities); with ``misses`` > 0, ``misses`` lists
    that many of the wrong decisions, the most confident first (engine.sentiment.misses);
    ``longer_than_read`` counts the texts longer than the model's ``seq_len`` words (only
    their first seq_len are scored, as in training)."""
    from engine.sentiment.misses import confident_misses

    skipped: Counter[str] = Counter()
    left_out: list[dict[str, str]] = []
    where: list[tuple[str, int]] = []
    skipped_at: dict[str, list[str]] = {}
    texts, labels = read_labelled(run, paths, skipped, fields, left_out, where, skipped_at)
    scored = score_texts(run, texts)
    raw = scored.proba
    proba, estimate = batch_prior(run, raw, adapt_prior)
    metrics = score_labels(proba, labels)
    metrics["seq_len"] = scored.seq_len
    metrics["longer_than_read"] = len(scored.cut())
    metrics["distinct_texts"] = len(set(texts))
    metrics["skipped"] = dict(skipped.most_common())
    metrics["skipped_at"] = skipped_at  # the first lines of each reason, `name:line`
    metrics["input_warnings"] = left_out
    metrics["lines"] = len(texts) + sum(skipped.values())
    metrics["prior"] = None if estimate is None else estimate.to_dict()
    metrics["prior_adapted"] = adapt_prior and estimate is not None and estimate.trusted
    metrics["prior_refused"] = adapt_prior and not metrics["prior_adapted"]
    if metrics["prior_adapted"]:
        metrics["unadapted_accuracy"] = float(((raw > 0.5) == labels.astype(bool)).mean())
    if misses > 0:
        metrics["misses"] = confident_misses(proba, labels, texts, where, misses)
    return metrics

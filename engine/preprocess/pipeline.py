"""run_preprocess: inputs → runner (map/dedupe/reduce) → combine → dataset.h5, vocab.json,
stats.json, with stage/progress/summary events."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.config import PreprocessConfig
from engine.errors import InputError, StorageError
from engine.events import Emitter
from engine.preprocess.budget import budget_warning, default_budget
from engine.preprocess.inputs import expand_folders
from engine.preprocess.job import JobSettings
from engine.preprocess.output_folder import make_stage, output_of, swap_in
from engine.preprocess.quality import check_preprocess, one_class_splits
from engine.preprocess.readers import (
    check_inputs,
    detect_spec,
    label_spec,
    plain_size,
    plan_tasks,
)
from engine.preprocess.records import SKIP_REASONS, RecordSpec
from engine.preprocess.reduce import PAD_ID, UNK_ID, LabelRule, token_dtype
from engine.preprocess.run_local import LocalResult, run_local
from engine.preprocess.spill import likely_to_spill, make_tmp, plan_spill, scratch_error
from engine.preprocess.termination import (
    STOP_ERRORS,
    Terminated,
    TerminationGuard,
    termination_raises,
)
from engine.preprocess.text import stopwords
from engine.preprocess.writer import (
    FORMAT_VERSION,
    DatasetTarget,
    combine_parts,
    publish_dataset,
)
from engine.synth.size import format_size

STAGE = "preprocess"
SCRATCH_PER_INPUT_BYTE = 2.0
"""Scratch a spilling local run may need per decompressed input byte (spilled runs and the new
dataset side by side): peaks of 1.7× a 100 MB file and 1.65× IMDB's 69 MB (a 25.8 MB .gz) were
measured at an 8 MB budget, where the note had said "up to" 1.0× the file's (compressed) size."""


class _ProgressEvents:
    """Turns runner progress callbacks into rate-limited `progress` events."""

    def __init__(
        self, emitter: Emitter | None, total: int, every_s: float = 0.5, **extra: Any
    ) -> None:
        self.emitter, self.total, self.every_s = emitter, total, every_s
        self.extra = extra
        """Fields added to every progress event (memory budget, whether spilling is expected)."""
        self.done = self.records = 0
        self.start = self.last = time.monotonic()

    def __call__(self, nbytes: int, lines: int) -> None:
        self.done += nbytes
        self.records += lines
        now = time.monotonic()
        if now - self.last >= self.every_s or self.done >= self.total:
            self.emit(now)

    def emit(self, now: float | None = None) -> None:
        """A `progress` event now (the first one of a runner that reports only at its end)."""
        now = time.monotonic() if now is None else now
        if self.emitter:
            self.last = now
            elapsed = max(now - self.start, 1e-9)
            self.emitter.emit(
                "progress",
                stage=STAGE,
                done=self.done,
                total=self.total,
                unit="bytes",
                rate=self.done / elapsed,
                records=self.records,
                records_per_s=self.records / elapsed,
                **self.extra,
            )


def resolve_specs(
    cfg: PreprocessConfig, rating_max: int | None = None, negative_max: int | None = None
) -> list[RecordSpec]:
    """One RecordSpec per input (detected or from cfg), label-rule overrides applied; all
    inputs must share one rating scale."""
    if cfg.label_field and (rating_max is not None or negative_max is not None):
        raise InputError(
            "--rating-max / --negative-max set a star-rating scale, but --label-field reads "
            "a 0/1 label: give one or the other"
        )
    specs = []
    for path in cfg.inputs:
        if path.startswith("s3://") and cfg.label_field:  # cannot probe remotely
            fmt = "mcauley" if cfg.format == "mcauley" else "jsonl"
            spec = label_spec(cfg.text_field or "reviewText", cfg.label_field, fmt)
        elif path.startswith("s3://"):  # cannot probe remotely: explicit fields or McAuley
            spec = RecordSpec(
                format="jsonl" if cfg.format == "jsonl" else "mcauley",
                text_field=cfg.text_field or "reviewText",
                rating_field=cfg.rating_field or "overall",
                summary_field="summary" if cfg.append_summary else None,
                title_field="summary" if cfg.title_rows else None,
                test_fraction=cfg.test_fraction,
            )
        else:
            spec = detect_spec(path, cfg)
        if rating_max is not None:
            spec = replace(spec, rating_max=rating_max)
        if negative_max is not None:
            spec = replace(spec, negative_max=negative_max)
        if spec.rating_max <= spec.rating_min:
            raise InputError(
                f"--rating-max {spec.rating_max}: the highest rating must be above the "
                f"lowest, {spec.rating_min} ({path})"
            )
        if not spec.rating_min <= spec.negative_max < spec.rating_max:
            raise InputError(
                f"--negative-max {spec.negative_max}: ratings up to it are negative, so it must "
                f"lie in {spec.rating_min}..{spec.rating_max - 1} (the scale of {path} is "
                f"{spec.rating_min}-{spec.rating_max})"
            )
        specs.append(spec)
    rules = {LabelRule.of(s) for s in specs}
    if len(rules) > 1:
        raise InputError(
            "inputs use different rating scales: "
            + "; ".join(
                f"{p}: {s.rating_min}-{s.rating_max}"
                for p, s in zip(cfg.inputs, specs, strict=True)
            ),
            hint="preprocess them separately, or pass --rating-max/--negative-max",
        )
    return specs


def run_preprocess(
    cfg: PreprocessConfig,
    emitter: Emitter | None = None,
    *,
    rating_max: int | None = None,
    negative_max: int | None = None,
    mrjob_args: list[str] | None = None,
) -> dict[str, Any]:
    """Preprocess cfg.inputs (files, or folders standing for their review files) into
    cfg.output, replaced as a whole at the end; returns the stats written to stats.json.
    Called in the main thread, SIGTERM and SIGHUP meanwhile stop it as Ctrl-C does (workers
    stopped, stage folder removed) and raise Terminated: a SystemExit, code 128 + signal."""
    with termination_raises() as guard:
        return _run_preprocess(
            cfg,
            emitter,
            guard,
            rating_max=rating_max,
            negative_max=negative_max,
            mrjob_args=mrjob_args,
        )


def _run_preprocess(
    cfg: PreprocessConfig,
    emitter: Emitter | None,
    guard: TerminationGuard,
    *,
    rating_max: int | None,
    negative_max: int | None,
    mrjob_args: list[str] | None,
) -> dict[str, Any]:
    start = time.time()
    if emitter:
        emitter.emit("stage_start", stage=STAGE, runner=cfg.runner, inputs=cfg.inputs)
    remote = cfg.runner in ("emr", "hadoop")
    to_s3 = cfg.output.startswith("s3://")
    out = Path(tempfile.mkdtemp(prefix="sentitop-preprocess-") if to_s3 else cfg.output)
    if out.is_symlink():  # the folder it names is replaced, not the link
        out = out.resolve()
    stage: Path | None = None
    tmp: str | None = None
    new_set: int | None = None
    """The new set's folder (inode) once built: a stop signal after it was swapped in cannot
    stop anything (the output is complete), before it the previous output stays."""
    try:
        if to_s3 and not remote:
            raise InputError(f"--output {cfg.output}: s3:// outputs need --runner emr or hadoop")
        found = expand_folders(cfg.inputs)
        cfg = replace(cfg, inputs=found.files)
        local_inputs = [p for p in cfg.inputs if not (remote and p.startswith("s3://"))]
        sizes = dict(zip(local_inputs, check_inputs(local_inputs), strict=True))
        specs = resolve_specs(cfg, rating_max, negative_max)
        stage = make_stage(out)  # the new set is built beside the old one, swapped in whole
        try:
            tmp = make_tmp(str(stage))
        except OSError as exc:
            raise scratch_error(exc, str(stage)) from exc
        total = sum(sizes.values())
        workers = cfg.workers or os.cpu_count() or 1
        budget = cfg.memory_budget or default_budget()
        if cfg.runner == "local" and (too_big := budget_warning(cfg.memory_budget)):
            found.warnings.append(too_big)
        plain = sum(plain_size(p, n) for p, n in sizes.items())  # what the state grows with
        extra = _spill_warning(cfg, emitter, budget, workers, plain, tmp)
        job = JobSettings(
            specs=specs,
            rule=LabelRule.of(specs[0]),
            stop=stopwords(cfg.negations_kept, cfg.stopwords_kept),
            test_fraction=cfg.test_fraction,
            max_line_bytes=cfg.max_line_bytes,
            vocab_size=cfg.vocab_size,
            seq_len=cfg.seq_len,
            tmp=tmp,
            memory_budget=budget if cfg.runner == "local" else None,
            input_bytes=plain,
        )
        progress = _ProgressEvents(emitter, total, **extra)
        if cfg.runner in ("inline", "hadoop", "emr"):
            from engine.preprocess.run_mrjob import check_mrjob_run

            check_mrjob_run(cfg, mrjob_args or [])  # said before the progress bar
        if cfg.runner != "local":  # mrjob's runners report once, at their end: 0 of the total
            progress.emit()
        try:
            result = _run_runner(cfg, job, sizes, workers, progress, mrjob_args)
            stats = _finish(cfg, job, result, start, stage, tmp, found.warnings)
            shutil.rmtree(tmp)  # scratch is not part of the set
        except OSError as exc:
            if exc.errno is None and "No space left" not in str(exc):
                raise
            raise scratch_error(exc, tmp) from exc
        guard.check()  # a signal whose exception Python dropped: no output put in place
        new_set = stage.stat().st_ino  # out is this folder once swapped in
        try:
            swap_in(stage, out)
        except OSError as exc:
            raise StorageError(
                f"could not put the new output in place at {out}: {exc.strerror or exc}",
                hint="the previous output, if any, is unchanged",
            ) from exc
        if to_s3:
            from engine.preprocess.run_mrjob import upload_output

            upload_output(str(out), cfg.output)
    except BaseException as exc:
        published = new_set is not None and not to_s3 and _holds(out, new_set)
        if not (published and isinstance(exc, STOP_ERRORS)):
            _say_ended(emitter, exc, start)
            raise
        stats["warnings"].append(  # too late to stop anything: the new output is complete
            {
                "code": "stopped_after_output",
                "message": f"{_stop_name(exc)} came after {out} was complete: it is kept",
            }
        )
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        if stage:  # the unfinished set, or after the swap the previous one
            shutil.rmtree(stage, ignore_errors=True)
        if to_s3:
            shutil.rmtree(out, ignore_errors=True)
    if emitter:
        for warning in stats["warnings"]:
            emitter.emit("warning", stage=STAGE, **warning)
        emitter.emit("summary", stage=STAGE, **stats)
        emitter.emit("stage_end", stage=STAGE, status="ok", seconds=stats["seconds"])
    return stats


def _holds(out: Path, folder: int) -> bool:
    """Whether ``out`` is the folder of inode ``folder`` (the new set swapped in)."""
    try:
        return out.stat().st_ino == folder
    except OSError:
        return False


def _say_ended(emitter: Emitter | None, exc: BaseException, start: float) -> None:
    """The stage_end event of a run that did not finish: interrupted by a stop signal, or
    failed."""
    if emitter:
        status = "interrupted" if isinstance(exc, STOP_ERRORS) else "failed"
        emitter.emit(
            "stage_end",
            stage=STAGE,
            status=status,
            seconds=time.time() - start,
            reason=str(exc)[:500],
        )


def _stop_name(exc: BaseException) -> str:
    """The stop signal an exception stands for, as a user would name it."""
    return signal.Signals(exc.signum).name if isinstance(exc, Terminated) else "Ctrl-C"


def _spill_warning(
    cfg: PreprocessConfig,
    emitter: Emitter | None,
    budget: int,
    workers: int,
    total: int,
    tmp: str,
) -> dict[str, Any]:
    """Before the local runner starts: when the input (``total``: its decompressed bytes) is
    obviously larger than the budget,
    say so in a first progress event (`note`, with the scratch folder's free space); returns
    the fields every progress event then carries (memory_budget, spill_expected)."""
    if cfg.runner != "local":
        return {}
    plan = plan_spill(budget, min(workers, max(1, total // (1 << 20))), total, cfg.seq_len)
    expected = likely_to_spill(plan, total)
    fields: dict[str, Any] = {"memory_budget": budget, "spill_expected": expected}
    if expected and emitter:
        free = shutil.disk_usage(tmp).free
        note = (
            f"input {format_size(total)} is much larger than the memory budget "
            f"{format_size(budget)}: the local runner will spill sorted runs to a scratch "
            f"folder beside {output_of(tmp)}, {tmp} "
            f"({format_size(free)} free there; it may need up to ≈ "
            f"{format_size(SCRATCH_PER_INPUT_BYTE * total)})"
        )
        emitter.emit(
            "progress", stage=STAGE, done=0, total=total, unit="bytes", rate=0.0, records=0,
            records_per_s=0.0, note=note, **fields,
        )  # fmt: skip
    return fields


def _run_runner(
    cfg: PreprocessConfig,
    job: JobSettings,
    sizes: dict[str, int],
    workers: int,
    progress: _ProgressEvents,
    mrjob_args: list[str] | None,
) -> LocalResult:
    if cfg.runner == "local":
        # ~16 ranges per worker, the last ones small, so that the workers end their map together
        together = workers if workers > 1 else 0
        tasks = plan_tasks(cfg.inputs, [sizes[p] for p in cfg.inputs], workers * 4, together)
        target = DatasetTarget(
            os.path.join(job.tmp, "dataset.h5"),
            lambda vocab: _dataset_attrs(cfg, _vocab_doc(cfg, job, vocab)),
        )
        return run_local(tasks, job, min(workers, len(tasks)), progress, target)
    if cfg.runner == "spark":
        from engine.preprocess.run_spark import run_spark

        tasks = plan_tasks(cfg.inputs, [sizes[p] for p in cfg.inputs], workers)
        return run_spark(tasks, job, workers, progress)
    from engine.preprocess.run_mrjob import run_mrjob

    return run_mrjob(cfg, job, progress, mrjob_args or [])


def _finish(
    cfg: PreprocessConfig,
    job: JobSettings,
    result: LocalResult,
    start: float,
    out: Path,
    tmp: str,
    input_warnings: list[dict[str, str]],
) -> dict[str, Any]:
    """Write the set into ``out`` (the stage folder): dataset.h5 (combined here unless the
    runner wrote it), vocab.json and stats.json, whose warnings begin with ``input_warnings``
    (the files the input folders held but gave nothing)."""
    warnings = check_preprocess(cfg, build_stats(cfg, result, 0.0), job.specs)  # raises first
    finish_cpu = time.process_time()
    vocab_doc = _vocab_doc(cfg, job, result.vocab)
    tmp_h5 = os.path.join(tmp, "dataset.h5")
    if result.dataset is None:  # else the runner wrote it
        dtype = token_dtype(len(result.vocab) + 2)
        attrs = _dataset_attrs(cfg, vocab_doc)
        combine_parts(result.parts, tmp_h5, cfg.seq_len, dtype, attrs)
    elif result.dataset != tmp_h5:
        raise AssertionError(f"the runner wrote {result.dataset}, not {tmp_h5}")
    warnings += one_class_splits(tmp_h5)
    if result.cpu:
        result.cpu["combine"] = result.cpu.get("combine", 0.0) + time.process_time() - finish_cpu
    stats = build_stats(cfg, result, time.time() - start)
    stats["memory_budget"] = job.memory_budget
    stats["spill"] = result.spill or None
    stats["warnings"] = [*input_warnings, *warnings]
    publish_dataset(
        tmp_h5, out / "dataset.h5", {out / "vocab.json": vocab_doc, out / "stats.json": stats}
    )
    return stats


def _dataset_attrs(cfg: PreprocessConfig, vocab_doc: dict[str, Any]) -> dict[str, Any]:
    """dataset.h5's attributes (the ids and the hash of vocab.json's content)."""
    vocab_bytes = json.dumps(vocab_doc, sort_keys=True).encode()
    return {
        "vocab_size": vocab_doc["vocab_size"],
        "num_ids": vocab_doc["vocab_size"] + 2,
        "seq_len": cfg.seq_len,
        "pad_id": PAD_ID,
        "unk_id": UNK_ID,
        "format_version": FORMAT_VERSION,
        "vocab_sha256": hashlib.sha256(vocab_bytes).hexdigest(),
    }


def _vocab_doc(cfg: PreprocessConfig, job: JobSettings, vocab: list[str]) -> dict[str, Any]:
    """vocab.json: ids, and every setting needed to encode new raw text the same way."""
    return {
        "format_version": FORMAT_VERSION,
        "pad_id": PAD_ID,
        "unk_id": UNK_ID,
        "vocab_size": len(vocab),
        "itos": ["<pad>", "<unk>", *vocab],
        "settings": {
            "seq_len": cfg.seq_len,
            "vocab_size_requested": cfg.vocab_size,
            "preset": cfg.preset,
            "keep_negations": cfg.negations_kept,
            "keep_stopwords": cfg.stopwords_kept,
            "append_summary": cfg.append_summary,
            "title_rows": cfg.title_rows,
            "format": cfg.format,
            "text_field": cfg.text_field,
            "rating_field": cfg.rating_field,
            "label_field": cfg.label_field,
            "test_fraction": cfg.test_fraction,
            "max_line_bytes": cfg.max_line_bytes,
            "specs": [s.to_dict() for s in job.specs],
            "stopwords": sorted(w.decode() for w in job.stop),
        },
    }


def build_stats(cfg: PreprocessConfig, result: LocalResult, seconds: float) -> dict[str, Any]:
    """stats.json content; asserts read + title rows = kept + skipped + duplicates."""
    ms, rc = result.stats, result.counts
    skipped = {reason: ms.skipped.get(reason, 0) for reason in SKIP_REASONS}
    skipped["only_stopwords"] = rc.only_stopwords
    kept = rc.train + rc.test
    if ms.read + ms.titles != kept + sum(skipped.values()) + rc.duplicates:
        raise AssertionError(
            f"count mismatch: read {ms.read} + title rows {ms.titles} != kept {kept} + skipped "
            f"{sum(skipped.values())} + duplicates {rc.duplicates}"
        )
    lines_per_file = [0] * len(cfg.inputs)
    for (file_index, _), n in ms.split_lines.items():
        lines_per_file[file_index] += n
    skipped_per_file: list[dict[str, int]] = [{} for _ in cfg.inputs]
    for (file_index, reason), n in sorted(ms.file_skips.items()):
        skipped_per_file[file_index][reason] = n
    return {
        "read": ms.read,
        "title_rows": ms.titles,
        "kept": kept,
        "skipped_total": sum(skipped.values()),
        "skipped": skipped,
        "skipped_examples": ms.example_lines(cfg.inputs),
        "duplicates": rc.duplicates,
        "distinct": rc.distinct,
        "positive": rc.positive,
        "negative": rc.negative,
        "train": rc.train,
        "test": rc.test,
        "vocab_size": len(result.vocab),
        "input_bytes": ms.input_bytes,
        "seconds": round(seconds, 3),
        "mb_per_s": round(ms.input_bytes / 1e6 / max(seconds, 1e-9), 3),
        "runner": cfg.runner,
        "workers": (result.workers or len(result.parts)) if cfg.runner == "local" else None,
        "cpu_seconds": {stage: round(s, 3) for stage, s in result.cpu.items()} or None,
        "inputs": list(cfg.inputs),
        "lines_per_file": lines_per_file,
        "skipped_per_file": skipped_per_file,
        "empty_files": [p for p, n in zip(cfg.inputs, lines_per_file, strict=True) if n == 0],
    }

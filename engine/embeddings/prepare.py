"""Once per run, before the ranks start: the corpus (corpus.npz) and the SPPMI reference
(reference.npz) in the run folder, reused when the settings they depend on are unchanged."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.embeddings.config import CONFIG_FILE, MIN_EVAL_WORDS, EmbedConfig
from engine.embeddings.corpus import Corpus, build_corpus, read_dataset_docs
from engine.embeddings.evaluate import sppmi_reference
from engine.embeddings.events_file import EVENTS_FILE, RunEventsFile
from engine.embeddings.sources import Sources, SourceStats, skipped_warning
from engine.errors import ConfigError, InputError
from engine.events import Emitter

CORPUS_FILE = "corpus.npz"
REFERENCE_FILE = "reference.npz"
KEY_FILE = "prepare.json"
RESULT_FILES = ("summary.json", "embeddings.npy")
"""What a finished run leaves (the summary first: without it the folder reads as unfinished)."""


PREVIOUS_DIR = "previous"
"""Where a re-run keeps the finished run it replaces (vectors, corpus, summary, events) until
it finishes itself: a stopped or failed re-run no longer loses the earlier vectors."""
KEPT_FILES = (CORPUS_FILE, REFERENCE_FILE, CONFIG_FILE)
"""Besides RESULT_FILES, what the kept run needs to serve as a finished run folder."""


def retire_results(
    run_dir: Path, emitter: Emitter, events: RunEventsFile | None = None, *, reused: bool
) -> None:
    """Take an earlier run's vectors and summary out of the folder before this run changes it:
    an interrupted or failed re-run then leaves an unfinished folder, never the old summary and
    vectors beside a new corpus (``train.model.init_embeddings`` took that mix as finished and
    gave words the vectors of other words whenever the two vocabularies had the same size).
    A finished run is kept whole in RUN_DIR/previous until this run writes its summary
    (:func:`drop_previous`); ``reused``: this run reuses the corpus files, so they are linked
    there, not moved. Its events start afresh (``events``: this run's file): they were
    appended to, and a replay showed both runs as one."""
    found = [name for name in RESULT_FILES if (run_dir / name).exists()]
    finished = len(found) == len(RESULT_FILES)
    if finished:
        _keep_previous(run_dir, events, reused)
    for name in (*RESULT_FILES, "summary.json.tmp"):
        (run_dir / name).unlink(missing_ok=True)
    if events is not None and events.replace():
        found.append(EVENTS_FILE)
    if found:  # `warning`'s fields: docs/EVENTS.md's common table (code, message)
        names = " and ".join([", ".join(found[:-1]), found[-1]] if len(found) > 1 else found)
        verb = "are" if len(found) > 1 else "is"
        if finished:
            fate = (
                f"kept in {run_dir / PREVIOUS_DIR} until this run finishes, then removed "
                "(use another --run-dir to keep both)"
            )
        else:
            fate = "removed and this run writes new ones (use another --run-dir to keep both)"
        held = "a finished" if finished else "an earlier"
        warning = {
            "code": "replaced_run",
            "message": f"{run_dir} held {held} run; its {names} {verb} {fate}",
        }
        emitter.emit("warning", stage="prepare", **warning)


def _keep_previous(run_dir: Path, events: RunEventsFile | None, reused: bool) -> None:
    """Move the finished run's files to RUN_DIR/previous (replacing an older one there)."""
    keep = run_dir / PREVIOUS_DIR
    shutil.rmtree(keep, ignore_errors=True)
    keep.mkdir()
    for name in KEPT_FILES:
        if (run_dir / name).is_file():
            if reused and name != CONFIG_FILE:  # not rewritten by this run
                _link_or_copy(run_dir / name, keep / name)
            else:
                (run_dir / name).replace(keep / name)
    if events is not None and events.inherited_bytes:
        with events.path.open("rb") as src, (keep / EVENTS_FILE).open("wb") as dst:
            dst.write(src.read(events.inherited_bytes))  # the earlier run's lines only
    for name in RESULT_FILES[::-1]:  # the summary last: without it the copy reads unfinished
        (run_dir / name).replace(keep / name)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # a file system without hard links
        shutil.copy2(src, dst)


def drop_previous(run_dir: str | Path) -> None:
    """Remove the finished run a re-run kept (call once this run's summary is written)."""
    shutil.rmtree(Path(run_dir) / PREVIOUS_DIR, ignore_errors=True)


def previous_run(run_dir: str | Path) -> Path | None:
    """The finished run a stopped re-run kept in RUN_DIR/previous, if any."""
    keep = Path(run_dir) / PREVIOUS_DIR
    return keep if all((keep / name).is_file() for name in RESULT_FILES) else None


def load_docs_corpus(
    cfg: EmbedConfig,
    sources: list[SourceStats] | None = None,
    warnings: list[dict[str, str]] | None = None,
) -> Corpus:
    """Build the corpus from ``cfg.input`` (raw JSON-lines files or folders, read in turn) or
    ``cfg.data_dir`` (dataset.h5); ``sources``, when given, receives each input file's counts,
    ``warnings`` the ``{code, message}`` of the files the folders held but gave nothing."""
    docs: Any
    if cfg.inputs:
        docs = Sources(cfg.inputs, dedupe=cfg.dedupe)
        if sources is not None:
            sources.clear()
            docs.stats = sources
        if warnings is not None:
            warnings.clear()
            docs.warnings = warnings
    else:
        assert cfg.data_dir is not None  # EmbedConfig checks exactly one is set
        docs = read_dataset_docs(cfg.data_dir)
    return build_corpus(
        docs,
        min_count=cfg.min_count,
        max_vocab=cfg.max_vocab,
        max_docs=cfg.max_docs,
        source=", ".join(cfg.inputs) or cfg.data_dir or "the input",
    )


def input_warnings(run_dir: str | Path) -> list[dict[str, Any]]:
    """The prepared input's warnings (``{stage, code, message}``, stage `prepare`) recorded in
    prepare.json: a run's summary.json lists them beside its own (it had only its own, and a
    corpus read from mostly unusable lines ended with `"warnings": []`)."""
    stats = _read_key(Path(run_dir) / KEY_FILE).get("stats")
    found = stats.get("warnings") if isinstance(stats, dict) else None
    return [{"stage": "prepare", **w} for w in found or [] if isinstance(w, dict)]


def input_stamps(cfg: EmbedConfig) -> list[list[Any]]:
    """[path, size, mtime_ns] of every file the corpus is read from (a folder's files as its
    expansion lists them, a dataset's dataset.h5 and vocab.json): part of the cache key, so an
    input rewritten in place, or a file added to an input folder, is read again (the old corpus
    was reused as long as the paths were the same)."""
    import os

    from engine.embeddings.sources import expand_inputs

    if cfg.inputs:
        paths = expand_inputs(cfg.inputs)
    else:
        assert cfg.data_dir is not None
        paths = [os.path.join(cfg.data_dir, name) for name in ("dataset.h5", "vocab.json")]
    stamps: list[list[Any]] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            stamps.append([os.path.abspath(path), None, None])  # the reader names the problem
            continue
        stamps.append([os.path.abspath(path), st.st_size, st.st_mtime_ns])
    return stamps


def _read_key(path: Path) -> dict[str, Any]:
    """prepare.json's content; {} (nothing reusable) when it is unreadable or not an object."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def prepare(
    cfg: EmbedConfig, emitter: Emitter, events: RunEventsFile | None = None
) -> dict[str, Any]:
    """Write (or reuse) corpus.npz and reference.npz in the run folder; return their stats.
    ``events`` (the events file ``emitter`` writes, if any) starts afresh when the folder held
    an earlier run, as the results do."""
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    key = {**cfg.corpus_key(), "files": input_stamps(cfg)}
    key_path = run_dir / KEY_FILE
    reusable = all((run_dir / name).is_file() for name in (KEY_FILE, CORPUS_FILE, REFERENCE_FILE))
    if reusable:
        recorded = _read_key(key_path)
        if recorded.get("key") == key and isinstance(recorded.get("stats"), dict):
            retire_results(run_dir, emitter, events, reused=True)
            for warning in recorded["stats"].get("warnings") or []:  # reused, still true
                emitter.emit("warning", stage="prepare", **warning)
            emitter.emit("stage_end", stage="prepare", status="cached", seconds=0.0)
            return dict(recorded["stats"])
    start = time.perf_counter()
    emitter.emit("stage_start", stage="prepare", input=cfg.input or cfg.data_dir)
    sources: list[SourceStats] = []
    warnings: list[dict[str, str]] = []
    corpus = load_docs_corpus(cfg, sources, warnings)
    if skipped := skipped_warning(sources):  # many lines without a usable text
        warnings.append(skipped)
    for warning in warnings:  # files a folder held but gave nothing, lines passed over
        emitter.emit("warning", stage="prepare", **warning)
    if cfg.dim >= corpus.vocab_size:  # vectors longer than the vocabulary: nothing to learn
        raise ConfigError(
            f"embed.dim = {cfg.dim} is not below the corpus's vocabulary of "
            f"{corpus.vocab_size:,} words",
            hint="use a smaller --dim (50-300 is usual) or more text",
        )
    if corpus.vocab_size < MIN_EVAL_WORDS:  # the PIP loss would read 0.0000, a fake score
        raise InputError(
            f"{', '.join(cfg.inputs) or cfg.data_dir}: only {corpus.vocab_size} words occur "
            f">= {cfg.min_count} times; embeddings cannot be judged on fewer than "
            f"{MIN_EVAL_WORDS} words",
            hint="use more text or a lower --min-count",
        )
    t_ref = time.perf_counter()
    reference = sppmi_reference(corpus, cfg.eval_words, cfg.window, cfg.negatives, cfg.dim)
    if not np.any(reference):  # every SPPMI entry is 0: the PIP loss would read 1.0 whatever
        raise InputError(
            f"{', '.join(cfg.inputs) or cfg.data_dir}: no two of its {corpus.vocab_size:,} words "
            f"occur together more than {cfg.negatives} times as often as chance, so there is "
            "nothing to learn and nothing to judge embeddings against",
            hint="use more, and more varied, text (or a lower --negatives)",
        )
    # the folder changes from here, once the input proved usable (a refused input leaves an
    # earlier run as it was): the cache key goes first and is written last (a failure in
    # between left the old key beside the new corpus, and the next run reused that mix)
    key_path.unlink(missing_ok=True)
    retire_results(run_dir, emitter, events, reused=False)
    corpus.save(run_dir / CORPUS_FILE)
    np.savez(run_dir / REFERENCE_FILE, reference=reference)
    stats: dict[str, Any] = {
        "docs": corpus.num_docs,
        "raw_tokens": corpus.raw_tokens,
        "tokens": len(corpus.ids),
        "vocab": corpus.vocab_size,
        "eval_words": len(reference),
        "reference_s": time.perf_counter() - t_ref,
        "read_s": t_ref - start,
    }
    if sources:
        stats["sources"] = [
            {"path": s.path, "docs": s.docs, "skipped": s.skipped, "duplicates": s.duplicates}
            for s in sources
        ]
    if warnings:
        stats["warnings"] = warnings
    tmp = key_path.with_name(KEY_FILE + ".tmp")
    tmp.write_text(json.dumps({"key": key, "stats": stats}), encoding="utf-8")
    tmp.replace(key_path)
    emitter.emit("summary", stage="prepare", **stats)
    emitter.emit("stage_end", stage="prepare", status="ok", seconds=time.perf_counter() - start)
    return stats

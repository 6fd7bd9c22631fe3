"""``python -m engine.embeddings``: prepare the corpus once, then train on N local ranks.

Examples::

    python -m engine.embeddings --input ../shared/data/imdb_aclImdb_labeled.jsonl.gz \\
        --max-docs 2000 --run-dir runs/e1 --mode async --nproc 3 --dim 50 --batch 1024
    python -m engine.embeddings --data data/ --run-dir runs/e2 --mode sync --nproc 2
    # under torchrun: prepare first, then start the ranks on the prepared folder
    python -m engine.embeddings --input FILE --run-dir runs/e3 --prepare-only
    torchrun --nproc-per-node 2 -m engine.embeddings --config runs/e3/embed_config.json --rank

Events go to stdout (every rank) and RUN_DIR/events.jsonl (rank 0),
as in ``engine.sentiment.train``.
The module top stays torch-free so ``sentitop embed`` can reuse the argument set.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.balance.args import MAX_STRAGGLE
from engine.embeddings.config import CONFIG_FILE, EmbedConfig
from engine.embeddings.events_file import RunEventsFile
from engine.embeddings.rank_watch import TrainWatch
from engine.errors import ConfigError, LaunchError, SentitopError
from engine.events import (
    Emitter,
    EventSink,
    FanoutSink,
    StreamSink,
    encode_event,
    rank_emitter,
)
from engine.run_end import ending, record_end
from engine.run_lock import run_folder_lock
from engine.signal_handlers import handlers_installed

if TYPE_CHECKING:
    from engine.launch import LineHandler


def parse_straggle(text: str) -> dict[int, float]:
    """``RANK:FACTOR[,RANK:FACTOR...]`` → {rank: factor} (ConfigError naming the bad part)."""
    out: dict[int, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        rank, sep, factor = part.partition(":")
        try:
            if not sep:
                raise ValueError(part)
            out[int(rank)] = float(factor)
        except ValueError:
            raise ConfigError(
                f"--straggle {text!r}: {part!r} is not RANK:FACTOR", hint="e.g. --straggle 2:4"
            ) from None
    for slow_rank, slowdown in out.items():
        if slow_rank < 0 or not 1 <= slowdown <= MAX_STRAGGLE:  # inf would sleep forever
            raise ConfigError(
                f"--straggle {text!r}: need RANK >= 0 and FACTOR from 1 to {MAX_STRAGGLE:g}",
                hint="e.g. --straggle 2:4",
            )
    return out


def add_embed_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags shared by ``python -m engine.embeddings`` and ``sentitop embed``.

    Generated from :class:`EmbedConfig` (--input and --data exclusive; --input takes one or
    more paths and may repeat); --straggle takes RANK:FACTOR pairs and --nproc is the
    launcher's.
    """
    from engine.config_flags import add_config_flags, field_docs

    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--input",
        nargs="+",
        action="extend",
        metavar="PATH",
        default=None,
        help=field_docs(EmbedConfig)["input"],
    )
    add_config_flags(source, EmbedConfig, only=("data_dir",), aliases={"data_dir": "--data"})
    add_config_flags(parser, EmbedConfig, skip=_SOURCE)
    parser.add_argument("--nproc", type=int, default=1, help="local processes (ranks)")
    parser.add_argument(
        "--straggle", type=parse_straggle, help="RANK:FACTOR: that rank sleeps (FACTOR-1) x compute"
    )


_SOURCE = ("input", "data_dir")
"""Where the corpus comes from: raw reviews or a preprocessed folder (one of them)."""


def config_from_args(args: argparse.Namespace, base: dict[str, Any] | None = None) -> EmbedConfig:
    """An EmbedConfig from ``base`` (a config file) overridden by the flags given."""
    from engine.config_flags import flag_values

    data = dict(base or {})
    data.update(flag_values(args, EmbedConfig))
    if getattr(args, "straggle", None) is not None:
        data["straggle"] = args.straggle
    if not data.get("run_dir"):
        raise ConfigError("--run-dir is required")
    if data.get("input") and data.get("data_dir"):
        raise ConfigError("give --input PATH... or --data DIR, not both")
    if not (data.get("input") or data.get("data_dir")):
        raise ConfigError("--input FILE or --data DIR is required")
    return EmbedConfig.from_dict(data)


def run_rank(cfg: EmbedConfig) -> int:
    """Train on this rank (torchrun environment or one process); return the exit code."""
    import torch
    import torch.distributed as dist

    from engine.embeddings.param_server import run_async
    from engine.embeddings.runtime import EmbedRun
    from engine.embeddings.sync import run_sync
    from engine.launch import default_threads
    from engine.rank_main import run_as_rank
    from engine.sentiment.dist_env import DistEnv

    if cfg.mode == "svd":
        raise ConfigError("--mode svd has no ranks", hint="run it without --rank")
    env = DistEnv.from_environ("cpu" if cfg.mode == "async" else cfg.device)
    torch.set_num_threads(cfg.threads or default_threads(env.local_world))
    emitter = rank_emitter(cfg.run_dir, env.rank, events_file=cfg.events_file)

    def work() -> None:
        started = time.time()  # before the rendezvous: no worker's epoch starts before it
        if env.device.type == "cuda":
            torch.cuda.set_device(env.device)
        if env.world > 1:
            dist.init_process_group(env.backend)
        run = EmbedRun(cfg, env, emitter, started=started)
        (run_async if cfg.mode == "async" else run_sync)(run)

    return run_as_rank(work, emitter)


def check_nproc(cfg: EmbedConfig, nproc: int) -> EmbedConfig:
    """``cfg`` with its device resolved (cpu or cuda) for ``nproc`` local ranks; ConfigError
    unless they can run ``cfg.mode`` there."""
    from dataclasses import replace

    from engine.embeddings.device import resolve_device

    if nproc < 1:
        raise ConfigError(f"--nproc = {nproc} must be >= 1")
    if missing := sorted(r for r in cfg.straggle if r >= nproc):
        raise ConfigError(
            f"--straggle names rank(s) {', '.join(map(str, missing))}; --nproc {nproc} has "
            f"ranks 0-{nproc - 1}"
        )
    if cfg.mode == "svd" and nproc != 1:
        raise ConfigError(
            f"--mode svd runs in one process; --nproc = {nproc}", hint="leave --nproc out"
        )
    if cfg.mode == "svd":
        return replace(cfg, device="cpu")
    if cfg.mode == "async" and nproc < 2:
        raise ConfigError("--mode async needs --nproc >= 2 (one server + at least one worker)")
    if cfg.device == "cpu":
        return cfg
    return replace(cfg, device=resolve_device(cfg, nproc))  # type: ignore[arg-type]


def launch(
    cfg: EmbedConfig,
    nproc: int,
    *,
    on_line: LineHandler | None = None,
    python: str = sys.executable,
    grace_s: float = 3.0,
) -> None:
    """Start ``nproc`` local ranks on the prepared run folder through
    :func:`engine.launch.launch_ranks` (LaunchError names a failed rank; the others stop)."""
    from engine.launch import default_threads, launch_ranks

    cfg = check_nproc(cfg, nproc)
    config_path = Path(cfg.run_dir) / CONFIG_FILE
    config_path.write_text(json.dumps(cfg.to_dict(), indent=2), encoding="utf-8")
    launch_ranks(
        "engine.embeddings",
        ["--config", str(config_path), "--rank"],
        nproc,
        threads=cfg.threads or default_threads(nproc),
        on_line=on_line,
        python=python,
        grace_s=grace_s,
    )


class _LineSink:
    """Hands each event, as its line, to a launcher line handler (as if rank 0 printed it)."""

    def __init__(self, on_line: LineHandler) -> None:
        self.on_line = on_line

    def write(self, event: Mapping[str, Any]) -> None:
        """Pass the event line on."""
        self.on_line(0, "stdout", encode_event(event))

    def close(self) -> None:
        """Nothing to release."""


def open_run_dir(run_dir: Path) -> Path | None:
    """Create ``run_dir`` if needed and check that it can be written; return the topmost folder
    this made (removed again when the run fails before training), or None when it existed.
    ConfigError when it is a file, lies under one, or cannot be written (it crashed with a
    FileExistsError traceback)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(
            f"--run-dir {run_dir} is a file, not a folder",
            hint="name a folder for corpus.npz, embeddings.npy and summary.json (it is created "
            "when missing)",
        )
    _check_not_another_run(run_dir)
    made = next(
        (p for p in reversed([run_dir, *run_dir.parents]) if not p.exists()), None
    )  # the topmost missing folder: mkdir(parents=True) creates it and what lies below
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=run_dir, prefix=".write-check-"):
            pass
    except OSError as exc:
        if made is not None and made.is_dir():
            shutil.rmtree(made, ignore_errors=True)
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"--run-dir {run_dir} cannot be created or written: {reason}"
            + (f" ({exc.filename})" if exc.filename else ""),
            hint="name a folder you can write to",
        ) from None
    return made


OTHER_WORKLOADS: dict[str, str] = {
    "train_config.json": "a sentiment training run",
    "model.json": "a sentiment training run",
    "model.pt": "a sentiment training run",
    "checkpoints": "a sentiment training run",
    "dataset.h5": "a preprocessed dataset",
    "vocab.json": "a preprocessed dataset or a training run",
    "stats.json": "a preprocessed dataset",
    "profile.yaml": "a `sentitop run` run",
}
"""Files (and folders) of other workloads, which an embeddings run never writes, and what a
folder holding one is."""


def _check_not_another_run(run_dir: Path) -> None:
    """ConfigError when ``run_dir`` holds another workload's files (:data:`OTHER_WORKLOADS`: an
    interrupted `sentitop train` run, a preprocessed dataset) or the summary.json of something
    other than an embeddings run: embed started that run's events.jsonl afresh and wrote its own
    files among the others' (only a finished training run, by its summary.json, was refused)."""
    if not run_dir.is_dir():
        return
    found = sorted(name for name in OTHER_WORKLOADS if (run_dir / name).exists())
    path = run_dir / "summary.json"
    if path.is_file():
        try:
            workload = json.loads(path.read_text(encoding="utf-8")).get("workload")
        except (OSError, ValueError, AttributeError):
            workload = None
        if workload != "embeddings":
            found.append(path.name)
    if not found:
        return
    if found == [path.name]:
        held = "its summary.json is not an embeddings run's"
    else:
        shown = ", ".join(name + ("/" if (run_dir / name).is_dir() else "") for name in found)
        held = f"{OTHER_WORKLOADS[found[0]]}: {shown}"
    events = " and start its events.jsonl afresh" if (run_dir / "events.jsonl").exists() else ""
    raise ConfigError(
        f"--run-dir {run_dir} holds another kind of run ({held}); an embeddings run would "
        f"write its files among them{events}",
        hint="choose another --run-dir for the embeddings (a new or empty folder, or an earlier "
        "embeddings run's to replace it)",
    )


@contextlib.contextmanager
def termination_raises() -> Iterator[None]:
    """While inside (main thread only), SIGTERM and SIGHUP raise ``SystemExit(128 + signal)``,
    as the launcher's SIGTERM does while ranks run: the clean-up below runs and the exit code
    says which signal. Before, a SIGTERM during preparation killed the launcher at once. A
    signal that was ignored (``nohup``) stays ignored."""

    def _raise(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    with handlers_installed((signal.SIGTERM, signal.SIGHUP), _raise):
        yield


def check_batch(cfg: EmbedConfig, nproc: int) -> None:
    """Before any rank starts: ConfigError when a worker's documents hold fewer skip-gram pairs
    than one batch (not one step would train; the run ended `ok` with an SGNS loss of 0.0000):
    with every word kept, and on CPU also after epoch 1's sub-sampling, drawn as the ranks draw
    it (that was found by the ranks only: every rank and the launcher printed it, exit 1).
    Later epochs' draws, and a GPU's, are still checked by the ranks."""
    from engine.embeddings.corpus import (
        Corpus,
        epoch_pair_count,
        max_pairs,
        pair_seed,
        shard_docs,
    )
    from engine.embeddings.prepare import CORPUS_FILE

    corpus = Corpus.load(Path(cfg.run_dir) / CORPUS_FILE)
    workers = nproc - 1 if cfg.mode == "async" else nproc
    shards = [shard_docs(corpus, i, workers) for i in range(workers)]
    reach = corpus.reach(cfg.window)
    fewest = min(max_pairs(corpus, docs, reach) for docs in shards)
    who = "the corpus holds" if workers == 1 else f"the smallest of {workers} workers' shares holds"
    when = "before sub-sampling"
    if fewest >= cfg.batch and cfg.device == "cpu":
        fewest = min(
            epoch_pair_count(corpus, docs, window=cfg.window, subsample=cfg.subsample,
                             seed=pair_seed(cfg.seed, 0, i))
            for i, docs in enumerate(shards)
        )  # fmt: skip
        when = "after epoch 1's sub-sampling"
    if fewest >= cfg.batch:
        return
    raise ConfigError(
        f"--batch {cfg.batch} is more than the {fewest:,} skip-gram pairs {who} (window "
        f"{cfg.window}, {when}): not one step would train",
        hint=f"use a --batch well below {fewest:,}, fewer processes (--nproc), or more text",
    )


class _StartedStages:
    """An event sink that only notes which stages started."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def write(self, event: Mapping[str, Any]) -> None:
        """Note a `stage_start`."""
        if event.get("type") == "stage_start":
            self.names.add(str(event.get("stage")))

    def close(self) -> None:
        """Nothing to release."""


def run_local(
    cfg: EmbedConfig, nproc: int, *, on_line: LineHandler | None = None
) -> dict[str, Any]:
    """Prepare the run folder, train on ``nproc`` local ranks, return summary.json's content.

    The preparation's events go to RUN_DIR/events.jsonl and to ``on_line`` (stdout when None).
    A run that fails or is interrupted (Ctrl-C, SIGTERM, SIGHUP) before its ranks start removes
    the run folder when it made it, unless its corpus was prepared (kept for a re-run);
    otherwise its events end with an `error` and the open stage's `stage_end` (status `failed`
    or `interrupted`), and no summary.json or embeddings.npy is left to be taken as done.
    """
    cfg = check_nproc(cfg, nproc)
    run_dir = Path(cfg.run_dir)
    with termination_raises():
        made = open_run_dir(run_dir)
        with run_folder_lock(run_dir, "embed"):
            return _run_locked(cfg, nproc, on_line, made)


def _run_locked(
    cfg: EmbedConfig, nproc: int, on_line: LineHandler | None, made: Path | None
) -> dict[str, Any]:
    """:func:`run_local` once the run folder is this run's alone."""
    from engine.embeddings.runtime import SUMMARY_FILE

    run_dir = Path(cfg.run_dir)
    try:
        summary = _prepare_stage(cfg, nproc, on_line)
    except BaseException as exc:
        if made is not None and not _prepared(run_dir):  # nothing worth keeping
            shutil.rmtree(made, ignore_errors=True)
        elif made is not None and isinstance(exc, ConfigError):  # e.g. --batch too large
            exc.hint = (f"{exc.hint}; " if exc.hint else "") + (
                f"the corpus prepared in {run_dir} is kept: a re-run with the same input reuses it"
            )
        raise
    if summary is not None:
        return summary
    watch = TrainWatch(on_line)
    started = time.time()
    try:
        launch(cfg, nproc, on_line=watch)
    except BaseException as exc:
        own = watch.reported() if isinstance(exc, LaunchError) else None
        if cfg.events_file and not watch.ended:
            status, message = ending(own or exc)
            record_end(cfg.run_dir, "train", status, message, time.time() - started)
        if own is not None:  # a setting the ranks refused: said once, with its exit code
            raise own from None
        raise
    doc: dict[str, Any] = json.loads((run_dir / SUMMARY_FILE).read_text("utf-8"))
    return doc


def _prepared(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a finished preparation (its cache key is written last): a run
    refused after it (a --batch above the corpus's pairs) leaves it for the next run to reuse
    (it was removed with the folder, and preparing a large corpus again took minutes)."""
    from engine.embeddings.prepare import KEY_FILE

    return (run_dir / KEY_FILE).is_file()


def _prepare_stage(
    cfg: EmbedConfig, nproc: int, on_line: LineHandler | None
) -> dict[str, Any] | None:
    """prepare (and for --mode svd the vectors: their summary; else None, after checking the
    batch against the corpus), its events ended by `error` + `stage_end` when it fails."""
    from engine.embeddings.prepare import prepare

    sinks: list[EventSink] = [StreamSink() if on_line is None else _LineSink(on_line)]
    events = RunEventsFile(cfg.run_dir) if cfg.events_file else None
    if events is not None:
        sinks.append(events)
    started_stages = _StartedStages()
    emitter = Emitter(FanoutSink(*sinks, started_stages), rank=0)
    record = Emitter(sinks[-1], rank=0)  # the end of a failed stage: the file (the terminal
    # gets the error from the command, once)
    stage: str | None = "prepare"
    started = time.time()
    try:
        prepare(cfg, emitter, events)
        stage = None
        if cfg.mode == "svd":  # no ranks: the vectors are computed here
            from engine.embeddings.svd import run_svd

            Path(cfg.run_dir, CONFIG_FILE).write_text(json.dumps(cfg.to_dict(), indent=2))
            stage, started = "svd", time.time()
            return run_svd(cfg, emitter)
        check_batch(cfg, nproc)
        return None
    except BaseException as exc:
        status, message = ending(exc)
        hint = exc.hint if isinstance(exc, SentitopError) else None
        if cfg.events_file:
            record.emit("error", message=message, **({"hint": hint} if hint else {}))
            if stage in started_stages.names:  # it has a stage_start to end
                record.emit("stage_end", stage=stage, status=status, seconds=time.time() - started)
        raise
    finally:
        emitter.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags (and ``--config FILE``); prepare and launch, or run one rank (``--rank``)."""
    parser = argparse.ArgumentParser(
        prog="python -m engine.embeddings",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", help="embed_config.json to start from (flags override)")
    parser.add_argument("--rank", action="store_true", help="run one rank (torchrun/launcher)")
    parser.add_argument("--prepare-only", action="store_true", help="prepare the folder, exit")
    add_embed_arguments(parser)
    args = parser.parse_args(argv)
    try:
        base = None
        if args.config:
            base = json.loads(Path(args.config).read_text(encoding="utf-8"))
        cfg = config_from_args(args, base)
        if args.rank:
            return run_rank(cfg)
        if args.prepare_only:
            from engine.embeddings.prepare import prepare

            open_run_dir(Path(cfg.run_dir))

            events = RunEventsFile(cfg.run_dir) if cfg.events_file else None
            emitter = Emitter(FanoutSink(StreamSink(), *([events] if events else [])), rank=0)
            prepare(cfg, emitter, events)
            emitter.close()
            Path(cfg.run_dir, CONFIG_FILE).write_text(json.dumps(cfg.to_dict(), indent=2))
            return 0
        run_local(cfg, args.nproc)
        return 0
    except SentitopError as exc:
        print(exc.user_message(), file=sys.stderr)
        return exc.exit_code
    except (OSError, ValueError) as exc:
        print(f"bad config: {exc}", file=sys.stderr)
        return 2

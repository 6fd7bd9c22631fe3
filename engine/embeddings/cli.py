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
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.balance.args import MAX_STRAGGLE
from engine.embeddings.config import EmbedConfig
from engine.errors import ConfigError, SentitopError
from engine.events import (
    Emitter,
    EventSink,
    FanoutSink,
    JsonlFileSink,
    StreamSink,
    encode_event,
    rank_emitter,
)

if TYPE_CHECKING:
    from engine.launch import LineHandler

CONFIG_FILE = "embed_config.json"


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
        if env.device.type == "cuda":
            torch.cuda.set_device(env.device)
        if env.world > 1:
            dist.init_process_group(env.backend)
        run = EmbedRun(cfg, env, emitter)
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


def run_local(
    cfg: EmbedConfig, nproc: int, *, on_line: LineHandler | None = None
) -> dict[str, Any]:
    """Prepare the run folder, train on ``nproc`` local ranks, return summary.json's content.

    The preparation's events go to RUN_DIR/events.jsonl and to ``on_line`` (stdout when None).
    """
    from engine.embeddings.prepare import prepare
    from engine.embeddings.runtime import SUMMARY_FILE

    cfg = check_nproc(cfg, nproc)
    sinks: list[EventSink] = [StreamSink() if on_line is None else _LineSink(on_line)]
    if cfg.events_file:
        sinks.append(JsonlFileSink(Path(cfg.run_dir) / "events.jsonl"))
    emitter = Emitter(FanoutSink(*sinks), rank=0)
    try:
        prepare(cfg, emitter)
        if cfg.mode == "svd":  # no ranks: the vectors are computed here
            from engine.embeddings.svd import run_svd

            Path(cfg.run_dir, CONFIG_FILE).write_text(json.dumps(cfg.to_dict(), indent=2))
            return run_svd(cfg, emitter)
    finally:
        emitter.close()
    launch(cfg, nproc, on_line=on_line)
    doc: dict[str, Any] = json.loads((Path(cfg.run_dir) / SUMMARY_FILE).read_text("utf-8"))
    return doc


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

            emitter = rank_emitter(cfg.run_dir, 0, events_file=cfg.events_file)
            prepare(cfg, emitter)
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

"""Entry point of one training rank: ``python -m engine.sentiment.train`` (alone or under torchrun).

Examples::

    python -m engine.sentiment.train --data data/ --run-dir runs/r1 --epochs 3
    torchrun --nproc-per-node 2 -m engine.sentiment.train --data data/ --run-dir runs/r1
    python -m engine.sentiment.train --config runs/r1/train_config.json  # engine.launch

The module top stays torch-free (argparse + config) so the CLI can reuse the argument set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.config import (
    NO_INIT,
    OWN_TEXT_SVD,
    ModelConfig,
    TrainConfig,
    config_from_dict,
    config_to_dict,
)
from engine.config_flags import add_config_flags, flag_values
from engine.errors import ConfigError, InputError, SentitopError
from engine.events import rank_emitter
from engine.launch import LineHandler, default_threads


def add_train_arguments(parser: argparse.ArgumentParser, *, required: tuple[str, ...] = ()) -> None:
    """The training flags, generated from :class:`TrainConfig` and :class:`ModelConfig`.

    Shared by ``python -m engine.sentiment.train`` and ``sentitop train``; ``required`` names
    the settings that must be given (data_dir, run_dir: they may come from ``--config`` for
    the entry point, and data_dir from the run itself for `sentitop train --resume`).
    """
    from engine.balance.args import add_balance_arguments

    add_config_flags(
        parser,
        TrainConfig,
        skip=("resume",),
        aliases={"data_dir": "--data"},
        required=required,
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        default=None,
        help="continue from RUN_DIR/checkpoints/latest.pt",
    )
    model = parser.add_argument_group("model")
    add_config_flags(model, ModelConfig, prefix="model_", aliases={"preset": "--model"})
    add_balance_arguments(parser)


def config_from_args(args: argparse.Namespace, base: dict[str, Any] | None = None) -> TrainConfig:
    """A TrainConfig from ``base`` (e.g. a config file) overridden by the flags given."""
    data = dict(base or {})
    data.update(flag_values(args, TrainConfig))
    model = flag_values(args, ModelConfig, prefix="model_")
    if model:
        data["model"] = {**data.get("model", {}), **model}
    start = model.get("init_embeddings")
    if isinstance(start, str) and start not in (OWN_TEXT_SVD, NO_INIT):
        data["model"]["init_embeddings"] = os.path.abspath(start)  # a --resume from elsewhere
    if not data.get("data_dir"):
        raise ConfigError(
            "--data is required (a folder with dataset.h5)",
            hint="give the folder `sentitop preprocess --output` wrote; with --resume it is "
            "the run's own dataset unless given",
        )
    if not data.get("run_dir"):
        raise ConfigError("--run-dir is required")
    cfg = config_from_dict(TrainConfig, data, "train config")
    from engine.balance.args import balance_config_from_args

    cfg.balance = balance_config_from_args(args, cfg.balance)
    return cfg


def _make_hooks(cfg: TrainConfig) -> Any:
    """The balancer's hooks for a balanced or straggling run, else the even split."""
    from engine.balance.hooks import make_train_hooks

    return make_train_hooks(cfg)


def device_name(device: Any) -> str:
    """What a person calls the device: the GPU model ("NVIDIA A10G"), or "CPU"."""
    import torch

    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    return "CPU"


def launch_local(
    cfg: TrainConfig,
    nproc: int,
    *,
    on_line: LineHandler | None = None,
    threads: int | None = None,
    python: str = sys.executable,
    grace_s: float = 3.0,
    env: dict[str, str] | None = None,
) -> None:
    """Train with ``nproc`` local ranks; returns when all finished, raises LaunchError otherwise.

    The config is written to RUN_DIR/train_config.json and read by every rank. ``threads`` is
    torch threads per rank (default: cores // nproc). When a rank fails the others are stopped
    (SIGTERM, SIGKILL after ``grace_s``) and the error names the rank and its last stderr lines.
    """
    from engine.run_lock import run_folder_lock
    from engine.sentiment.checkpoint import write_json

    if nproc < 1:
        raise ConfigError(f"--nproc = {nproc} must be >= 1")
    run_dir = Path(cfg.run_dir)
    config_path = run_dir / "train_config.json"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in (run_dir, *run_dir.parents) if p.is_file()), None)
        if blocker is not None:  # mkdir says only "File exists" or "Not a directory"
            raise InputError(
                f"--run-dir {run_dir}: {blocker} is a file, not a folder",
                hint="name a folder for the run (it is created when missing)",
            ) from None
        raise InputError(
            f"--run-dir {run_dir}: cannot be created ({exc.strerror or exc})",
            hint="choose a folder you can write to",
        ) from None
    with run_folder_lock(run_dir, "train"):  # before its config: another run's is not touched
        try:
            write_json(config_path, config_to_dict(cfg))
        except OSError as exc:
            raise InputError(
                f"--run-dir {run_dir}: cannot write {config_path.name} ({exc.strerror or exc})",
                hint="choose a folder you can write to",
            ) from None
        events = run_dir / "events.jsonl"
        if not cfg.resume and cfg.events_file and events.is_file():  # a killed run's, with no
            os.replace(events, run_dir / EARLIER_EVENTS)  # checkpoint: a replay showed both runs
        _launch(cfg, nproc, config_path, on_line, threads, python, grace_s, env)


EARLIER_EVENTS = "events.earlier.jsonl"
"""Where a new run in a folder moves the events of the run before it there (one that ended
without a checkpoint or summary, so a fresh run was allowed): kept, not mixed into its own."""


def _launch(
    cfg: TrainConfig,
    nproc: int,
    config_path: Path,
    on_line: LineHandler | None,
    threads: int | None,
    python: str,
    grace_s: float,
    env: dict[str, str] | None,
) -> None:
    """:func:`launch_local` once the run folder is this run's alone."""
    from engine.launch import StopFirst, launch_ranks
    from engine.run_end import ending, record_end
    from engine.sentiment import checkpoint as ckpt
    from engine.sentiment.checkpoint import CHECKPOINT, REQUEST
    from engine.stop_rules import STOP_CHECKPOINT_S

    run_dir = Path(cfg.run_dir)
    per_rank = threads or cfg.threads or default_threads(nproc)
    request = run_dir / REQUEST
    latest = run_dir / CHECKPOINT
    before = latest.stat().st_mtime_ns if latest.exists() else None

    def ask() -> None:
        request.parent.mkdir(parents=True, exist_ok=True)
        request.touch()

    def served() -> bool:  # rank 0 removes the request once the checkpoint is written
        return not request.exists() and latest.exists() and latest.stat().st_mtime_ns != before

    stop_first = StopFirst(
        ask,
        served,
        STOP_CHECKPOINT_S,
        f"stopping: rank 0 first writes a checkpoint at its next step (up to "
        f"{STOP_CHECKPOINT_S:g} s); Ctrl-C again to stop at once",
    )
    started = time.time()
    try:
        launch_ranks(
            "engine.sentiment.train",
            ["--config", str(config_path), "--threads", str(per_rank)],
            nproc,
            threads=per_rank,
            on_line=on_line,
            python=python,
            grace_s=grace_s,
            env=env,
            stop_first=stop_first,
        )
    except BaseException as exc:  # the ranks were stopped or failed: the events end with it
        if cfg.events_file and not (run_dir / ckpt.SUMMARY).is_file():
            status, message = ending(exc)  # a failed rank said its error: only the end here
            record_end(run_dir, "train", status, message if status != "failed" else None,
                       time.time() - started)  # fmt: skip
        raise
    finally:
        request.unlink(missing_ok=True)  # an unserved request would fire in a resumed run


def run(cfg: TrainConfig) -> int:
    """Train on this rank (torchrun environment or a single process); return the exit code."""
    import torch
    import torch.distributed as dist

    from engine.rank_main import run_as_rank
    from engine.sentiment.dist_env import DistEnv
    from engine.sentiment.trainer import Trainer

    env = DistEnv.from_environ(cfg.device)
    torch.set_num_threads(cfg.threads or default_threads(env.local_world))
    emitter = rank_emitter(cfg.run_dir, env.rank, events_file=cfg.events_file)

    def work() -> None:
        if env.world > 1:
            if env.device.type == "cuda":
                torch.cuda.set_device(env.device)
            dist.init_process_group(
                env.backend,
                device_id=env.device if env.device.type == "cuda" else None,
            )
        # every rank says where it runs: launchers map ranks to nodes (and their prices) by it
        emitter.emit(
            "rank_start",
            world_size=env.world,
            local_rank=env.local_rank,
            device=str(env.device),
            device_name=device_name(env.device),
        )
        Trainer(cfg, emitter=emitter, hooks=_make_hooks(cfg), env=env).fit()

    return run_as_rank(work, emitter)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags (and ``--config FILE``), then :func:`run`."""
    parser = argparse.ArgumentParser(
        prog="python -m engine.sentiment.train",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", help="train_config.json to start from (flags override)")
    add_train_arguments(parser)
    args = parser.parse_args(argv)
    try:
        base = None
        if args.config:
            with open(args.config, encoding="utf-8") as fh:
                base = json.load(fh)
        cfg = config_from_args(args, base)
    except (SentitopError, OSError, ValueError) as exc:
        print(
            exc.user_message() if isinstance(exc, SentitopError) else f"bad config: {exc}",
            file=sys.stderr,
        )
        return 2
    return run(cfg)


if __name__ == "__main__":
    from engine.rank_main import exit_rank

    exit_rank(main())

"""Entry point of one training rank: ``python -m engine.train`` (standalone or under torchrun).

Examples::

    python -m engine.train --data data/ --run-dir runs/r1 --epochs 3
    torchrun --nproc-per-node 2 -m engine.train --data data/ --run-dir runs/r1
    python -m engine.train --config runs/r1/train_config.json      # what engine.launch runs

The module top stays torch-free (argparse + config) so the CLI can reuse the argument set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import Any

from engine.config import BalanceConfig, ModelConfig, TrainConfig
from engine.errors import ConfigError, SentitopError
from engine.events import Emitter, EventSink, FanoutSink, JsonlFileSink, StreamSink


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The training flags shared by ``python -m engine.train`` and ``sentitop train``."""
    from engine.balance_args import add_balance_arguments

    parser.add_argument("--data", dest="data_dir", help="folder with dataset.h5 and vocab.json")
    parser.add_argument("--run-dir", help="run folder (events, checkpoints, summary)")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--batch-size", type=int, help="global batch (sum over ranks)")
    parser.add_argument("--lr", type=float, help="learning rate at --lr-reference-batch")
    parser.add_argument("--lr-reference-batch", type=int)
    parser.add_argument("--warmup-steps", type=int)
    parser.add_argument("--eval-every", type=int, help="evaluate every N epochs")
    parser.add_argument(
        "--keep-best",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="finish with the epoch of lowest held-out loss (default: on)",
    )
    parser.add_argument("--patience", type=int, help="stop after N evaluations without a best")
    parser.add_argument(
        "--init-embeddings", metavar="RUN_DIR", help="start the embedding table from an embed run"
    )
    parser.add_argument("--model", dest="preset", choices=["default", "seed"])
    parser.add_argument("--seed", type=int)
    parser.add_argument("--threads", type=int, help="torch threads per rank")
    parser.add_argument("--loader-workers", type=int)
    parser.add_argument("--max-train-samples", type=int)
    parser.add_argument("--log-every", type=int)
    parser.add_argument("--checkpoint-every-min", type=float)
    parser.add_argument("--checkpoint-every-steps", type=int)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--grad-sync", choices=["overlap", "separate"])
    parser.add_argument("--loss-threshold", type=float)
    parser.add_argument(
        "--resume",
        action="store_true",
        default=None,
        help="continue from RUN_DIR/checkpoints/latest.pt",
    )
    parser.add_argument(
        "--pos-weight", help="BCE positive weight: auto (negatives/positives), none, or a number"
    )
    add_balance_arguments(parser)


_FLAG_FIELDS = (
    "data_dir",
    "run_dir",
    "epochs",
    "batch_size",
    "lr",
    "lr_reference_batch",
    "warmup_steps",
    "eval_every",
    "keep_best",
    "patience",
    "seed",
    "threads",
    "loader_workers",
    "max_train_samples",
    "log_every",
    "checkpoint_every_min",
    "checkpoint_every_steps",
    "device",
    "grad_sync",
    "loss_threshold",
    "resume",
)


def config_from_args(args: argparse.Namespace, base: dict[str, Any] | None = None) -> TrainConfig:
    """A TrainConfig from ``base`` (e.g. a config file) overridden by the flags given."""
    data = dict(base or {})
    for name in _FLAG_FIELDS:
        value = getattr(args, name, None)
        if value is not None:
            data[name] = value
    pos_weight = getattr(args, "pos_weight", None)
    if pos_weight is not None:
        try:
            data["pos_weight"] = pos_weight if pos_weight in ("auto", "none") else float(pos_weight)
        except ValueError:
            raise ConfigError(
                f"--pos-weight {pos_weight!r}: expected auto, none or a number"
            ) from None
    if getattr(args, "preset", None):
        data["model"] = {**data.get("model", {}), "preset": args.preset}
    if getattr(args, "init_embeddings", None):
        data["model"] = {**data.get("model", {}), "init_embeddings": args.init_embeddings}
    if not data.get("data_dir"):
        raise ConfigError("--data is required (a folder with dataset.h5)")
    if not data.get("run_dir"):
        raise ConfigError("--run-dir is required")
    cfg = config_from_dict(data)
    from engine.balance_args import balance_config_from_args

    cfg.balance = balance_config_from_args(args, cfg.balance)
    return cfg


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """Inverse of ``engine.trainer.config_to_dict`` (unknown keys are an error)."""
    known = {f.name for f in fields(TrainConfig)}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(f"unknown train config keys {sorted(unknown)}; expected {sorted(known)}")
    data = dict(data)
    data["model"] = ModelConfig(**data.get("model", {}))
    balance = dict(data.get("balance", {}))
    balance["straggle"] = {int(k): float(v) for k, v in balance.get("straggle", {}).items()}
    data["balance"] = BalanceConfig(**balance)
    return TrainConfig(**data)


def config_to_dict(cfg: TrainConfig) -> dict[str, Any]:
    """JSON-ready TrainConfig (nested dataclasses become dicts); see :func:`config_from_dict`."""
    data = asdict(cfg)
    data["balance"]["straggle"] = {str(k): v for k, v in cfg.balance.straggle.items()}
    return data


def make_emitter(cfg: TrainConfig, rank: int) -> Emitter:
    """Events to stdout on every rank, plus RUN_DIR/events.jsonl on rank 0 (cfg.events_file)."""
    sinks: list[EventSink] = [StreamSink()]
    if rank == 0 and cfg.events_file:
        sinks.append(JsonlFileSink(os.path.join(cfg.run_dir, "events.jsonl")))
    return Emitter(FanoutSink(*sinks), rank=rank, node=os.environ.get("SENTITOP_NODE"))


def default_threads(local_world: int) -> int:
    """CPU cores available to this process divided by the ranks on this node (at least 1)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // max(1, local_world))


def _make_hooks(cfg: TrainConfig) -> Any:
    """The balancer's hooks for a balanced or straggling run, else the even split."""
    from engine.balance_hooks import make_train_hooks

    return make_train_hooks(cfg)


def run(cfg: TrainConfig) -> int:
    """Train on this rank (torchrun environment or a single process); return the exit code."""
    import torch
    import torch.distributed as dist

    from engine.rank_main import run_as_rank
    from engine.trainer import DistEnv, Trainer

    env = DistEnv.from_environ(cfg.device)
    torch.set_num_threads(cfg.threads or default_threads(env.local_world))
    emitter = make_emitter(cfg, env.rank)

    def work() -> None:
        if env.world > 1:
            if env.device.type == "cuda":
                torch.cuda.set_device(env.device)
            dist.init_process_group(
                "nccl" if env.device.type == "cuda" else "gloo",
                device_id=env.device if env.device.type == "cuda" else None,
            )
        # every rank says where it runs: launchers map ranks to nodes (and their prices) by it
        emitter.emit(
            "rank_start", world_size=env.world, local_rank=env.local_rank, device=str(env.device)
        )
        Trainer(cfg, emitter=emitter, hooks=_make_hooks(cfg), env=env).fit()

    return run_as_rank(work, emitter)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags (and ``--config FILE``), then :func:`run`."""
    parser = argparse.ArgumentParser(
        prog="python -m engine.train",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", help="train_config.json to start from (flags override)")
    parser.add_argument(
        "--no-events-file",
        action="store_true",
        help="do not write RUN_DIR/events.jsonl (stdout only)",
    )
    add_train_arguments(parser)
    args = parser.parse_args(argv)
    try:
        base = None
        if args.config:
            with open(args.config, encoding="utf-8") as fh:
                base = json.load(fh)
        cfg = config_from_args(args, base)
        if args.no_events_file:
            cfg.events_file = False
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

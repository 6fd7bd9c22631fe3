"""Command-line options of the load balancer (`sentitop train`, `engine.sentiment.train`)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from engine.config import BalanceConfig
from engine.errors import ConfigError

MAX_STRAGGLE = 1000.0
"""The slowest emulated rank: FACTOR × its compute time (a larger one only stalls the run)."""


def parse_straggle(text: str) -> tuple[int, float]:
    """``RANK:FACTOR`` → (rank, factor); raises ConfigError naming the option."""
    rank_text, sep, factor_text = text.partition(":")
    try:
        if not sep:
            raise ValueError
        rank, factor = int(rank_text), float(factor_text)
    except ValueError:
        raise ConfigError(
            f"--straggle {text!r} is not RANK:FACTOR", hint="e.g. --straggle 1:1.8"
        ) from None
    if rank < 0 or not 1 <= factor <= MAX_STRAGGLE:  # (inf would sleep forever; NaN fails)
        raise ConfigError(
            f"--straggle {text!r}: need RANK >= 0 and FACTOR from 1 to {MAX_STRAGGLE:g}"
        )
    return rank, factor


def _straggle_type(text: str) -> tuple[int, float]:
    try:
        return parse_straggle(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def add_balance_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --balance/--no-balance, --rebalance-every-epochs/-steps, --straggle to ``parser``."""
    group = parser.add_argument_group("load balancer")
    group.add_argument(
        "--balance",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="split data and batch per rank by measured speed (default: off)",
    )
    group.add_argument(
        "--rebalance-every-epochs",
        type=int,
        metavar="X",
        default=None,
        help="rebalance after every X epochs (default 1)",
    )
    group.add_argument(
        "--rebalance-every-steps",
        type=int,
        metavar="K",
        default=None,
        help="also rebalance every K steps inside an epoch (default 0 = never)",
    )
    group.add_argument(
        "--straggle",
        type=_straggle_type,
        action="append",
        metavar="RANK:FACTOR",
        default=None,
        help="make RANK sleep (FACTOR-1) x its compute time each step (repeatable)",
    )


def balance_config_from_args(
    args: argparse.Namespace, base: BalanceConfig | None = None
) -> BalanceConfig:
    """``base`` (a profile's settings, or the defaults) overridden by the options given."""
    config = base if base is not None else BalanceConfig()
    changes: dict[str, Any] = {}
    if getattr(args, "balance", None) is not None:
        changes["enabled"] = bool(args.balance)
    if getattr(args, "rebalance_every_epochs", None) is not None:
        changes["every_epochs"] = args.rebalance_every_epochs
    if getattr(args, "rebalance_every_steps", None) is not None:
        changes["every_steps"] = args.rebalance_every_steps
    if getattr(args, "straggle", None):
        changes["straggle"] = dict(args.straggle)
    return replace(config, **changes) if changes else config  # replace re-validates


def balance_argv(config: BalanceConfig) -> list[str]:
    """Options that reproduce ``config``'s CLI-settable fields (for a launcher's child argv)."""
    argv = ["--balance" if config.enabled else "--no-balance"]
    argv += ["--rebalance-every-epochs", str(config.every_epochs)]
    argv += ["--rebalance-every-steps", str(config.every_steps)]
    for rank, factor in sorted(config.straggle.items()):
        argv += ["--straggle", f"{rank}:{factor:g}"]
    return argv

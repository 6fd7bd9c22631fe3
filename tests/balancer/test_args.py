"""The balancer's command-line options."""

from __future__ import annotations

import argparse

import pytest

from engine.balance.args import (
    add_balance_arguments,
    balance_argv,
    balance_config_from_args,
    parse_straggle,
)
from engine.config import BalanceConfig
from engine.errors import ConfigError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_balance_arguments(parser)
    return parser


def test_options_build_a_config_and_round_trip() -> None:
    args = _parser().parse_args(
        [
            "--balance",
            "--rebalance-every-epochs",
            "2",
            "--rebalance-every-steps",
            "50",
            "--straggle",
            "1:1.8",
            "--straggle",
            "3:2",
        ]
    )
    config = balance_config_from_args(args)
    assert config == BalanceConfig(
        enabled=True, every_epochs=2, every_steps=50, straggle={1: 1.8, 3: 2.0}
    )
    again = balance_config_from_args(_parser().parse_args(balance_argv(config)))
    assert again == config


def test_unset_options_keep_the_profile_values() -> None:
    base = BalanceConfig(enabled=True, every_epochs=3, min_share=0.2)
    assert balance_config_from_args(_parser().parse_args([]), base) is base
    off = balance_config_from_args(_parser().parse_args(["--no-balance"]), base)
    assert not off.enabled and off.every_epochs == 3 and off.min_share == 0.2


@pytest.mark.parametrize("text", ["1", "a:2", "1:0.5", "-1:2", "1:x", "1:inf", "1:nan", "1:1e6"])
def test_bad_straggle_values_are_rejected_with_the_option_name(text: str) -> None:
    with pytest.raises(ConfigError, match="--straggle"):
        parse_straggle(text)


def test_invalid_values_are_rejected_by_the_config() -> None:
    args = _parser().parse_args(["--rebalance-every-epochs", "0"])
    with pytest.raises(ConfigError, match=r"balance\.every_epochs"):
        balance_config_from_args(args)

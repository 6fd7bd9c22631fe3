"""Argument parsing shared by the subcommands: option values that look like negative numbers."""

from __future__ import annotations

import argparse
import re

NEGATIVE_VALUE = re.compile(r"^-\.?\d")
"""Arguments a parser given to :func:`take_negative_values` reads as values: -5GB, -.5GB, -2h."""


def take_negative_values(parser: argparse.ArgumentParser) -> None:
    """Make a subcommand's `parser` read -5GB after an option as the option's value, so that
    the option's own check says what is wrong ("must be positive"): argparse reads only -5 and
    -.5 so, anything else starting with '-' as an option ("expected one argument"). This
    parser only (the main parser hands a subcommand its words unread); it must have no option
    named like a number (-1)."""
    parser._negative_number_matcher = NEGATIVE_VALUE

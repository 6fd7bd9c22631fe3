"""Parse human sizes such as 50KB, 200MB, 1GB or 1.5GiB into a byte count (and back)."""

from __future__ import annotations

import re
from decimal import Decimal

from engine.errors import InputError

_UNITS: dict[str, int] = {
    "": 1,
    "B": 1,
    "K": 1000,
    "KB": 1000,
    "M": 1000**2,
    "MB": 1000**2,
    "G": 1000**3,
    "GB": 1000**3,
    "T": 1000**4,
    "TB": 1000**4,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
}
_PATTERN = re.compile(r"^\s*(-?\s*(?:\d+(?:\.\d*)?|\.\d+))\s*([A-Za-z]*)\s*$")
"""A number (a minus sign too, so that a negative one is called negative) and a unit."""


def _read(text: str | int, name: str, hint: str, what: str) -> Decimal:
    """The exact value of `text` (number times unit); InputError naming `name` and `what` was
    expected otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        return Decimal(text)
    match = _PATTERN.match(str(text))
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in _UNITS:
        raise InputError(f"{name}: cannot read {text!r} as {what}", hint=hint)
    return Decimal(match.group(1).replace(" ", "")) * _UNITS[unit]


def parse_size(text: str | int, *, name: str = "--size") -> int:
    """Bytes in `text` ("50KB", "200MB", "1GB", "1.5GiB", "4096"); KB/MB/GB are powers of 1000.

    Raises InputError naming `name` when the text is not a positive size.
    """
    hint = "give a number with an optional unit: 50KB, 200MB, 1GB, 1.5GiB or bytes"
    value = int(_read(text, name, hint, "a size"))
    if value <= 0:
        raise InputError(
            f"{name}: size must be positive, got {text!r}",
            hint="give a size such as 50KB, 200MB or 1GB",
        )
    return value


def parse_count(text: str | int, *, name: str) -> int:
    """A positive whole number in `text` ("5000", "100k", "2.5M", "30M"; powers of 1000).

    Raises InputError naming `name` for anything else, fractions such as "2.5" included.
    """
    hint = "give a whole number with an optional unit: 5000, 100k, 2.5M, 30M"
    value = _read(text, name, hint, "a whole number")
    if value != value.to_integral_value():
        raise InputError(f"{name}: must be a whole number, got {text!r}", hint=hint)
    if value <= 0:
        raise InputError(f"{name}: must be positive, got {text!r}", hint=hint)
    return int(value)


def format_size(count: float) -> str:
    """`count` bytes as a short human size in powers of 1000: "950 B", "50.0 KB", "10.0 TB"."""
    for unit, scale in (("TB", 1000**4), ("GB", 1000**3), ("MB", 1000**2), ("KB", 1000)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{int(count)} B"

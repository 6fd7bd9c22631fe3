"""Parse human sizes such as 50KB, 200MB, 1GB or 1.5GiB into a byte count (and back)."""

from __future__ import annotations

import re
from decimal import Decimal

from engine.errors import InputError

_DECIMAL = ("KB", "MB", "GB", "TB", "PB")
"""Units in powers of 1000 (K, M, G, T, P alone too), smallest first."""
_BINARY = ("KiB", "MiB", "GiB", "TiB", "PiB")
"""Units in powers of 1024, smallest first."""
_UNITS: dict[str, int] = {
    "": 1,
    "B": 1,
    **{unit: 1000 ** (n + 1) for n, unit in enumerate(_DECIMAL)},
    **{unit[0]: 1000 ** (n + 1) for n, unit in enumerate(_DECIMAL)},
    **{unit.upper(): 1024 ** (n + 1) for n, unit in enumerate(_BINARY)},
}
_UNITS_TEXT = f"{', '.join(_DECIMAL)}: powers of 1000; {', '.join(_BINARY)}: of 1024"
"""The units accepted, for the hint of an unreadable size."""
_PATTERN = re.compile(r"^\s*(-?\s*(?:\d+(?:\.\d*)?|\.\d+))\s*([A-Za-z]*)\s*$")
"""A number (a minus sign too, so that a negative one is called negative) and a unit."""


def _read(text: str | int, name: str, hint: str, what: str) -> Decimal:
    """The exact value of `text` (number times unit); InputError naming `name` and `what` was
    expected otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        return Decimal(text)
    if not str(text).strip():
        raise InputError(f"{name}: empty, expected {what}", hint=hint)
    match = _PATTERN.match(str(text))
    unit = match.group(2).upper() if match else ""
    if match is None or unit not in _UNITS:
        raise InputError(f"{name}: cannot read {text!r} as {what}", hint=hint)
    return Decimal(match.group(1).replace(" ", "")) * _UNITS[unit]


def parse_size(text: str | int, *, name: str = "--size") -> int:
    """Bytes in `text` ("50KB", "200MB", "1GB", "1.5GiB", "2TB", "1PB", "4096"); KB to PB are
    powers of 1000, KiB to PiB of 1024.

    Raises InputError naming `name` when the text is not a positive size.
    """
    hint = (
        f"give a number and a unit, e.g. 200MB, 92GB or 1.5GiB ({_UNITS_TEXT}; a bare "
        "number: bytes)"
    )
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
    for n, unit in reversed(list(enumerate(_DECIMAL))):
        scale = 1000 ** (n + 1)
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{int(count)} B"

"""Parse human sizes such as 50KB, 200MB, 1GB or 1.5GiB into a byte count."""

from __future__ import annotations

import re

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
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int, *, name: str = "--size") -> int:
    """Bytes in `text` ("50KB", "200MB", "1GB", "1.5GiB", "4096"); KB/MB/GB are powers of 1000.

    Raises InputError naming `name` when the text is not a positive size.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _PATTERN.match(str(text))
        unit = match.group(2).upper() if match else ""
        if match is None or unit not in _UNITS:
            raise InputError(
                f"{name}: cannot read {text!r} as a size",
                hint="give a number with an optional unit: 50KB, 200MB, 1GB, 1.5GiB or bytes",
            )
        value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise InputError(
            f"{name}: size must be positive, got {text!r}",
            hint="give a size such as 50KB, 200MB or 1GB",
        )
    return value

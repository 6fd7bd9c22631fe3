"""A file the user may not read, emulated: root (who runs CI) reads a chmod 000 file anyway, so
the modules that open it are given an ``open`` that refuses that one path as the OS would."""

from __future__ import annotations

import builtins
import errno
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def refuse_reading(monkeypatch: pytest.MonkeyPatch, refused: Path, *modules: ModuleType) -> None:
    """Opening ``refused`` in ``modules`` fails with EACCES (PermissionError); other paths open."""
    real = builtins.open

    def guarded(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path) == str(refused):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    for module in modules:
        monkeypatch.setattr(module, "open", guarded, raising=False)

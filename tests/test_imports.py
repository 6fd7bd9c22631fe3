"""Import hygiene: light modules stay light, and the layers only import downwards."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "textual", "asyncssh", "boto3", "h5py")


def _loaded_after(stmt: str) -> set[str]:
    code = f"import sys\n{stmt}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return {name.split(".")[0] for name in out.stdout.split()}


@pytest.mark.parametrize("module", ["engine.config", "engine.events", "engine.errors"])
def test_engine_light_modules_load_no_heavy_packages(module: str) -> None:
    loaded = _loaded_after(f"import {module}")
    assert not loaded & set(HEAVY), f"{module} pulled in {sorted(loaded & set(HEAVY))}"


def test_cli_help_loads_no_torch_or_textual() -> None:
    loaded = _loaded_after("from tui.cli import build_parser; build_parser()")
    assert "torch" not in loaded
    assert "textual" not in loaded


def test_import_contract_holds() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr

"""The balancer's pure modules load no torch (the dashboard and the CLI import them)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["engine.balance.balancer", "engine.balance.args"])
def test_balancer_modules_load_no_torch(module: str) -> None:
    code = f"import sys, {module}; print(any(m.split('.')[0] == 'torch' for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "False"

"""Fixtures for end-to-end `sentitop run` tests: tiny profiles, isolated cache and runs folders."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TINY_PROFILE = """\
name: {name}
description: tiny synthetic run for tests
provider: local
instance_type: {instance_type}
data:
  synthetic:
    size: 400KB
    seed: 1
preprocess:
  vocab_size: 500
  seq_len: 32
train:
  nproc: {nproc}
  epochs: {epochs}
  batch: 64
  log_every: 2
  checkpoint_every_min: 0
  threads: 1
budget:
  max_usd: {max_usd}
"""


@pytest.fixture()
def run_env(tmp_path: Path) -> dict[str, str]:
    """Environment with private cache and runs folders under tmp_path."""
    env = dict(os.environ)
    env["SENTITOP_CACHE_DIR"] = str(tmp_path / "cache")
    env["SENTITOP_RUNS_DIR"] = str(tmp_path / "runs")
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.fixture()
def write_profile(tmp_path: Path) -> Callable[..., Path]:
    """Write a tiny local profile; keyword arguments fill the template."""

    def write(**values: object) -> Path:
        fields = {
            "name": "tiny",
            "instance_type": "m5.large",
            "nproc": 1,
            "epochs": 1,
            "max_usd": 1.0,
            **values,
        }
        path = tmp_path / f"{fields['name']}.yaml"
        path.write_text(TINY_PROFILE.format(**fields))
        return path

    return write


def sentitop(
    *args: str, env: dict[str, str], timeout: float = 240, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )

"""Training ranks start with malloc settings that keep freed tensor memory (engine/rank_malloc.py):
the user's own GLIBC_TUNABLES win, and a rank's allocations stop faulting their pages in again."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from engine.launch import launch_ranks, rank_environ
from engine.rank_malloc import RANK_MALLOC_TUNABLES, add_malloc_tunables

ROOT = Path(__file__).resolve().parents[2]


def test_the_tunables_are_added_after_the_users_and_never_override_them() -> None:
    env = {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0:glibc.rtld.nns=2"}
    add_malloc_tunables(env)
    parts = env["GLIBC_TUNABLES"].split(":")
    assert parts[:2] == ["glibc.malloc.trim_threshold=0", "glibc.rtld.nns=2"]
    assert [p.split("=")[0] for p in parts[2:]] == [
        n for n, _ in RANK_MALLOC_TUNABLES if n != "glibc.malloc.trim_threshold"
    ]
    again = dict(env)
    add_malloc_tunables(again)
    assert again == env  # a second pass (a node launcher under a launcher) adds nothing
    fresh: dict[str, str] = {}
    add_malloc_tunables(fresh)
    assert fresh["GLIBC_TUNABLES"] == ":".join(f"{n}={v}" for n, v in RANK_MALLOC_TUNABLES)
    off = {"SENTITOP_RANK_MALLOC": "off"}
    add_malloc_tunables(off)
    assert "GLIBC_TUNABLES" not in off  # glibc's own behaviour, where asked for


def test_every_rank_environment_carries_them() -> None:
    env = rank_environ(1, 2, 29500, 1, base={"PATH": "/usr/bin"})
    assert all(f"{n}={v}" in env["GLIBC_TUNABLES"] for n, v in RANK_MALLOC_TUNABLES)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc malloc tunables")
def test_a_launched_rank_faults_its_freed_memory_in_far_less_often() -> None:
    base = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    base["PYTHONPATH"] = str(ROOT)
    plain = subprocess.run(
        [sys.executable, "-m", "tests.train.malloc_probe"],
        env=base, cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines: list[str] = []
    launch_ranks(
        "tests.train.malloc_probe", [], 1, threads=1, env=base,
        on_line=lambda rank, stream, line: lines.append(line),
    )  # fmt: skip
    without = int(plain.stdout.split()[-1])
    with_tunables = int(next(line for line in lines if line.startswith("faults")).split()[-1])
    assert with_tunables * 4 < without, (with_tunables, without)

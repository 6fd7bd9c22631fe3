"""The embeddings launcher is the shared :func:`engine.launch.launch_ranks` (fast, no torch)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine import launch as launcher
from engine.embeddings.cli import launch
from engine.embeddings.config import CONFIG_FILE, EmbedConfig
from engine.errors import ConfigError, LaunchError


def test_embeddings_ranks_start_through_the_shared_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []

    def fake(module: str, args: list[str], nproc: int, **kwargs: Any) -> None:
        calls.append({"module": module, "args": args, "nproc": nproc, **kwargs})

    monkeypatch.setattr(launcher, "launch_ranks", fake)
    cfg = EmbedConfig(run_dir=str(tmp_path), input="x.jsonl", mode="async", threads=2)
    launch(cfg, 3)
    config_path = tmp_path / CONFIG_FILE
    assert calls == [
        {
            "module": "engine.embeddings",
            "args": ["--config", str(config_path), "--rank"],
            "nproc": 3,
            "threads": 2,
            "on_line": None,
            "python": launch.__kwdefaults__["python"],
            "grace_s": 3.0,
        }
    ]
    written = EmbedConfig.from_dict(json.loads(config_path.read_text()))
    assert written == replace(cfg, device="cpu")  # the ranks read the device resolved once
    with pytest.raises(ConfigError, match="--nproc >= 2"):
        launch(cfg, 1)  # async needs a server and a worker; nothing is started
    assert len(calls) == 1


def test_launch_ranks_streams_each_rank_and_names_the_failed_one(tmp_path: Path) -> None:
    lines: list[tuple[int, str, str]] = []
    launcher.launch_ranks(
        "engine.embeddings",
        ["--help"],
        2,
        threads=1,
        on_line=lambda rank, stream, line: lines.append((rank, stream, line)),
    )
    for rank in (0, 1):
        assert any(r == rank and s == "stdout" and "usage:" in ln for r, s, ln in lines)
        assert any(r == rank and ln.startswith(f"launch: rank {rank} pid ") for r, _, ln in lines)
    missing = tmp_path / "missing.json"
    with pytest.raises(LaunchError) as err:
        launcher.launch_ranks(
            "engine.embeddings",
            ["--config", str(missing), "--rank"],
            2,
            threads=1,
            on_line=lambda rank, stream, line: None,
        )
    # both ranks fail the same way; whichever exits first is named
    assert re.search(r"rank [01] \(pid \d+\) failed: exit code 2", err.value.message)
    assert err.value.hint is not None and "missing.json" in err.value.hint
    assert "stopped the other 1 rank(s)" in err.value.message
    with pytest.raises(LaunchError) as alone:  # one rank: there is no other to stop
        launcher.launch_ranks("engine.embeddings", ["--config", str(missing), "--rank"], 1,
                              threads=1, on_line=lambda rank, stream, line: None)  # fmt: skip
    assert alone.value.message.endswith("failed: exit code 2")

"""`sentitop replay`: a recording under any name plays itself; garbage and bad speeds refused."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tui.cli import main

FIXTURE = Path(__file__).parent / "fixtures" / "runs" / "20261121-fixture" / "events.jsonl"


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the dashboard was opened with (it is not started)."""
    calls: list[dict[str, Any]] = []
    import tui.app

    monkeypatch.setattr(tui.app, "run_dashboard", lambda **kw: calls.append(kw) or 0)
    return calls


def test_a_recording_under_another_name_is_what_plays(
    tmp_path: Path, opened: list[dict[str, Any]]
) -> None:
    renamed = tmp_path / "rp" / "recorded.jsonl"
    renamed.parent.mkdir()
    shutil.copy(FIXTURE, renamed)
    assert main(["replay", str(renamed), "--speed", "0"]) == 0
    assert opened[-1]["replay"] == renamed  # not its folder, which holds no events.jsonl
    assert main(["replay", str(FIXTURE.parent), "--speed", "0"]) == 0
    assert opened[-1]["replay"] == FIXTURE.parent  # a run folder plays under the run's name


@pytest.mark.parametrize("content", [b"", b"not events\n{}\n", "random"])
def test_a_file_without_events_is_refused(
    content: bytes | str,
    tmp_path: Path,
    opened: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "junk.jsonl"
    raw = np.random.default_rng(3).bytes(5000) if content == "random" else content
    path.write_bytes(raw)  # type: ignore[arg-type]
    assert main(["replay", str(path)]) == 2
    assert f"{path}: no sentitop event in it" in capsys.readouterr().err and not opened


@pytest.mark.parametrize("speed", ["nan", "inf", "-1"])
def test_a_speed_that_is_no_factor_is_refused(
    speed: str, opened: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(FIXTURE), "--speed", speed]) == 2
    assert "is not a factor" in capsys.readouterr().err and not opened

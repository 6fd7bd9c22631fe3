"""A run whose folder is removed while it trains ends failed, not "ok" with unusable files."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from remote.profile import load_profile
from remote.runner import execute_run
from tests.run.test_resume_run import PROFILE


@pytest.mark.timeout(600)
async def test_a_run_folder_removed_mid_run_is_a_failed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It ended "ok": the ranks wrote model.pt and a summary again, but model.json, vocab.json
    and events.jsonl were gone, so predict and replay refused the run (trial K). Then it
    trained, and billed, to its end before saying so: now it stops when the folder goes."""
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "p.yaml"
    path.write_text(PROFILE + "  balance: {emulate_s: 0.5}\n")  # sleep-based device time
    runs = tmp_path / "runs"
    removed: list[Path] = []
    after: list[str] = []

    def on_event(event: dict[str, Any]) -> None:
        if removed:
            after.append(event["type"])
        elif event["type"] == "checkpoint":  # training is under way
            (folder,) = list(runs.iterdir())
            shutil.rmtree(folder)
            removed.append(folder)

    outcome = await execute_run(load_profile(path), runs_dir=runs, on_event=on_event)
    assert removed, "the run never reached a checkpoint"
    assert outcome.status == "failed"
    assert (
        f"the run folder {removed[0]} was removed while the run went" in outcome.summary["reason"]
    )
    assert "; the run was stopped when that was seen" in outcome.summary["reason"]
    assert "after_training" not in after, after  # stopped, not trained to its end
    assert (removed[0] / "summary.json").is_file()  # where `sentitop runs` finds it


async def test_the_runner_refuses_a_missing_input_before_a_run_folder(tmp_path: Path) -> None:
    """The dashboard starts profiles through execute_run alone: a profile whose data file is
    missing made a run folder that failed at preprocessing (the CLI refused it, exit 2)."""
    from engine.errors import ProfileError

    path = tmp_path / "missing.yaml"
    path.write_text("name: missing\nprovider: local\ndata: {inputs: [no/such/file.jsonl.gz]}\n")
    with pytest.raises(ProfileError, match=r"data.inputs\[0\]: 'no/such/file.jsonl.gz': no such"):
        await execute_run(load_profile(path), runs_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()

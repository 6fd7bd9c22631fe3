"""The planner with a run folder whose events.jsonl lost its `phase` events (truncated)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from remote.profile import load_profile
from remote.review.planner import fit, measure, plan_profile
from remote.runs_store import list_runs
from tests.review.conftest import TINY
from tui.cli import main


def _drop_phases(folder: Path) -> None:
    events = folder / "events.jsonl"
    lines = events.read_text().splitlines()
    events.write_text("".join(f"{x}\n" for x in lines if json.loads(x)["type"] != "phase"))


@pytest.fixture
def runs(make_run: Callable[..., Path], tmp_path: Path) -> Path:
    for name in ("whole", "cut"):
        make_run(name, nproc=2, epoch_s=[6.0, 6.0], sync_s=1.0, steps=20)
    _drop_phases(tmp_path / "runs" / "cut")
    return tmp_path / "runs"


def test_a_run_without_phases_is_left_out_not_the_whole_class(runs: Path) -> None:
    model = fit([measure(r) for r in list_runs(runs)], "local CPU")
    assert model.per_step and model.steps == 20
    assert any("left out 1 run folder(s)" in x and "cut (2 worker(s))" in x for x in model.inputs)
    plan = plan_profile(load_profile(TINY), list_runs(runs), epochs=1)
    assert not plan.target.estimate
    assert "measured on local CPU" in plan.target.basis


def test_plan_says_measured_and_names_the_run_left_out(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", str(TINY), "--runs-dir", str(runs), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["target"]["estimate"] is False
    assert any("left out 1 run folder(s)" in line for line in data["inputs"])


def test_only_runs_without_phases_say_so(make_run: Callable[..., Path], tmp_path: Path) -> None:
    make_run("cut", nproc=2, epoch_s=[6.0], sync_s=1.0)
    _drop_phases(tmp_path / "runs" / "cut")
    plan = plan_profile(load_profile(TINY), list_runs(tmp_path / "runs"), epochs=1)
    assert plan.target.estimate  # 2 workers, no phases: compute and sync cannot be told apart
    assert any("run folders whose events.jsonl lacks them" in x for x in plan.inputs)
    assert any("past runs above not usable" in x for x in plan.inputs)
    assert not any("no past run of this workload" in x for x in plan.inputs)

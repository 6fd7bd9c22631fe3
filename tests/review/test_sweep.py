"""Sweeps: the profiles of strong and weak series, tags on run folders, a real 1+2 process sweep."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.errors import InputError
from remote.profile import load_profile
from remote.review.report import PLOTS, write_report
from remote.runs_store import list_runs, resolve_runs
from remote.sweep import parse_counts, plan_sweep, run_sweep
from tests.review.conftest import TINY


def test_parse_counts() -> None:
    assert parse_counts("4, 1,2,2") == [1, 2, 4]
    for bad in ("", "1,x", "0,2", "-1"):
        with pytest.raises(InputError, match="--nproc"):
            parse_counts(bad)


def test_strong_plan_changes_only_workers_and_epochs() -> None:
    base = load_profile(TINY)
    plan = plan_sweep(base, [1, 2, 4], epochs=1)
    assert plan.mode == "strong" and plan.sweep_id.startswith("sweep-")
    assert [p.train.nproc for p in plan.profiles] == [1, 2, 4]
    assert [p.name for p in plan.profiles] == ["tiny-np1", "tiny-np2", "tiny-np4"]
    for p in plan.profiles:
        assert p.train.epochs == 1 and p.train.batch_size == base.train.batch_size
        assert p.train.max_train_samples is None and p.source == base.source


def test_weak_plan_grows_data_and_batch() -> None:
    base = load_profile(TINY)
    plan = plan_sweep(base, [1, 2, 4], weak=True, per_worker=300)
    assert [p.train.max_train_samples for p in plan.profiles] == [300, 600, 1200]
    assert [p.train.batch_size for p in plan.profiles] == [64, 128, 256]
    with pytest.raises(InputError, match="--weak needs the samples per worker"):
        plan_sweep(base, [1, 2], weak=True)


def test_ec2_sweep_changes_the_instance_count() -> None:
    profile = load_profile("profiles/aws-seed-g3.yaml")  # 4 × g3.4xlarge, 1 GPU each
    plan = plan_sweep(profile, [1, 2, 8])
    assert [p.nodes[0].count for p in plan.profiles] == [1, 2, 8]  # type: ignore[attr-defined]
    assert [p.world_size() for p in plan.profiles] == [1, 2, 8]
    mixed = load_profile("profiles/aws-mixed-g4dn-g5.yaml")
    with pytest.raises(InputError, match="single EC2 node group"):
        plan_sweep(mixed, [1, 2])


@pytest.mark.slow
def test_real_sweep_of_1_and_2_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two real local runs (1 and 2 processes, 256 samples, 1 epoch) → tagged runs → report."""
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    base = load_profile(TINY)
    plan = plan_sweep(base, [1, 2], epochs=1)
    plan.profiles = [
        p.model_copy(update={"train": p.train.model_copy(update={"max_train_samples": 256})})
        for p in plan.profiles
    ]
    outcomes = asyncio.run(run_sweep(plan, runs_dir=tmp_path / "runs"))
    assert [o.status for o in outcomes] == ["ok", "ok"], [o.summary.get("reason") for o in outcomes]
    tags = [json.loads((o.run_dir / "sweep.json").read_text()) for o in outcomes]
    assert [t["workers"] for t in tags] == [1, 2] and {t["sweep"] for t in tags} == {plan.sweep_id}
    runs = resolve_runs([plan.sweep_id], tmp_path / "runs")
    assert [r.workers for r in runs] == [1, 2] and all(r.phases for r in runs)
    assert [r.run_id for r in list_runs(tmp_path / "runs")] == [r.run_id for r in runs]
    report = write_report(runs, tmp_path / "report", deadline_h=1.0)
    assert set(report.plots) == set(PLOTS)
    for path in report.plots.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = report.markdown.read_text()
    assert "local ×1 proc" in text and "local ×2 proc" in text and plan.sweep_id in text


def test_sweep_cli_rejects_bad_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tui.cli import main

    assert main(["sweep", str(TINY), "--nproc", "1,two", "--runs-dir", str(tmp_path)]) == 2
    assert "--nproc '1,two': expected comma-separated integers" in capsys.readouterr().err
    assert main(["sweep", str(TINY), "--nproc", "1,2", "--epochs", "0"]) == 2
    assert main(["sweep", str(TINY), "--nproc", "1,2", "--weak", "--runs-dir", str(tmp_path)]) == 2
    assert "--weak needs the samples per worker" in capsys.readouterr().err
    runs = ["--runs-dir", str(tmp_path)]
    assert main(["sweep", str(TINY), "--nproc", "1000", *runs]) == 2  # past the schema's 256
    assert "train.nproc = 1000: Input should be less than or equal to 256" in (
        capsys.readouterr().err
    )
    assert main(["sweep", str(TINY), "--nproc", "1,2", "--per-worker", "50", *runs]) == 2
    assert "add --weak" in capsys.readouterr().err
    assert main(["sweep", str(TINY), "--nproc", "1,2", "--weak", "--per-worker", "0", *runs]) == 2
    assert "--per-worker 0: expected samples per worker >= 1" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was launched


def test_the_sweep_line_of_a_model_below_the_majority_rate_says_so(
    make_run: Callable[..., Path],
) -> None:
    from types import SimpleNamespace

    from tui.cli.commands.sweep import _status_words

    good = make_run("good", nproc=1, epoch_s=[5.0], sync_s=0.1)
    useless = make_run("useless", nproc=1, epoch_s=[5.0], sync_s=0.1)
    summary = json.loads((useless / "summary.json").read_text())
    summary.update(accuracy=0.812, majority_rate=0.812)
    (useless / "summary.json").write_text(json.dumps(summary))
    assert _status_words(SimpleNamespace(status="ok", run_dir=good)) == "ok"
    assert _status_words(SimpleNamespace(status="ok", run_dir=useless)) == (
        "ok, below majority 0.812"
    )
    gone = SimpleNamespace(status="ok", run_dir=useless.parent / "gone")
    assert _status_words(gone) == "ok"  # unreadable: the runner's word
    assert _status_words(SimpleNamespace(status="failed", run_dir=good)) == "failed"

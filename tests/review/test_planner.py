"""Planner: the scaling model recovers known parameters, states inputs and its error."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from remote.profile import load_profile
from remote.review.planner import compute_units, fit, measure, plan_profile, ring
from remote.runs_store import import_csv, list_runs
from tests.review.conftest import SEED_CSV, TINY
from tui.cli import main

C, STEPS, A1, K = 20.0, 20, 0.01, 0.05  # core-s/epoch, steps/epoch, s/step, s/step/ring


def _epoch(n: int, threads: int = 1) -> float:
    """The generating model on a 4-core machine with ``threads`` per rank."""
    return C / min(4, n * threads) + STEPS * (A1 + K * ring(n))


@pytest.fixture(autouse=True)
def four_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("remote.review.scaling.os.cpu_count", lambda: 4)


def test_compute_units() -> None:
    assert compute_units("ec2", 8) == 8
    assert [compute_units("local", n) for n in (1, 2, 3, 8)] == [4, 4, 3, 4]  # cores // n each
    assert [compute_units("local", n, threads=1) for n in (1, 2, 8)] == [1, 2, 4]


@pytest.fixture
def local_runs(make_run: Callable[..., Path], tmp_path: Path) -> Path:
    for n in (1, 2):
        sync = STEPS * (A1 + K * ring(n))
        make_run(
            f"np{n}",
            nproc=n,
            epoch_s=[_epoch(n)] * 2,
            sync_s=sync,
            steps=STEPS,
            fixed_s=8.0 + 4 * n,
            eval_s=0.5,
        )
    return tmp_path / "runs"


def test_fit_recovers_the_generating_parameters(local_runs: Path) -> None:
    model = fit([measure(r) for r in list_runs(local_runs)], "local CPU")
    assert (model.a1, model.k, model.compute_1) == pytest.approx((A1, K, C))
    assert model.epoch_s(4, units=4) == pytest.approx(_epoch(4))
    assert model.epoch_s(2, units=2, n_train=2000) == pytest.approx(2 * _epoch(2))  # data+steps
    # one run per worker count: the mean of all (12 s and 16 s) stands for every count
    assert model.fixed(2) == pytest.approx(14.0) and model.fixed(3) == pytest.approx(14.0)


def test_plan_of_a_local_profile(local_runs: Path) -> None:
    profile = load_profile(TINY)  # nproc 1, threads 1, 2 epochs, eval every epoch
    assert (profile.train.nproc, profile.train.threads) == (1, 1)
    plan = plan_profile(profile, list_runs(local_runs), epochs=3, deadline_h=1.0)
    assert plan.target.workers == 1 and plan.target.is_target
    assert plan.target.epoch_s == pytest.approx(_epoch(1))
    assert plan.target_wall_s == pytest.approx(14.0 + 3 * _epoch(1) + 3 * 0.5)
    assert plan.wall_parts["preprocessing"] == 0.0  # the dataset of those runs is cached
    labels = {c.label for c in plan.candidates}
    assert {"local ×1 proc", "local ×2 proc"} <= labels
    assert plan.pick is not None and plan.pick.usd == min(c.usd for c in plan.candidates)
    assert any("a1 = 10.00 ms" in line and "k = 50.00 ms" in line for line in plan.inputs)
    assert any("1,000 samples" in line for line in plan.inputs)
    # leave-one-out: with one run left the model cannot see all-reduce → the error shows it
    errors = {(e.run_id, e.what): e for e in plan.errors}
    no_sync = C / 2 + STEPS * A1
    assert errors["np2", "epoch s"].predicted_s == pytest.approx(no_sync)
    assert errors["np2", "epoch s"].error == pytest.approx(no_sync / _epoch(2) - 1)


def test_seed_study_leave_one_out() -> None:
    runs = import_csv(SEED_CSV)
    plan = plan_profile(load_profile("profiles/aws-seed-g3.yaml"), runs, epochs=10, deadline_h=4.0)
    c1 = 35_920 / 10
    k_from_4 = (13_973 / 10 - c1 / 4) / ring(4)
    loo = {e.run_id: e for e in plan.errors}
    assert loo["seed-2xg3.16xlarge"].predicted_s == pytest.approx(c1 / 8 + k_from_4 * ring(8))
    assert loo["seed-2xg3.16xlarge"].actual_s == pytest.approx(953.1)
    assert plan.target.label == "4×g3.4xlarge" and plan.target_wall_s is None
    assert not plan.target.estimate and "measured on M60" in plan.target.basis
    m60 = [c for c in plan.candidates if c.hardware == "M60"]
    assert m60 and any(c.estimate for c in plan.candidates if c.hardware != "M60")
    assert plan.pick is not None and plan.pick.hours <= 4.0


def test_no_runs_is_an_estimate_not_a_refusal() -> None:
    plan = plan_profile(load_profile(TINY), [], epochs=1)
    assert plan.target.estimate and plan.target.band > 1
    assert "development host" in plan.target.basis and plan.target.seconds > 0


def test_plan_cli(local_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(TINY), "--epochs", "2", "--runs-dir", str(local_runs), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["target"]["workers"] == 1 and data["epochs"] == 2
    assert data["prediction_errors"] and data["inputs"]
    (local_runs / "none").mkdir()
    assert main(["plan", str(TINY), "--runs-dir", str(local_runs / "none")]) == 0
    assert "estimate" in capsys.readouterr().out
    assert main(["plan", str(TINY), "--runs-dir", str(local_runs / "typo")]) == 2
    assert f"--runs-dir {local_runs / 'typo'}: no such folder" in capsys.readouterr().err
    assert main(["plan", str(TINY), "--epochs", "0", "--runs-dir", str(local_runs)]) == 2


def test_fixed_overhead_by_count_needs_two_runs(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    for name, n, fixed in (("a", 1, 10.0), ("b", 1, 14.0), ("c", 2, 30.0)):
        make_run(
            name,
            nproc=n,
            epoch_s=[_epoch(n)],
            sync_s=STEPS * (A1 + K * ring(n)),
            steps=STEPS,
            fixed_s=fixed,
        )
    model = fit([measure(r) for r in list_runs(tmp_path / "runs")], "local CPU")
    assert model.fixed(1) == pytest.approx(12.0)  # two runs of 1 process
    assert model.fixed(2) == pytest.approx(18.0)  # one run of 2: the mean of all three

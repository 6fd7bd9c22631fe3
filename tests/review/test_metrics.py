"""Speedup/efficiency (strong, weak, time to threshold), $ for N epochs, Pareto, deadline pick."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remote.review.metrics import (
    ConfigMetrics,
    billed_usd,
    cheapest_within,
    pareto_front,
    series_metrics,
)
from remote.runs_store import load_run


def test_strong_scaling_with_threshold(make_run: Callable[..., Path]) -> None:
    runs = [
        load_run(make_run("a", nproc=1, epoch_s=[10.0, 10.0], sync_s=0.0, tts=30.0)),
        load_run(make_run("b", nproc=2, epoch_s=[8.0, 8.0], sync_s=1.0, tts=20.0)),
    ]
    s = series_metrics(runs, epochs=5)
    one, two = s.configs
    assert s.baseline is one and s.mode == "strong"
    assert (two.speedup, two.efficiency) == pytest.approx((1.25, 0.625))
    assert (two.speedup_tts, two.efficiency_tts) == pytest.approx((1.5, 0.75))
    assert two.hours == pytest.approx(40 / 3600)
    assert two.usd == pytest.approx(billed_usd(40, 0.096))  # 60 s minimum applies
    assert two.usd == pytest.approx(60 * 0.096 / 3600)
    assert two.usd_per_point == pytest.approx(two.usd / 80)


def test_weak_scaling_efficiency(make_run: Callable[..., Path]) -> None:
    runs = [
        load_run(make_run(n, nproc=w, epoch_s=[s], sync_s=0.0, sweep="w", mode="weak"))
        for n, w, s in (("a", 1, 10.0), ("b", 2, 12.5), ("c", 4, 20.0))
    ]
    s = series_metrics(runs)
    assert s.mode == "weak"
    assert [c.efficiency for c in s.configs] == pytest.approx([1.0, 0.8, 0.5])
    assert [c.speedup for c in s.configs] == pytest.approx([1.0, 1.6, 2.0])


def test_a_series_of_one_epoch_runs_says_its_ratios_carry_the_warm_up(
    make_run: Callable[..., Path],
) -> None:
    one = [
        load_run(make_run(n, nproc=w, epoch_s=[s], sync_s=0.0))
        for n, w, s in (("a", 1, 10.0), ("b", 2, 4.2))
    ]
    notes = series_metrics(one).notes
    assert any(n.startswith("one measured epoch only: a, b: a first epoch") for n in notes)
    two = [
        load_run(make_run(n, nproc=w, epoch_s=[s, s], sync_s=0.0))
        for n, w, s in (("c", 1, 10.0), ("d", 2, 6.0))
    ]
    assert not any("one measured epoch" in n for n in series_metrics(two).notes)


def test_repeated_configuration_pools_runs(make_run: Callable[..., Path]) -> None:
    runs = [
        load_run(make_run("a", nproc=1, epoch_s=[9.0, 11.0], sync_s=0.0)),
        load_run(make_run("b", nproc=1, epoch_s=[30.0], sync_s=0.0)),
    ]
    (cfg,) = series_metrics(runs).configs
    assert cfg.epoch_s == 11.0 and len(cfg.runs) == 2  # median of 9, 11, 30


def test_different_workloads_are_not_one_series(make_run: Callable[..., Path]) -> None:
    sentiment = load_run(make_run("a", nproc=1, epoch_s=[9.0, 9.0], sync_s=0.0))
    embeddings = load_run(make_run("e", nproc=1, epoch_s=[1.0], sync_s=0.0))
    embeddings.task = "embeddings"
    with pytest.raises(ValueError, match=r"different workloads \(embeddings: e; sentiment: a\)"):
        series_metrics([sentiment, embeddings])
    other_model = load_run(make_run("b", nproc=2, epoch_s=[5.0, 5.0], sync_s=0.0))
    other_model.workload = other_model.workload + "x"
    assert not series_metrics(
        [sentiment, load_run(make_run("c", nproc=2, epoch_s=[5.0, 5.0], sync_s=0.0))]
    ).notes
    notes = series_metrics([sentiment, other_model]).notes
    assert any("differ in model or sequence settings" in n for n in notes)


def test_no_measured_epoch_is_an_error(make_run: Callable[..., Path]) -> None:
    run = load_run(make_run("a", nproc=1, epoch_s=[], sync_s=0.0, status="failed"))
    with pytest.raises(ValueError, match="no run with measured epochs"):
        series_metrics([run])


def _cfg(hours: float, usd: float) -> ConfigMetrics:
    return ConfigMetrics(
        label=f"{hours}/{usd}",
        workers=1,
        hardware="x",
        usd_per_hour=1.0,
        billing="per_second",
        runs=[],
        epoch_s=1.0,
        time_to_threshold_s=None,
        samples_per_s=None,
        accuracy=None,
        mode="strong",
        hours=hours,
        usd=usd,
    )


points = st.lists(st.tuples(st.floats(0.1, 100), st.floats(0.1, 100)), min_size=1, max_size=12)


@settings(deadline=None, max_examples=200)
@given(points, st.floats(0.1, 120))
def test_pareto_front_and_pick(pts: list[tuple[float, float]], deadline: float) -> None:
    cfgs = [_cfg(h, u) for h, u in pts]
    front = pareto_front(cfgs)

    def dominates(a: ConfigMetrics, b: ConfigMetrics) -> bool:
        return a.hours <= b.hours and a.usd <= b.usd and (a.hours < b.hours or a.usd < b.usd)

    assert front and all(not dominates(o, f) for f in front for o in cfgs)
    assert all(c in front or any(dominates(f, c) for f in front) for c in cfgs)
    pick = cheapest_within(cfgs, deadline)
    meeting = [c for c in cfgs if c.hours <= deadline]
    if not meeting:
        assert pick is None
    else:
        assert pick is not None and pick.hours <= deadline
        assert pick.usd == min(c.usd for c in meeting)
        assert pick in front or any(f.usd == pick.usd and f.hours <= pick.hours for f in front)
    assert not math.isnan(front[0].hours)


def test_a_straggled_an_unpriced_or_an_imported_run_is_said_apart(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    """A trial's report put a `train --straggle 1:3` run (no price) in "local ×2 proc" beside a
    priced baseline at $0.00 and made it the frontier; CSV rows of another workload were ranked
    against a local run with no word that they may be other jobs."""
    from remote.runs_store import import_csv

    base = load_run(make_run("base", nproc=1, epoch_s=[10.0, 10.0], sync_s=0.0))
    straggled = load_run(make_run("slow", nproc=2, epoch_s=[6.0, 6.0], sync_s=0.0,
                                  usd_per_hour=0.0,
                                  summary_extra={"balance": {"straggle": {"1": 3.0}}}))  # fmt: skip
    assert straggled.label == "local ×2 proc, straggle 1:3"  # a configuration of its own
    notes = series_metrics([base, straggled]).notes
    assert any(n.startswith("no price: slow (") for n in notes)
    assert not any("CSV" in n for n in notes)
    csv = tmp_path / "g5.csv"
    csv.write_text("run,instance_type,count,epochs,seconds,accuracy\na1,g5.xlarge,1,10,3600,0.9\n")
    mixed = series_metrics([*import_csv(csv), base]).notes
    assert any(n.startswith("the runs mix imported CSV rows with run folders") for n in mixed)
    assert not any(n.startswith("no price") for n in series_metrics([base]).notes)


def test_runs_on_different_amounts_of_data_are_not_one_series(
    make_run: Callable[..., Path],
) -> None:
    """A run on 3.7× fewer reviews read as a 2.89× speedup from 2 processes, "super-linear,
    probably machine load", and took the frontier: epoch times measure the data too."""
    from remote.review.views import cost_speed_data

    small = load_run(make_run("small", nproc=2, epoch_s=[3.0, 3.0], sync_s=0.0))
    big = load_run(make_run("big", nproc=1, epoch_s=[17.0, 17.0], sync_s=0.0))
    same = load_run(make_run("same", nproc=2, epoch_s=[9.0, 9.0], sync_s=0.0))
    small.n_train, big.n_train, same.n_train = 13_824, 51_200, 51_200
    with pytest.raises(ValueError, match=r"training samples 13,824: small; 51,200: big, same"):
        series_metrics([small, big, same])
    assert series_metrics([big, same]).configs[1].speedup == pytest.approx(17 / 9)
    view = cost_speed_data([small, big])
    assert not view.points and "different amounts of data" in view.message
    weak = [load_run(make_run(n, nproc=w, epoch_s=[10.0], sync_s=0.0, sweep="w", mode="weak"))
            for n, w in (("w1", 1), ("w2", 2))]  # fmt: skip
    weak[0].n_train, weak[1].n_train = 1_000, 2_000  # weak scaling grows the data on purpose
    assert series_metrics(weak).mode == "weak"


def test_epochs_a_train_resume_split_are_said_to_be_left_out(
    make_run: Callable[..., Path],
) -> None:
    one = load_run(make_run("one", nproc=1, epoch_s=[10.0], sync_s=0.0))
    two = load_run(make_run("two", nproc=2, epoch_s=[6.0, 6.0], sync_s=0.0))
    one.epochs_left_out = 1
    notes = series_metrics([one, two]).notes
    assert "one: left out of its configuration's epoch time: 1 epoch(s) split by a " in " ".join(
        notes
    )


def test_a_threshold_speedup_past_the_threads_ideal_is_flagged_and_explained(
    make_run: Callable[..., Path],
) -> None:
    """A sweep's 1 process of 2 threads against 2 of 1 thread: by time to threshold 2.65x (its
    slow first epoch), efficiency 1.33 by workers with no flag, while the note said the ideal
    was 1; and the report never said what the threshold was."""
    from remote.review.report import render_markdown

    one = load_run(make_run("one", nproc=1, epoch_s=[9.07, 1.86], sync_s=0.0, tts=12.1, threads=2))
    two = load_run(make_run("two", nproc=2, epoch_s=[2.0, 1.93], sync_s=0.0, tts=4.58, threads=1))
    series = series_metrics([one, two])
    cfg = series.configs[1]
    assert cfg.efficiency_tts == pytest.approx(12.1 / 4.58) and cfg.untrusted_tts
    assert cfg.efficiency == pytest.approx(cfg.speedup)  # the ideal of 2 threads in all: 1
    text = render_markdown(series, None, None)
    assert "the ideal speedup is 1, not 2; its efficiency is measured against that ideal" in text
    assert "smoothed train loss first fell below 0.2 (the runs' `loss_threshold`)" in text

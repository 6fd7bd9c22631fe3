"""The old study's published table and figures, reproduced from its entered runs (issue 7)."""

from __future__ import annotations

import pytest

from remote.review.metrics import billed_usd, cheapest_within, pareto_front, series_metrics
from remote.runs_store import import_csv
from tests.review.conftest import SEED_CSV

PUBLISHED_TABLE = {  # configuration: (seconds for 10 epochs, $) as published
    "1×g3.4xlarge": (35_920, "11.38"),
    "4×g3.4xlarge": (13_973, "17.69"),
    "2×g3.16xlarge": (9_531, "24.17"),
}


@pytest.fixture(scope="module")
def series():  # type: ignore[no-untyped-def]
    return series_metrics(import_csv(SEED_CSV), epochs=10)


def test_cost_table_to_the_cent(series) -> None:  # type: ignore[no-untyped-def]
    table = {c.label: (round(c.epoch_s * 10), f"{c.usd:.2f}") for c in series.configs}
    assert table == PUBLISHED_TABLE
    # every row's own published cost agrees with the computed one (no mismatch notes)
    assert all(not c.notes for c in series.configs)
    assert [c.published_usd for c in series.configs] == [11.38, 17.69, 24.17]


def test_published_hours_speedup_and_efficiency(series) -> None:  # type: ignore[no-untyped-def]
    by = {c.workers: c for c in series.configs}
    assert series.baseline.workers == 1
    assert f"{by[1].hours:.2f}" == "9.98"
    assert f"{by[8].hours:.2f}" == "2.65"
    assert (f"{by[4].speedup:.2f}", f"{by[4].efficiency:.2f}") == ("2.57", "0.64")
    assert f"{by[8].speedup:.2f}" == "3.77"
    assert f"{by[8].efficiency:.2f}" == "0.47"  # derived, not published


def test_study_priced_rounded_hours_not_seconds() -> None:
    """Per-second billing of the same seconds misses the published cents: billing matters."""
    per_second = [
        f"{billed_usd(s, rate):.2f}" for s, rate in ((35_920, 1.14), (13_973, 4.56), (9_531, 9.12))
    ]
    assert per_second == ["11.37", "17.70", "24.15"]
    assert f"{billed_usd(35_920, 1.14, 'hours_2dp'):.2f}" == "11.38"


def test_pareto_and_deadline_pick(series) -> None:  # type: ignore[no-untyped-def]
    # each configuration is faster but dearer than the one before: all on the frontier
    assert [c.workers for c in pareto_front(series.configs)] == [8, 4, 1]
    assert cheapest_within(series.configs, 4.0).label == "4×g3.4xlarge"
    assert cheapest_within(series.configs, 3.0).label == "2×g3.16xlarge"
    assert cheapest_within(series.configs, 12.0).label == "1×g3.4xlarge"
    assert cheapest_within(series.configs, 2.0) is None


def test_other_epoch_counts_scale_the_table(series) -> None:  # type: ignore[no-untyped-def]
    twenty = series_metrics(import_csv(SEED_CSV), epochs=20)
    for a, b in zip(series.configs, twenty.configs, strict=True):
        assert b.hours == pytest.approx(round(2 * a.epoch_s * 10 / 3600, 2))
        assert b.speedup == pytest.approx(a.speedup)

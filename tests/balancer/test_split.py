"""Property-based tests of the balancer's split arithmetic (shares, batch sizes, coverage)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.balance.balancer import (
    apportion,
    ideal_epoch_seconds,
    shares_from_speed,
    smooth,
    split,
)
from engine.errors import ConfigError

speeds = st.floats(min_value=1e-5, max_value=1.0, allow_nan=False, allow_infinity=False)


@st.composite
def split_cases(draw: st.DrawFn) -> tuple[int, int, int, list[float]]:
    world = draw(st.integers(1, 8))
    batch = draw(st.integers(world, 300))
    n = draw(st.integers(world, 5000))
    sps = draw(st.lists(speeds, min_size=world, max_size=world))
    start = draw(st.integers(0, 1000))
    return start, n, batch, sps


@settings(deadline=None)  # the shared CI machine is noisy
@given(
    total=st.integers(0, 10_000),
    weights=st.lists(st.floats(1e-6, 1e6), min_size=1, max_size=10),
    minimum=st.integers(0, 3),
)
def test_apportion_sums_exactly_and_respects_the_minimum(
    total: int, weights: list[float], minimum: int
) -> None:
    if total < minimum * len(weights):
        with pytest.raises(ConfigError):
            apportion(total, weights, minimum)
        return
    parts = apportion(total, weights, minimum)
    assert sum(parts) == total
    assert all(p >= minimum for p in parts)
    quotas = [total * w / math.fsum(weights) for w in weights]
    if all(q >= minimum for q in quotas):  # nothing pinned: plain largest remainder
        assert all(abs(p - q) < 1 + 1e-9 for p, q in zip(parts, quotas, strict=True))


@settings(deadline=None)  # the shared CI machine is noisy
@given(
    sps=st.lists(speeds, min_size=1, max_size=10),
    min_share=st.floats(0.001, 0.3),
)
def test_shares_sum_to_one_respect_min_share_and_follow_speed(
    sps: list[float], min_share: float
) -> None:
    shares = shares_from_speed(sps, min_share)
    assert math.isclose(math.fsum(shares), 1.0, abs_tol=1e-9)
    floor = min(min_share, 1.0 / len(sps))
    assert all(s >= floor - 1e-12 for s in shares)
    # a faster rank never gets a smaller share; unpinned shares are ∝ speed
    for i in range(len(sps)):
        for j in range(len(sps)):
            if sps[i] < sps[j]:
                assert shares[i] >= shares[j] - 1e-12
            if min(shares[i], shares[j]) > floor + 1e-9:
                assert math.isclose(shares[i] * sps[i], shares[j] * sps[j], rel_tol=1e-9)


@settings(deadline=None)  # the shared CI machine is noisy
@given(case=split_cases())
def test_split_covers_every_sample_once_with_equal_steps(
    case: tuple[int, int, int, list[float]],
) -> None:
    start, n, batch, sps = case
    world = len(sps)
    plan = split(start, n, batch, shares_from_speed(sps, 0.0))
    assert sum(plan.batch_sizes) == batch
    assert all(b >= 1 for b in plan.batch_sizes)
    assert sum(plan.counts) == n
    assert plan.steps in (n // batch, math.ceil(n / batch))
    seen: list[int] = []
    for rank in range(world):
        local = [plan.local_range(rank, s) for s in range(plan.steps)]
        assert len(local) == plan.steps  # the same iteration count on every rank
        assert all(hi - lo >= 1 for lo, hi in local)  # nobody idles at the all-reduce
        for lo, hi in local:
            seen.extend(range(lo, hi))
    assert sorted(seen) == list(range(start, start + n))  # none lost, none repeated
    for s in range(plan.steps):
        sizes = [plan.local_size(r, s) for r in range(world)]
        assert sum(sizes) == plan.step_global(s)
        assert math.isclose(sum(plan.loss_scale(r, s) for r in range(world)), world)
        if s < plan.steps - 1:
            assert plan.step_global(s) == batch  # the global batch stays constant


@settings(deadline=None)  # the shared CI machine is noisy
@given(case=split_cases())
def test_batch_sizes_are_proportional_to_speed(case: tuple[int, int, int, list[float]]) -> None:
    _, n, batch, sps = case
    shares = shares_from_speed(sps, 0.0)
    plan = split(0, n, batch, shares)
    quotas = [batch * share for share in shares]
    for b, quota in zip(plan.batch_sizes, quotas, strict=True):
        if min(quotas) >= 1:
            assert abs(b - quota) < 1 + 1e-9
        elif quota < 1:
            assert b == 1  # pinned at the one-sample minimum
        else:
            assert b < quota + 1 + 1e-9  # the others give up what the pinned ones took


@settings(deadline=None)  # the shared CI machine is noisy
@given(case=split_cases())
def test_balanced_prediction_is_near_ideal_and_never_worse_than_equal(
    case: tuple[int, int, int, list[float]],
) -> None:
    _, n, batch, sps = case
    world = len(sps)
    balanced = split(0, n, batch, shares_from_speed(sps, 0.0))
    equal = split(0, n, batch, [1.0] * world)
    ideal = ideal_epoch_seconds(n, sps)
    t_bal = balanced.predict_seconds(sps)
    assert t_bal >= ideal * (1 - 1e-9)
    # rounding costs at most one extra sample of the slowest rank per step
    rate = math.fsum(1 / s for s in sps)
    bound = balanced.steps * (batch / rate + max(sps)) + max(sps) * world
    assert t_bal <= bound * (1 + 1e-9)
    if batch >= 10 * world and n >= 10 * batch:
        # compare with the equal split's one-sample-per-rank rounding slack
        assert t_bal <= equal.predict_seconds(sps) + balanced.steps * max(sps) * (1 + 1e-9)


def test_remainder_smaller_than_world_is_folded_into_the_last_step() -> None:
    plan = split(0, 2 * 10 + 2, 10, [1.0, 1.0, 1.0, 1.0])  # 2 full steps, remainder 2 < W=4
    assert plan.steps == 2
    assert plan.step_global(0) == 10
    assert plan.step_global(1) == 12
    assert sum(plan.counts) == 22


def test_split_rejects_batches_smaller_than_the_world() -> None:
    with pytest.raises(ConfigError, match="batch_size = 2"):
        split(0, 100, 2, [1.0, 1.0, 1.0])
    with pytest.raises(ConfigError, match="2 training samples"):
        split(0, 2, 10, [1.0, 1.0, 1.0])


def test_smooth_is_an_ema_of_the_newest_weight() -> None:
    assert smooth(None, [2.0, 4.0], 0.25) == [2.0, 4.0]
    assert smooth([2.0, 4.0], [6.0, 0.0], 0.25) == [3.0, 3.0]

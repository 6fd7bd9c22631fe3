"""Balancer state: rebalancing cadence, hysteresis, chunked epochs, events and advice."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.balance.balancer import (
    Balancer,
    SplitPlan,
    advise,
    describe_balance_event,
    shares_from_speed,
)
from engine.config import BalanceConfig
from engine.events import encode_event, make_event


def _balancer(world: int = 2, n: int = 1000, batch: int = 100, **cfg: object) -> Balancer:
    config = BalanceConfig(enabled=True, **cfg)  # type: ignore[arg-type]
    return Balancer(config=config, world=world, global_batch=batch, n=n)


def _epoch_plans(bal: Balancer) -> list[SplitPlan]:
    plans, pos = [], 0
    while pos < bal.n:
        plan = bal.plan(pos)
        plans.append(plan)
        pos += plan.n
    return plans


def test_shares_move_to_the_speed_ratio_after_one_epoch() -> None:
    bal = _balancer(smoothing=1.0)
    assert bal.shares == [0.5, 0.5]
    bal.observe([1e-3, 1.8e-3])
    assert bal.end_chunk(epoch_end=True)
    assert bal.shares[0] / bal.shares[1] == pytest.approx(1.8)
    assert bal.plan().batch_sizes == (64, 36)


def test_disabled_balancer_keeps_equal_shares_but_still_measures() -> None:
    bal = Balancer(config=BalanceConfig(enabled=False), world=2, global_batch=100, n=1000)
    bal.observe([1e-3, 3e-3])
    assert not bal.end_chunk(epoch_end=True)
    assert bal.plan().batch_sizes == (50, 50)
    assert bal.predicted_epoch_s() == pytest.approx(10 * 50 * 3e-3)


def test_rebalance_every_x_epochs() -> None:
    bal = _balancer(every_epochs=3, smoothing=1.0)
    moved = []
    for epoch in range(6):
        bal.observe([1e-3, (2 + epoch) * 1e-3])
        moved.append(bal.end_chunk(epoch_end=True))
    assert moved == [False, False, True, False, False, True]


@settings(deadline=None)  # the shared CI machine is noisy
@given(
    n=st.integers(2, 3000),
    batch=st.integers(2, 64),
    k=st.integers(1, 5),
    measurements=st.lists(st.floats(1e-4, 1e-2), min_size=10, max_size=10),
)
def test_chunked_epoch_tiles_the_permutation_while_shares_move(
    n: int, batch: int, k: int, measurements: list[float]
) -> None:
    bal = _balancer(n=n, batch=batch, every_steps=k, smoothing=1.0, hysteresis=0.0)
    seen: list[int] = []
    steps = 0
    pos = 0
    i = 0
    while pos < n:
        plan = bal.plan(pos)
        assert plan.start == pos
        for s in range(plan.steps):
            for rank in range(2):
                lo, hi = plan.local_range(rank, s)
                seen.extend(range(lo, hi))
        steps += plan.steps
        pos += plan.n
        if pos < n:
            assert plan.steps == k  # every chunk but the last has exactly K steps
        bal.observe([1e-3, measurements[i % len(measurements)]])
        bal.end_chunk(epoch_end=pos >= n)
        i += 1
    assert sorted(seen) == list(range(n))
    assert steps in (n // batch, math.ceil(n / batch))


@settings(deadline=None)  # the shared CI machine is noisy
@given(
    truth=st.lists(st.floats(1e-4, 1e-2), min_size=2, max_size=6),
    noise=st.lists(st.lists(st.floats(-1.0, 1.0), min_size=6, max_size=6), min_size=2, max_size=20),
    hysteresis=st.floats(0.01, 0.2),
    smoothing=st.floats(0.1, 1.0),
)
def test_hysteresis_prevents_oscillation_under_bounded_noise(
    truth: list[float], noise: list[list[float]], hysteresis: float, smoothing: float
) -> None:
    # Noise of relative size delta moves any share by at most b = 2 delta / (1 - delta) of
    # itself; two targets within b of the truth differ by at most 2b / (1 - b) of each other,
    # less than the hysteresis, so after the first rebalance the shares must stay put.
    bound = hysteresis / (2 + hysteresis) * 0.99
    delta = bound / (2 + bound)
    bal = _balancer(
        world=len(truth),
        n=5000,
        batch=200,
        smoothing=smoothing,
        hysteresis=hysteresis,
        min_share=0.001,
    )
    moves = 0
    for window in noise:
        bal.observe([t * (1 + delta * e) for t, e in zip(truth, window, strict=False)])
        moves += bal.end_chunk(epoch_end=True)
    assert moves <= 1


def test_without_hysteresis_noise_makes_shares_oscillate() -> None:
    # the counterpart of the property above: the same kind of noise, hysteresis 0
    bal = _balancer(smoothing=1.0, hysteresis=0.0)
    moves = 0
    for epoch in range(10):
        jitter = 1.01 if epoch % 2 else 0.99
        bal.observe([1e-3, 1.8e-3 * jitter])
        moves += bal.end_chunk(epoch_end=True)
    assert moves == 10
    bal = _balancer(smoothing=1.0, hysteresis=0.02)
    moves = 0
    for epoch in range(10):
        jitter = 1.01 if epoch % 2 else 0.99
        bal.observe([1e-3, 1.8e-3 * jitter])
        moves += bal.end_chunk(epoch_end=True)
    assert moves == 1


def _step_time_imbalance(bal: Balancer, overhead: float, per_sample: list[float]) -> float:
    times = [overhead + p * b for p, b in zip(per_sample, bal.plan().batch_sizes, strict=True)]
    return max(times) / min(times)


def test_balancing_converges_when_seconds_per_sample_depend_on_batch() -> None:
    # a per-step fixed cost makes sec/sample grow as a rank's batch shrinks; the update
    # (share ∝ current rate) still converges to equal step times, and restarting the
    # smoothing after each move (old windows ran other batch sizes) makes it converge faster.
    overhead, per_sample = 0.06, [1e-3, 1.8e-3]
    imbalance = {}
    for restart in (True, False):
        bal = _balancer(n=25_600, batch=256, smoothing=0.5, hysteresis=0.002)
        for _ in range(3):
            b = bal.plan().batch_sizes
            bal.fresh = bal.fresh and restart
            bal.observe([(overhead + p * bi) / bi for p, bi in zip(per_sample, b, strict=True)])
            bal.end_chunk(epoch_end=True)
        imbalance[restart] = _step_time_imbalance(bal, overhead, per_sample)
    assert imbalance[True] < 1.04
    assert imbalance[False] > imbalance[True] + 0.02


def test_min_share_holds_for_a_very_slow_rank() -> None:
    bal = _balancer(world=3, smoothing=1.0, min_share=0.1)
    bal.observe([1e-3, 1e-3, 1.0])
    bal.end_chunk(epoch_end=True)
    assert bal.shares[2] == pytest.approx(0.1)
    assert bal.plan().batch_sizes == (45, 45, 10)


def test_balance_event_fields_are_json_lines() -> None:
    bal = _balancer(smoothing=1.0)
    assert bal.event_fields(bal.plan())["predicted_epoch_s"] is None
    bal.observe([1e-3, 2e-3], per_step_s=0.01)
    bal.end_chunk(epoch_end=True)
    fields = bal.event_fields(bal.plan())
    line = encode_event(make_event("balance", epoch=1, step=0, **fields))
    event = json.loads(line)
    assert event["batch_sizes"] == [67, 33]
    assert sum(event["counts"]) == 1000
    assert math.isclose(sum(event["shares"]), 1.0, abs_tol=1e-5)
    # 10 steps, each max(67 * 1e-3, 33 * 2e-3) + 0.01 s
    assert event["predicted_epoch_s"] == pytest.approx(10 * (0.067 + 0.01))
    assert event["ideal_epoch_s"] == pytest.approx(1000 / 1500)


def test_advice_keeps_a_useful_rank_but_notes_it_costs_more() -> None:
    advice = advise([1e-3, 3e-3], n=1000, global_batch=100, allreduce_s=0.0)
    assert advice is not None
    assert advice.drop_rank == 1
    assert advice.epoch_s_with == pytest.approx(0.75)
    assert advice.epoch_s_without == pytest.approx(1.0)
    assert not advice.faster
    assert advice.cheaper  # 2 ranks x 0.75 s > 1 rank x 1.0 s
    assert advice.message.startswith("dropping rank 1 would be 33% cheaper but 33% slower")


def test_advice_of_a_run_without_balancing_compares_the_epoch_it_trained() -> None:
    """A trial's `train --straggle 1:3` without --balance measured 3.25 s an epoch; the advice
    said dropping rank 1 would be slower, "1.59 s → 1.74 s", against a balanced epoch the run
    never trained. Equal shares: each step waits for the 3x slower rank."""
    equal = advise([1e-3, 3e-3], n=1000, global_batch=100, allreduce_s=0.0, balanced=False)
    assert equal is not None
    assert equal.epoch_s_with == pytest.approx(10 * 50 * 3e-3)  # 1.5 s: as it trained
    assert equal.epoch_s_without == pytest.approx(1.0)
    assert equal.faster and equal.cheaper
    assert equal.message.startswith("drop rank 1: 33% faster and 67% cheaper (1.50 s → 1.00 s")
    assert equal.message.endswith("with --balance every rank would take 0.75 s per epoch")


def test_advice_drops_a_slow_rank_when_all_reduce_eats_its_gain() -> None:
    advice = advise(
        [1e-3, 3e-3], n=1000, global_batch=100, allreduce_s=0.05, usd_per_hour=[1.0, 0.5]
    )
    assert advice is not None
    assert advice.epoch_s_with == pytest.approx(0.75 + 10 * 0.05)
    assert advice.epoch_s_without == pytest.approx(1.0)  # one rank: no all-reduce
    assert advice.faster and advice.cheaper
    assert advice.unit == "usd"
    assert advice.cost_with == pytest.approx(1.25 / 3600 * 1.5)
    assert advice.message.startswith("drop rank 1: 20% faster and 47% cheaper")
    assert "$" in advice.message


def test_advice_keeps_equal_ranks() -> None:
    advice = advise([1e-3, 1e-3], n=1000, global_batch=100, allreduce_s=0.0)
    assert advice is not None
    assert not advice.faster and not advice.cheaper
    assert advice.message.startswith("keep rank 1")
    priced = advise(
        [1e-3, 1e-3], n=1000, global_batch=100, allreduce_s=0.0, usd_per_hour=[1.0, 3.0]
    )
    assert priced is not None and not priced.faster and priced.cheaper
    assert advise([1e-3], n=1000, global_batch=100, allreduce_s=0.0) is None


def test_balancer_advice_uses_the_smoothed_measurements() -> None:
    bal = _balancer(smoothing=1.0)
    assert bal.advice() is None
    bal.observe([1e-3, 3e-3], per_step_s=0.06, allreduce_s=0.05)
    advice = bal.advice()
    assert advice is not None and advice.faster
    assert advice.as_dict()["drop_rank"] == 1
    assert shares_from_speed([1e-3, 3e-3], 0.0) == pytest.approx([0.75, 0.25])


def test_balance_events_read_as_one_terminal_line() -> None:
    bal = _balancer(smoothing=1.0)
    first = describe_balance_event({"epoch": 0, "step": 0, **bal.event_fields(bal.plan())})
    assert first == "balance epoch 1 step 0: shares 0.500/0.500  batch 50/50"
    bal.observe([1e-3, 2e-3])
    bal.end_chunk(epoch_end=True)
    line = describe_balance_event({"epoch": 1, "step": 0, **bal.event_fields(bal.plan())})
    assert "shares 0.667/0.333  batch 67/33  ms/sample 1/2  predicted epoch 0.7 s" in line

"""BalanceHooks without processes: plans, measurement windows, straggler sleep, state."""

from __future__ import annotations

import time
from typing import Any

import pytest

pytest.importorskip("torch")

from engine.balance.balancer import advise_from_summary
from engine.balance.hooks import BalanceHooks, make_train_hooks
from engine.config import BalanceConfig, TrainConfig
from engine.events import Emitter
from engine.sentiment.hooks import HookContext, StepTiming, TrainHooks


class ListSink:
    """Keeps events in memory."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def write(self, event: Any) -> None:
        self.events.append(dict(event))

    def close(self) -> None:
        pass


def _hooks(balance: BalanceConfig, rank: int = 0) -> tuple[BalanceHooks, ListSink]:
    cfg = TrainConfig(data_dir="d", run_dir="r", batch_size=100, balance=balance)
    sink = ListSink()
    hooks = BalanceHooks(balance)
    hooks.setup(
        HookContext(
            cfg=cfg, rank=rank, world=2, num_samples=1000, global_batch=100, emitter=Emitter(sink)
        )
    )
    return hooks, sink


def _window(samples: float, compute: float, forward: float = 0.0) -> dict[str, float]:
    return {
        "samples": samples,
        "compute": compute,
        "forward": forward or compute / 3,
        "allreduce_opt": 0.5,
        "data": 0.1,
    }


def test_hooks_plan_measure_rebalance_and_emit() -> None:
    hooks, sink = _hooks(BalanceConfig(enabled=True, smoothing=1.0))
    plan = hooks.next_plan(0, 0)
    assert plan.steps == 10 and plan.local_range(1, 0) == (50, 100)  # step-major
    hooks.end_plan(0, plan, [_window(500, 1.0), _window(500, 2.0)])
    plan = hooks.next_plan(1, 0)
    assert plan.batch_sizes == (67, 33)
    balance = [e for e in sink.events if e["type"] == "balance"]
    assert [e["epoch"] for e in balance] == [0, 1]
    assert balance[1]["measured"] == [pytest.approx(0.002), pytest.approx(0.004)]
    assert balance[1]["rebalances"] == 1
    summary = hooks.summary()["balance"]
    assert summary["advice"]["drop_rank"] == 1
    assert summary["allreduce_s_per_step"] == pytest.approx(0.05)  # 0.5 s over 10 steps


def test_forward_only_measurement_uses_the_forward_seconds() -> None:
    hooks, _ = _hooks(BalanceConfig(enabled=True, smoothing=1.0, measure="forward"))
    plan = hooks.next_plan(0, 0)
    hooks.end_plan(0, plan, [_window(500, 1.0, forward=0.6), _window(500, 1.0, forward=0.2)])
    assert hooks.next_plan(1, 0).batch_sizes == (25, 75)


def test_only_rank_zero_emits_events() -> None:
    hooks, sink = _hooks(BalanceConfig(enabled=True), rank=1)
    hooks.next_plan(0, 0)
    assert sink.events == []


def test_straggler_sleeps_factor_minus_one_times_compute() -> None:
    hooks, _ = _hooks(BalanceConfig(straggle={0: 3.0}))
    timing = StepTiming(epoch=0, step=0, samples=10, forward=0.01, backward=0.02)
    t0 = time.perf_counter()
    hooks.after_compute(timing)
    assert time.perf_counter() - t0 >= 0.06
    other, _ = _hooks(BalanceConfig(straggle={0: 3.0}), rank=1)
    t0 = time.perf_counter()
    other.after_compute(timing)
    assert time.perf_counter() - t0 < 0.03


def test_state_round_trips_through_a_checkpoint() -> None:
    hooks, _ = _hooks(BalanceConfig(enabled=True, smoothing=1.0))
    plan = hooks.next_plan(0, 0)
    hooks.end_plan(0, plan, [_window(500, 1.0), _window(500, 3.0)])
    state = hooks.state_dict()
    restored = BalanceHooks(BalanceConfig(enabled=True, smoothing=1.0))
    restored.load_state_dict(state)  # the trainer may restore before or after setup
    cfg = TrainConfig(data_dir="d", run_dir="r", batch_size=100)
    restored.setup(
        HookContext(cfg=cfg, rank=0, world=2, num_samples=1000, global_batch=100, emitter=Emitter())
    )
    assert restored.next_plan(1, 0) == hooks.next_plan(1, 0)
    assert restored.state_dict() == state


def test_make_train_hooks_picks_the_balancer_only_when_needed() -> None:
    plain = TrainConfig(data_dir="d", run_dir="r")
    assert type(make_train_hooks(plain)) is TrainHooks
    assert plain.sync_mode == "overlap"
    balanced = TrainConfig(data_dir="d", run_dir="r", balance=BalanceConfig(enabled=True))
    assert isinstance(make_train_hooks(balanced), BalanceHooks)
    assert balanced.sync_mode == "separate"  # pure compute timing needs a separate all-reduce
    assert balanced.grad_sync == "auto"  # the config itself is left as it was built


def test_summary_advice_can_be_repriced_on_the_operator_side() -> None:
    hooks, _ = _hooks(BalanceConfig(enabled=True, smoothing=1.0, every_steps=2))
    plan = hooks.next_plan(0, 0)
    windows = [_window(100, 0.2), _window(100, 0.6)]
    for w in windows:
        w["allreduce_opt"] = 0.002  # a cheap all-reduce: the slow rank still helps
    hooks.end_plan(0, plan, windows)
    block = hooks.summary()["balance"]
    assert sum(block["counts"]) == 1000  # the whole epoch, not the 2-step chunk
    same = advise_from_summary(block)
    assert same is not None and same.as_dict() == block["advice"]
    priced = advise_from_summary(block, usd_per_hour=[3.0, 0.1])
    assert priced is not None and priced.unit == "usd"
    assert priced.epoch_s_with == pytest.approx(same.epoch_s_with)
    assert not priced.faster and not priced.cheaper  # the slow rank costs almost nothing
    assert same.cheaper  # ...while in rank-hours one rank alone is cheaper


def test_the_trainer_sampler_follows_a_balancer_plan_exactly() -> None:
    from engine.balance.balancer import split
    from engine.sentiment.data import PlanSampler

    plan = split(0, 1003, 100, [0.7, 0.3])  # 10 steps + a short last step
    samplers = [PlanSampler(1003, seed=3, rank=r) for r in range(2)]
    for s in samplers:
        s.set_epoch(1)
        s.add_plan(plan)
    seen = []
    for step in range(plan.steps):
        for rank, s in enumerate(samplers):
            assert s.loss_scale(step) == pytest.approx(plan.loss_scale(rank, step))
            seen.extend(s.indices(step).tolist())
    assert sorted(seen) == list(range(1003))  # every sample of the epoch exactly once

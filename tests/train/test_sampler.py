"""Plans and the sampler: determinism, disjoint + complete coverage, exact loss weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import DatasetError
from engine.sentiment.data import EpochPlan, PlanSampler, epoch_permutation, even_plan


def _epoch_indices(sampler_for_rank: list[PlanSampler]) -> list[np.ndarray]:
    per_rank = []
    for s in sampler_for_rank:
        per_rank.append(np.concatenate([s.indices(step) for step in range(s.steps)]))
    return per_rank


def _samplers(n: int, plans: list[EpochPlan], epoch: int, seed: int = 3) -> list[PlanSampler]:
    out = []
    for rank in range(plans[0].world):
        s = PlanSampler(n, seed=seed, rank=rank)
        s.set_epoch(epoch)
        for plan in plans:
            s.add_plan(plan)
        out.append(s)
    return out


def test_order_depends_only_on_seed_and_epoch() -> None:
    a = epoch_permutation(1000, seed=1, epoch=2)
    assert np.array_equal(a, epoch_permutation(1000, seed=1, epoch=2))
    assert not np.array_equal(a, epoch_permutation(1000, seed=1, epoch=3))
    assert not np.array_equal(a, epoch_permutation(1000, seed=2, epoch=2))


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 3000), world=st.integers(1, 8), batch=st.integers(1, 600))
def test_even_plan_covers_every_sample_once_with_equal_steps(
    n: int, world: int, batch: int
) -> None:
    if n < world:
        with pytest.raises(DatasetError):
            even_plan(n, world, batch)
        return
    plan = even_plan(n, world, batch)
    samplers = _samplers(n, [plan], epoch=0)
    steps = {s.steps for s in samplers}
    assert len(steps) == 1  # every rank meets every all-reduce
    got = np.concatenate(_epoch_indices(samplers))
    assert np.array_equal(np.sort(got), np.arange(n))  # disjoint and complete
    for step in range(plan.steps):
        sizes = [plan.local_size(r, step) for r in range(world)]
        assert min(sizes) >= 1 and max(sizes) <= max(plan.batch_sizes)
        assert max(sizes) - min(sizes) <= 1


def test_unequal_counts_and_batches() -> None:
    plan = EpochPlan(counts=(600, 300, 100), batch_sizes=(60, 30, 10))
    samplers = _samplers(1000, [plan], epoch=4)
    per_rank = _epoch_indices(samplers)
    assert [len(x) for x in per_rank] == [600, 300, 100]
    assert np.array_equal(np.sort(np.concatenate(per_rank)), np.arange(1000))
    assert {s.steps for s in samplers} == {10}
    for step in range(10):
        scales = [s.loss_scale(step) for s in samplers]
        assert scales == pytest.approx([1.8, 0.9, 0.3])  # b_i * W / B
        assert sum(scales) == pytest.approx(3.0)


def test_consecutive_plans_cover_the_epoch() -> None:
    first = EpochPlan((50, 30), (10, 6))  # 5 steps, positions 0..79
    second = EpochPlan((5, 15), (1, 3), start=80)  # 5 steps, positions 80..99
    samplers = _samplers(100, [first, second], epoch=0)
    assert samplers[0].steps == 10
    got = np.concatenate(_epoch_indices(samplers))
    assert np.array_equal(np.sort(got), np.arange(100))
    with pytest.raises(ValueError, match="starts at position"):
        samplers[0].add_plan(EpochPlan((5,), (5,), start=0))


def test_plan_rejects_a_rank_without_a_sample_per_step() -> None:
    with pytest.raises(ValueError, match="one per step"):
        EpochPlan(counts=(100, 2), batch_sizes=(10, 10))


def test_state_dict_rebuilds_the_same_order() -> None:
    s = _samplers(500, [EpochPlan((300, 200), (30, 20))], epoch=7)[1]
    clone = PlanSampler(500, seed=3, rank=1)
    clone.load_state_dict(s.state_dict())
    assert all(np.array_equal(s.indices(k), clone.indices(k)) for k in range(s.steps))


def test_balancer_plans_plug_in() -> None:
    balancer = pytest.importorskip("engine.balance.balancer")
    plan = balancer.split(0, 1001, 100, [0.7, 0.3])
    samplers = _samplers(1001, [plan], epoch=1)
    got = np.concatenate(_epoch_indices(samplers))
    assert np.array_equal(np.sort(got), np.arange(1001))


def test_scaled_rank_gradients_average_to_the_full_batch_gradient() -> None:
    """What DDP computes (mean over ranks of scaled local-mean gradients) is the global mean."""
    torch.manual_seed(0)
    x, y = torch.randn(20, 4), torch.rand(20)
    w = torch.randn(4, requires_grad=True)

    def grad(rows: slice, scale: float) -> torch.Tensor:
        w.grad = None
        loss = torch.nn.functional.binary_cross_entropy_with_logits(x[rows] @ w, y[rows])
        (loss * scale).backward()
        assert w.grad is not None
        return w.grad.clone()

    full = grad(slice(0, 20), 1.0)
    plan = EpochPlan(counts=(14, 5, 1), batch_sizes=(14, 5, 1))  # one step, B = 20
    sizes = [plan.local_size(r, 0) for r in range(3)]
    bounds = np.cumsum([0, *sizes])
    ddp_mean = (
        sum(
            grad(slice(bounds[r], bounds[r + 1]), sizes[r] * 3 / plan.step_global(0))
            for r in range(3)
        )
        / 3
    )
    assert torch.allclose(ddp_mean, full, atol=1e-6)


def test_loader_workers_yield_the_same_batches(tiny_data: Path) -> None:
    from engine.sentiment.data import load_split, train_loader

    arrays = load_split(tiny_data, "train")
    sampler = PlanSampler(len(arrays.labels), seed=0, rank=1)
    sampler.set_epoch(2)
    sampler.add_plan(even_plan(len(arrays.labels), 2, 64))
    inline = list(train_loader(arrays, sampler, 3, sampler.steps))
    workers = list(train_loader(arrays, sampler, 3, sampler.steps, workers=1))
    assert len(inline) == len(workers) == sampler.steps - 3  # resume skips the first 3 steps
    for a, b in zip(inline, workers, strict=True):
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.labels, b.labels)
    first = inline[0]
    assert torch.equal(first.labels, torch.from_numpy(arrays.labels[sampler.indices(3)]))
    assert first.tokens.dtype == torch.int32
    assert first.tokens.shape[1] == int(first.lengths.max())  # trimmed to the longest

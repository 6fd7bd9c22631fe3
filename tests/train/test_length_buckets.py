"""Length buckets (train.length_buckets): global batches of similar-length rows, every sample
once per epoch, an order that depends on (seed, epoch) only, resumable on another world size."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.sentiment.data import EpochPlan, PlanSampler, even_plan
from engine.sentiment.order import BUCKET_GROUPS, EpochOrder

N = 50_000
GROUP = 64


def _lengths(n: int = N, seed: int = 0) -> np.ndarray:
    """Review-like lengths: most short, a long tail cut at 256 (the padded width)."""
    rng = np.random.default_rng(seed)
    return np.minimum(rng.lognormal(4.0, 0.9, n).astype(np.int64) + 1, 256)


def _of(lengths: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    return lambda ids: lengths[ids]


def _order(lengths: np.ndarray | None, **kw: int) -> EpochOrder:
    shape = {"block": 512, "window_blocks": 16, **kw}
    if lengths is None:
        return EpochOrder(len(_lengths()), seed=1, epoch=2, **shape)
    return EpochOrder(len(lengths), seed=1, epoch=2, lengths=_of(lengths), group=GROUP, **shape)


def _widths(ids: np.ndarray, lengths: np.ndarray, batch: int = GROUP) -> np.ndarray:
    """Each global batch's padded width (its longest row)."""
    cut = len(ids) // batch * batch
    return lengths[ids[:cut]].reshape(-1, batch).max(axis=1)


@pytest.mark.parametrize("n", [GROUP - 1, GROUP * BUCKET_GROUPS + 7, N])
def test_every_sample_once_and_the_same_order_for_the_same_seed_and_epoch(n: int) -> None:
    lengths = _lengths(n)
    ids = _order(lengths).full()
    assert np.array_equal(np.sort(ids), np.arange(n))
    again = _order(lengths)
    pieces = [again.take(lo, min(n, lo + 97)) for lo in range(0, n, 97)]  # straddles windows
    assert np.array_equal(np.concatenate(pieces), ids)
    if n > 1000:
        other = EpochOrder(n, seed=1, epoch=3, lengths=_of(lengths), group=GROUP, block=512)
        assert not np.array_equal(other.full(), ids)


def test_batches_are_padded_to_far_less_than_random_ones() -> None:
    lengths = _lengths()
    plain = _widths(_order(None).full(), lengths)
    bucketed = _widths(_order(lengths).full(), lengths)
    assert plain.mean() > 2.0 * bucketed.mean()  # random batches nearly all hit the tail
    padded = bucketed.mean() * GROUP
    assert padded < 1.3 * lengths.mean() * GROUP  # close to the real tokens
    # the batches' lengths are not in order through the epoch (no short-then-long sweep)
    first, second = bucketed[: len(bucketed) // 2], bucketed[len(bucketed) // 2 :]
    assert abs(np.median(first) - np.median(second)) < 0.25 * np.median(bucketed)


def _step_widths(lengths: np.ndarray, bucketed: bool, world: int, batch: int) -> np.ndarray:
    """(steps, world) padded widths of an even plan's batches."""
    by = {"lengths": _of(lengths), "group": batch} if bucketed else {}
    ranks = [PlanSampler(len(lengths), seed=7, rank=r, **by) for r in range(world)]  # type: ignore[arg-type]
    for s in ranks:
        s.set_epoch(0)
        s.add_plan(even_plan(len(lengths), world, batch))
    return np.array([[lengths[s.indices(k)].max() for s in ranks] for k in range(ranks[0].steps)])


@pytest.mark.parametrize(("world", "batch"), [(2, 128), (3, 256)])
def test_ranks_steps_are_narrow_and_no_rank_gets_all_the_long_rows(world: int, batch: int) -> None:
    """The even plan's steps are not whole multiples of the batch (its step sizes differ by
    one row per rank), so a step often straddles two groups: still far narrower than random."""
    lengths = _lengths()
    plain = _step_widths(lengths, False, world, batch).max(axis=1).mean()
    widths = _step_widths(lengths, True, world, batch)
    assert widths.max(axis=1).mean() < 0.5 * plain  # what a DDP step waits for
    per_rank = widths.mean(axis=0)
    assert per_rank.max() < 1.25 * per_rank.min()


def test_a_resume_on_another_world_size_sees_every_sample_once() -> None:
    n, lengths = 3000, _lengths(3000)
    kw = {"lengths": _of(lengths), "group": 100}
    two = [PlanSampler(n, seed=5, rank=r, **kw) for r in range(2)]  # type: ignore[arg-type]
    for s in two:
        s.set_epoch(3)
        s.add_plan(EpochPlan((1800, 1200), (60, 40)))  # unequal balancer shares, 30 steps
    done = [i for k in range(7) for s in two for i in s.indices(k).tolist()]
    position = two[0].position(7)
    three = [PlanSampler(n, seed=5, rank=r, **kw) for r in range(3)]  # type: ignore[arg-type]
    for s in three:
        s.set_epoch(3, position=position, step=7)
        left = n - position
        s.add_plan(
            EpochPlan((left // 3, left // 3, left - 2 * (left // 3)), (30, 30, 30), position)
        )
    rest = [i for k in range(7, three[0].steps) for s in three for i in s.indices(k).tolist()]
    assert sorted(done + rest) == list(range(n))
    whole = EpochOrder(n, 5, 3, lengths=_of(lengths), group=100).full()
    assert np.array_equal(np.array(done + rest), np.concatenate([whole[:position], rest]))


class _Sink:
    def write(self, event: dict[str, object]) -> None:
        """Events are not looked at here."""

    def close(self) -> None:
        """Nothing to release."""


def _trainer(tmp_path: Path, data: Path, buckets: bool) -> Any:
    """A one-rank trainer of a tiny model over ``data``, with or without length buckets."""
    from engine.config import ModelConfig, TrainConfig
    from engine.events import Emitter
    from engine.sentiment.trainer import DistEnv, Trainer

    cfg = TrainConfig(
        data_dir=str(data), run_dir=str(tmp_path / f"run{buckets}"), epochs=1,
        batch_size=32, checkpoint_every_min=0, events_file=False, length_buckets=buckets,
        model=ModelConfig(preset="seed", embedding_dim=16, hidden=16),
        data_cache=str(tmp_path / "node-cache"),
    )  # fmt: skip
    return Trainer(cfg, emitter=Emitter(_Sink()), env=DistEnv())


def test_the_trainer_draws_length_bucketed_batches_when_asked(tmp_path: Path) -> None:
    """train.length_buckets reaches the trainer's sampler: its steps are narrower than the
    plain order's and still cover the epoch once; the run finishes."""
    from .conftest import write_dataset

    data = write_dataset(tmp_path / "data", n_train=2048, seq_len=48)
    widths = {}
    for buckets in (False, True):
        t = _trainer(tmp_path, data, buckets)
        summary = t.fit()
        assert summary["n_train"] == 2048 and summary["status"] == "ok"
        t.sampler.set_epoch(0)  # the epoch it trained, again
        t.sampler.add_plan(even_plan(t.n_train, 1, 32))
        steps = [t.sampler.indices(k) for k in range(t.sampler.steps)]
        assert sorted(np.concatenate(steps).tolist()) == list(range(t.n_train))
        lengths = t.data.train.lengths
        widths[buckets] = np.mean([lengths[ids].max() for ids in steps])
    assert widths[True] < 0.6 * widths[False]


def test_a_checkpoint_of_the_other_order_redoes_its_epoch(tmp_path: Path) -> None:
    """A mid-epoch checkpoint taken with length buckets off does not place a bucketed run (nor
    the reverse): its position counts samples of another order, so the trainer starts the
    epoch again; a checkpoint of the same order continues at its step, on any world size."""
    from .conftest import write_dataset

    data = write_dataset(tmp_path / "data", n_train=1024, seq_len=48)
    plain, bucketed = _trainer(tmp_path, data, False), _trainer(tmp_path, data, True)
    plain._setup(), bucketed._setup()  # data, model and sampler, as fit() starts
    for saved, resumed in ((plain, bucketed), (bucketed, plain), (bucketed, bucketed)):
        saved.sampler.set_epoch(0)
        saved.sampler.add_plan(even_plan(saved.n_train, 2, 32))  # taken on 2 ranks
        state = {
            "step": 5, "epoch": 0, "world_size": 2, "position": saved.sampler.position(5),
            "sampler": saved.sampler.state_dict(), "buckets": saved.sampler.buckets,
        }  # fmt: skip
        resumed.resume_step, resumed.resumed_sampler = 0, False
        resumed._resume_sampler(state)
        same = saved.sampler.buckets == resumed.sampler.buckets
        assert (resumed.resume_step, resumed.resumed_sampler) == ((5, True) if same else (0, False))

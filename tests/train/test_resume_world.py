"""Resuming mid-epoch on another number of ranks (a node lost) continues the same sample order."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from engine.config import BalanceConfig, config_to_dict
from engine.errors import LaunchError
from engine.launch import launch_ranks
from engine.sentiment.data import EpochPlan, PlanSampler, epoch_permutation
from engine.sentiment.order import EpochOrder
from tests.train.conftest import write_dataset

from .test_trainer import _cfg

RANK_MODULE = "tests.train.recording_rank"


def _read(path: Path) -> list[tuple[int, int, list[int]]]:
    rows = []
    for line in path.read_text().splitlines():
        epoch, step, *ids = map(int, line.split())
        rows.append((epoch, step, ids))
    return rows


@pytest.mark.slow
@pytest.mark.parametrize(
    ("balance", "position_at_step_4"),
    [
        (None, 2 * (4 * 250 // 11)),  # even plan: 250 samples per rank over 11 steps
        (BalanceConfig(enabled=True, every_steps=2, straggle={1: 3.0}, hysteresis=0.0), 4 * 48),
    ],
    ids=["even-shares", "balancer-unequal-shares"],
)
def test_two_ranks_to_one_mid_epoch_sees_every_sample_exactly_once(
    tmp_path: Path, balance: BalanceConfig | None, position_at_step_4: int
) -> None:
    data = write_dataset(tmp_path / "data", n_train=500, n_test=64)
    run, first, second = tmp_path / "run", tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    cfg = _cfg(data, run, epochs=2, batch_size=48, checkpoint_every_steps=3)
    if balance is not None:
        cfg.balance = balance
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps(config_to_dict(cfg)))
    # 2 ranks: 11 steps per epoch; die inside global step 16 (epoch 1, step 5), whose last
    # checkpoint was taken after global step 15 (epoch 1, step 4)
    lines: list[str] = []
    with pytest.raises(LaunchError):
        launch_ranks(
            RANK_MODULE, [str(config), str(first), "16"], 2, threads=1,
            on_line=lambda rank, stream, line: lines.append(line),
        )  # fmt: skip
    balances = [json.loads(x) for x in lines if x.startswith('{"type":"balance"')]
    if balance is not None:  # the straggler's share moved: epoch 1 ran on unequal shares
        assert any(e["epoch"] == 1 and e["batch_sizes"][0] > e["batch_sizes"][1] for e in balances)
    saved = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    assert (saved["epoch"], saved["step"], saved["world_size"]) == (1, 4, 2)
    position = saved["position"]  # samples of epoch 1 consumed over both ranks before step 4
    assert position == position_at_step_4
    cfg.resume = True
    config.write_text(json.dumps(config_to_dict(cfg)))
    launch_ranks(RANK_MODULE, [str(config), str(second), "-1"], 1, threads=1, on_line=_quiet)
    before = [r for k in (0, 1) for r in _read(first / f"rank{k}.txt")]
    after = _read(second / "rank0.txt")
    epoch1 = [i for e, s, ids in before if e == 1 and s < 4 for i in ids]
    epoch1 += [i for e, _, ids in after if e == 1 for i in ids]
    assert sorted(epoch1) == list(range(500))  # one full pass: nothing repeated or skipped
    steps = [s for e, s, _ in after if e == 1]
    assert steps == list(range(4, 4 + len(steps)))  # the epoch's step numbering continues
    # ...and in the epoch's order (length-bucketed: the default), which the world size does
    # not change
    assert cfg.length_buckets
    with h5py.File(data / "dataset.h5", "r") as fh:
        lengths = np.asarray(fh["train/lengths"][:])
    order = EpochOrder(500, 0, 1, lengths=lambda ids: lengths[ids], group=cfg.batch_size).full()
    assert not np.array_equal(order, epoch_permutation(500, seed=0, epoch=1))
    consumed = [i for e, s, ids in sorted(before) if e == 1 and s < 4 for i in ids]
    assert sorted(consumed) == sorted(order[:position].tolist())
    assert [i for e, _, ids in after if e == 1 for i in ids] == order[position:].tolist()
    # the resumed epoch's record covers the whole epoch, not only the part after the checkpoint
    assert saved["partial"]["samples"] == position and saved["partial"]["seconds"] > 0
    per_epoch = json.loads((run / "summary.json").read_text())["per_epoch"]
    assert round(per_epoch[1]["samples_per_s"] * per_epoch[1]["seconds"]) == 500
    assert [e["world_size"] for e in per_epoch] == [2, 1]  # which ranks finished each epoch
    assert "resumed_mid_epoch" not in per_epoch[0]
    assert (per_epoch[1]["resumed_mid_epoch"], per_epoch[1]["world_size_before"]) == (True, 2)
    # the report's epoch times leave both out: epoch 0 ran on 2 ranks, epoch 1 on 2 then 1
    # (it counted the folder as 1 rank timed at both epochs, the 1-process baseline of a sweep)
    from remote.runs_store import load_run

    record = load_run(run)
    assert (record.workers, record.epoch_seconds, record.epochs_left_out) == (1, [], 2)


def _quiet(rank: int, stream: str, line: str) -> None:
    """Launcher lines are not needed here."""


def test_sampler_resumes_at_a_position_for_another_world() -> None:
    n = 1000
    two = [PlanSampler(n, seed=5, rank=r) for r in range(2)]
    for s in two:
        s.set_epoch(3)
        s.add_plan(EpochPlan((600, 400), (60, 40)))  # unequal balancer shares, 10 steps
    done = [i for k in range(4) for s in two for i in s.indices(k).tolist()]
    order = epoch_permutation(n, seed=5, epoch=3)
    position = two[0].position(4)
    assert position == 400 and sorted(done) == sorted(order[:400].tolist())
    three = [PlanSampler(n, seed=5, rank=r) for r in range(3)]
    for s in three:
        s.set_epoch(3, position=position, step=4)
        s.add_plan(EpochPlan((200, 200, 200), (20, 20, 20), start=position))
    rest = [i for k in range(4, three[0].steps) for s in three for i in s.indices(k).tolist()]
    assert sorted(done + rest) == list(range(n))
    assert np.array_equal(np.concatenate([order[:400], rest]), order)
    with pytest.raises(IndexError):
        three[0].indices(3)  # steps before the resume are not this session's

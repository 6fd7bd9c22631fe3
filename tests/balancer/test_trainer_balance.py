"""A real 2-process gloo training run with a straggler: the balancer moves the shares."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

pytest.importorskip("torch")

from engine.config import BalanceConfig, ModelConfig, TrainConfig
from engine.events import read_events
from engine.sentiment.train import launch_local
from tests.train.conftest import write_dataset


def _run(tmp_path: Path, balance: BalanceConfig, epochs: int = 3) -> Path:
    data = write_dataset(tmp_path / "data", n_train=2048, n_test=128, seq_len=32)
    cfg = TrainConfig(
        data_dir=str(data), run_dir=str(tmp_path / "run"), model=ModelConfig(preset="seed"),
        epochs=epochs, batch_size=128, warmup_steps=0, log_every=1000,
        checkpoint_every_min=0, balance=balance,
    )  # fmt: skip
    launch_local(cfg, 2, threads=1, on_line=lambda rank, stream, line: None)
    return tmp_path / "run"


@pytest.mark.slow
def test_straggler_shares_move_toward_the_speed_ratio(tmp_path: Path) -> None:
    # emulated device time (5 ms a sample) dwarfs the real compute, so the 2x ratio holds
    # however loaded the host's cores are
    run = _run(tmp_path, BalanceConfig(enabled=True, straggle={1: 2.0}, emulate_s=0.005))
    events = list(read_events(run / "events.jsonl"))
    balance = [e for e in events if e["type"] == "balance"]
    assert [e["epoch"] for e in balance] == [0, 1, 2]  # one plan per epoch
    assert balance[0]["shares"] == [0.5, 0.5] and balance[0]["batch_sizes"] == [64, 64]
    first = balance[1]["measured"]  # seconds per sample in epoch 0, equal batches
    assert 1.5 < first[1] / first[0] < 2.5  # rank 1 sleeps 1x its device time: about 2x slower
    final = balance[-1]
    assert final["shares"][0] / final["shares"][1] > 1.5  # from 1.0 toward the ~2x ratio
    assert final["batch_sizes"][0] > final["batch_sizes"][1]
    assert sum(final["batch_sizes"]) == 128 and sum(final["counts"]) == 2048
    assert balance[1]["rebalances"] == 1  # the first measurement always moves equal shares
    for before, e in pairwise(balance):
        s0, s1 = e["sec_per_sample"]
        if e["rebalances"] > before["rebalances"]:  # moved: shares ∝ smoothed speeds
            assert e["shares"][0] / e["shares"][1] == pytest.approx(s1 / s0, rel=1e-3)
        else:  # within the hysteresis: unchanged
            assert e["shares"] == before["shares"]
    phases = [e for e in events if e["type"] == "phase"]
    for epoch in range(3):  # every sample once per epoch, the same steps on both ranks
        ranks = [p for p in phases if p["epoch"] == epoch]
        assert sum(p["samples"] for p in ranks) == 2048
        assert len({p["steps"] for p in ranks}) == 1
    summary = json.loads((run / "summary.json").read_text())
    assert summary["balance"]["advice"]["drop_rank"] == 1
    assert summary["balance"]["rebalances"] >= 1


@pytest.mark.slow
def test_rebalancing_every_k_steps_inside_an_epoch(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        BalanceConfig(enabled=True, every_steps=4, straggle={1: 2.0}, emulate_s=0.005),
        epochs=1,
    )
    events = list(read_events(run / "events.jsonl"))
    balance = [e for e in events if e["type"] == "balance"]
    assert [e["step"] for e in balance] == [0, 4, 8, 12]  # 16 steps, a plan every 4
    assert [e["start"] for e in balance] == [0, 512, 1024, 1536]
    assert balance[0]["batch_sizes"] == [64, 64]
    assert balance[-1]["batch_sizes"][0] > balance[-1]["batch_sizes"][1]
    phases = [e for e in events if e["type"] == "phase"]
    assert sum(p["samples"] for p in phases) == 2048
    assert {p["steps"] for p in phases} == {16}

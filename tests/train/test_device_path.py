"""The CUDA code paths, exercised as far as a machine without a GPU allows.

Device selection, the process-group backend, bf16 autocast only on CUDA, pinned memory and
non-blocking copies only off the CPU, and CUDA synchronisation only on CUDA. A `gpu` test runs
one real bf16 step where a device exists (skipped here: no GPU was lent to this task).
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from engine.errors import TrainError
from engine.sentiment.data import Batch, to_device
from engine.sentiment.trainer import DistEnv, Trainer, _Clock


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_auto_picks_cpu_without_cuda(no_cuda: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_RANK", "1")
    env = DistEnv.from_environ("auto")
    assert env.device == torch.device("cpu") and env.local_rank == 1 and env.backend == "gloo"


def test_cuda_without_a_device_is_a_clear_error(no_cuda: None) -> None:
    with pytest.raises(TrainError, match="no CUDA device is visible"):
        DistEnv.from_environ("cuda")


def test_auto_picks_the_local_rank_gpu_and_nccl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    env = DistEnv.from_environ("auto")
    assert env.device == torch.device("cuda", 3) and env.world == 8 and env.backend == "nccl"
    assert DistEnv.from_environ("cpu").device.type == "cpu"  # asked for CPU: CPU


def _trainer(device: str, amp: bool) -> Any:
    return SimpleNamespace(device=torch.device(device), cfg=SimpleNamespace(amp=amp))


def test_autocast_is_off_on_cpu_and_bf16_on_cuda() -> None:
    assert isinstance(Trainer._autocast(_trainer("cpu", True)), contextlib.nullcontext)
    assert isinstance(Trainer._autocast(_trainer("cuda", False)), contextlib.nullcontext)
    with pytest.warns(UserWarning) if not torch.cuda.is_available() else contextlib.nullcontext():
        cast = Trainer._autocast(_trainer("cuda", True))
    assert isinstance(cast, torch.autocast) and cast.fast_dtype == torch.bfloat16


def test_pinned_memory_only_for_cuda() -> None:
    seen: list[bool] = []

    def batches(*args: Any, pin_memory: bool = False, **kw: Any) -> list[int]:
        seen.append(pin_memory)
        return [0]

    for device in ("cpu", "cuda"):
        me = SimpleNamespace(
            device=torch.device(device),
            cfg=SimpleNamespace(loader_workers=0),
            data=SimpleNamespace(batches=batches),
            sampler=None,
        )
        list(Trainer._batches(me, 0, 1))  # type: ignore[arg-type]
    assert seen == [False, True]


def test_to_device_keeps_lengths_on_cpu_and_copies_the_rest() -> None:
    batch = Batch(torch.ones(2, 3, dtype=torch.int32), torch.tensor([3, 1]), torch.ones(2))
    assert to_device(batch, torch.device("cpu")) is batch  # no copy on the CPU
    moved = to_device(batch, torch.device("meta"))  # any non-CPU device takes the copy path
    assert moved.tokens.device.type == "meta" and moved.labels.device.type == "meta"
    assert moved.lengths.device.type == "cpu"  # pack_padded_sequence needs CPU lengths


def test_clock_synchronises_only_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append(1))
    _Clock(torch.device("cpu")).lap()
    assert calls == []
    _Clock(torch.device("cuda", 0)).lap()
    assert calls == [1]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_one_bf16_step_on_a_gpu() -> None:
    from engine.config import ModelConfig
    from engine.sentiment.model import build_model, resolve_spec

    dev = torch.device("cuda", 0)
    model = build_model(resolve_spec(ModelConfig(preset="seed"), 1000)).to(dev)
    batch = to_device(
        Batch(torch.randint(1, 1000, (64, 50)), torch.full((64,), 50), torch.ones(64)), dev
    )
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            model(batch.tokens, batch.lengths), batch.labels
        )
    loss.backward()
    assert torch.isfinite(loss).item()

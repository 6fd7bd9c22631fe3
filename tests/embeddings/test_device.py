"""Device selection (auto|cpu|cuda) and the on-device pair builder, exercised on CPU."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from engine.embeddings.config import EmbedConfig
from engine.embeddings.corpus import Corpus, DevicePairs, NegativeSampler, epoch_pairs
from engine.embeddings.device import resolve_device
from engine.errors import ConfigError
from tui.cli import main as sentitop

NO_CUDA = not torch.cuda.is_available()


def _cfg(**kw: object) -> EmbedConfig:
    return EmbedConfig(run_dir="r", input="x.jsonl", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("device", "mode", "nproc", "gpus", "want"),
    [
        ("auto", "sync", 1, 0, "cpu"),
        ("auto", "sync", 1, 1, "cuda"),
        ("auto", "sync", 2, 1, "cpu"),  # two ranks cannot share one GPU under NCCL
        ("auto", "async", 3, 4, "cpu"),  # the parameter server is CPU-only
        ("cpu", "sync", 1, 8, "cpu"),
        ("cuda", "sync", 2, 2, "cuda"),
    ],
)
def test_auto_and_explicit_devices_resolve(
    device: str, mode: str, nproc: int, gpus: int, want: str
) -> None:
    assert resolve_device(_cfg(device=device, mode=mode), nproc, visible=gpus) == want


def test_cuda_that_cannot_be_had_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no CUDA device is visible"):
        resolve_device(_cfg(device="cuda"), 1, visible=0)
    with pytest.raises(ConfigError, match="--nproc 3 needs 3 GPUs; 1 visible"):
        resolve_device(_cfg(device="cuda"), 3, visible=1)
    with pytest.raises(ConfigError, match="not supported with mode = async"):
        _cfg(device="cuda", mode="async")
    with pytest.raises(ConfigError, match=r"embed\.device"):
        _cfg(device="tpu")


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_cli_device_cuda_without_cuda_exits_2_before_reading_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    code = sentitop(["embed", "--input", "missing.jsonl", "--run-dir", str(run),
                     "--device", "cuda"])  # fmt: skip
    assert code == 2
    assert "embed.device = cuda but no CUDA device is visible" in capsys.readouterr().err
    assert not (run / "corpus.npz").exists()


def _corpus() -> Corpus:
    rng = np.random.default_rng(3)
    lengths = [7, 1, 0, 12, 5]
    ids = rng.integers(0, 6, sum(lengths)).astype(np.int32)
    counts = np.bincount(ids, minlength=6).astype(np.int64)
    order = np.argsort(-counts, kind="stable")
    rank = np.empty(6, np.int64)
    rank[order] = np.arange(6)
    return Corpus(
        ids=rank[ids].astype(np.int32),
        doc_starts=np.cumsum([0, *lengths]),
        itos=[f"w{i}" for i in range(6)],
        counts=counts[order],
        raw_tokens=int(sum(lengths)),
    )


def test_device_pairs_follow_the_host_rules() -> None:
    """With nothing sub-sampled away both builders give the same pairs (no pair crosses a
    document); the device builder shuffles with its own seed and keeps to the shard."""
    corpus = _corpus()
    everything = 1.0  # keep probability min(1, sqrt(1/f) + 1/f) = 1 for every word
    c, x, raw = epoch_pairs(corpus, (0, 5), window=3, subsample=everything, seed=1)
    pairs = DevicePairs(corpus, (0, 5), torch.device("cpu"))
    dc, dx, draw = pairs.epoch(window=3, subsample=everything, seed=1)
    assert dc.device.type == "cpu" and dc.dtype == torch.int64
    assert Counter(zip(c.tolist(), x.tolist(), strict=True)) == Counter(
        zip(dc.tolist(), dx.tolist(), strict=True)
    )
    assert draw == raw == corpus.raw_tokens
    again = pairs.epoch(window=3, subsample=everything, seed=1)
    other = pairs.epoch(window=3, subsample=everything, seed=2)
    assert torch.equal(again[0], dc) and not torch.equal(other[0], dc)
    shard = DevicePairs(corpus, (3, 5), torch.device("cpu"))  # documents 3 and 4 only
    sc, _, _ = shard.epoch(window=3, subsample=everything, seed=1)
    hc, _, _ = epoch_pairs(corpus, (3, 5), window=3, subsample=everything, seed=1)
    assert sorted(sc.tolist()) == sorted(hc.tolist())


def test_device_pairs_subsample_frequent_words() -> None:
    corpus = _corpus()
    pairs = DevicePairs(corpus, (0, 5), torch.device("cpu"))
    full = len(pairs.epoch(window=3, subsample=1.0, seed=0)[0])
    kept = sum(len(pairs.epoch(window=3, subsample=0.05, seed=s)[0]) for s in range(5))
    assert 0 < kept < 5 * full


def test_negative_sampler_draws_on_its_device() -> None:
    sampler = NegativeSampler(np.array([50, 30, 20]), seed=0, device=torch.device("cpu"))
    draw = sampler.sample(64, 5)
    assert draw.shape == (64, 5) and draw.device.type == "cpu"
    assert set(draw.unique().tolist()) <= {0, 1, 2}

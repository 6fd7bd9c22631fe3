"""The wide path (model.ngram_buckets): a linear bag of unigrams and hashed bigrams beside the
LSTM — shapes, padding, word order, old model.json files, training in one and two processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine.config import ModelConfig, TrainConfig
from engine.errors import ConfigError
from engine.sentiment.model import (
    ModelShape,
    WideNgrams,
    bigram_buckets,
    build_model,
    count_parameters,
    resolve_spec,
)
from engine.sentiment.trainer import DistEnv, Trainer

ROOT = Path(__file__).resolve().parents[2]


def _randomised(model: torch.nn.Module) -> torch.nn.Module:
    """The wide weights start at zero (the model starts as the LSTM alone): give them values."""
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "wide" in name:
                p.normal_()
    return model.eval()


def test_off_by_default_and_sized_when_on() -> None:
    plain = resolve_spec(ModelConfig(preset="seed"), vocab_size=30)
    assert plain.ngram_buckets == 0 and build_model(plain).wide is None
    assert resolve_spec(ModelConfig(), vocab_size=30).ngram_buckets == 1_000_000  # default: on
    spec = resolve_spec(ModelConfig(preset="seed", ngram_buckets=64), vocab_size=30)
    assert spec.ngram_buckets == 64
    model = build_model(spec)
    assert count_parameters(model) == count_parameters(build_model(plain)) + 30 + 64
    tokens = torch.randint(1, 30, (5, 9), dtype=torch.int32)
    lengths = torch.tensor([9, 1, 4, 0, 7])
    assert model(tokens, lengths).shape == (5,)
    with pytest.raises(ConfigError, match="ngram_buckets"):
        resolve_spec(ModelConfig(ngram_buckets=-1), vocab_size=30)
    with pytest.raises(ConfigError, match="ngram_scale"):
        resolve_spec(ModelConfig(ngram_buckets=8, ngram_scale=0.0), vocab_size=30)


def test_starts_as_the_lstm_alone() -> None:
    torch.manual_seed(0)
    plain = build_model(resolve_spec(ModelConfig(), vocab_size=30)).eval()
    torch.manual_seed(0)
    wide = build_model(resolve_spec(ModelConfig(ngram_buckets=16), vocab_size=30)).eval()
    tokens = torch.randint(2, 30, (4, 6), dtype=torch.int32)
    lengths = torch.tensor([6, 3, 2, 1])
    with torch.no_grad():
        assert torch.allclose(plain(tokens, lengths), wide(tokens, lengths), atol=1e-6)


def test_padding_and_garbage_past_the_length_do_not_change_the_logit() -> None:
    model = _randomised(build_model(resolve_spec(ModelConfig(ngram_buckets=50), vocab_size=30)))
    tokens = torch.randint(2, 30, (3, 6), dtype=torch.int32)
    lengths = torch.tensor([6, 3, 2])
    changed = tokens.clone()
    changed[1, 3:] = 7
    changed[2, 2:] = 0
    wider = torch.cat([tokens, torch.randint(2, 30, (3, 5), dtype=torch.int32)], dim=1)
    with torch.no_grad():
        base = model(tokens, lengths)
        assert torch.allclose(base, model(changed, lengths), atol=1e-6)
        assert torch.allclose(base, model(wider, lengths), atol=1e-6)
        assert torch.allclose(model(tokens[1:2, :3], lengths[1:2]), base[1:2], atol=1e-6)
        # and the wide part alone: an empty text scores 0
        wide = model.wide
        assert wide is not None
        assert wide(tokens, torch.tensor([0, 0, 0])).abs().max() == 0


def test_the_padded_lstm_path_adds_the_same_wide_score() -> None:
    """The GPU's padded LSTM path (forced here on the CPU) gives the packed path's logits."""
    model = _randomised(build_model(resolve_spec(ModelConfig(ngram_buckets=50), vocab_size=30)))
    tokens = torch.randint(2, 30, (4, 7), dtype=torch.int32)
    lengths = torch.tensor([7, 3, 1, 0])
    with torch.no_grad():
        packed = model(tokens, lengths)
        model.packing = "padded"
        assert torch.allclose(model(tokens, lengths), packed, atol=1e-5)


def test_bigram_order_matters_and_the_bag_is_normalised() -> None:
    wide = WideNgrams(vocab_size=10, buckets=1000)
    with torch.no_grad():
        wide.weight.weight.normal_()
    ab, ba = torch.tensor([[4, 7]]), torch.tensor([[7, 4]])
    two = torch.tensor([2])
    rows_ab, _ = wide.ids(ab, two)
    rows_ba, _ = wide.ids(ba, two)
    assert rows_ab[0, 2] != rows_ba[0, 2] and 10 <= int(rows_ab[0, 2]) < 1010
    assert not torch.allclose(wide(ab, two), wide(ba, two))
    with torch.no_grad():
        wide.weight.weight[10:] = 0  # unigrams only: a bag, order no longer matters
    assert torch.allclose(wide(ab, two), wide(ba, two))
    # sum over the present n-grams / sqrt(their count): 2 unigrams + 1 bigram
    w = wide.weight.weight.detach()[:, 0]
    with torch.no_grad():
        assert wide(ab, two).item() == pytest.approx(float((w[4] + w[7]) / 3**0.5), rel=1e-5)
        wide.scale = 10.0
        assert wide(ab, two).item() == pytest.approx(float(10 * (w[4] + w[7]) / 3**0.5), rel=1e-5)


def test_old_model_json_without_the_field_loads() -> None:
    old = resolve_spec(ModelConfig(), vocab_size=30).to_dict()
    del old["ngram_buckets"]
    spec = ModelShape.from_dict(old)
    assert spec.ngram_buckets == 0
    state = build_model(spec).state_dict()
    build_model(spec).load_state_dict(state)  # same keys as before the wide path existed
    assert not any("wide" in key for key in state)


@pytest.mark.slow
def test_trains_evaluates_and_reloads(tiny_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = TrainConfig(
        data_dir=str(tiny_data),
        run_dir=str(run),
        epochs=3,
        batch_size=64,
        lr=1e-2,
        warmup_steps=4,
        lr_schedule="constant",
        checkpoint_every_min=0,
        events_file=False,
        model=ModelConfig(ngram_buckets=128),
    )
    summary = Trainer(cfg, env=DistEnv()).fit()
    assert summary["accuracy"] > 0.9
    assert json.loads((run / "model.json").read_text())["ngram_buckets"] == 128
    spec = ModelShape.from_dict(json.loads((run / "model.json").read_text()))
    model = build_model(spec)
    model.load_state_dict(torch.load(run / "model.pt", map_location="cpu"))  # as load_run does
    assert model.wide is not None
    assert model.wide.weight.weight.abs().max() > 0  # the wide path learned something


@pytest.mark.slow
def test_two_process_gloo_run_with_the_wide_path(tiny_data: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = ["train", "--data", str(tiny_data), "--run-dir", str(run), "--nproc", "2"]
    args += ["--epochs", "2", "--batch-size", "64", "--lr", "0.01", "--json"]
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", *args, "--model-ngram-buckets", "256"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["world_size"] == 2 and summary["accuracy"] > 0.8
    assert json.loads((run / "model.json").read_text())["ngram_buckets"] == 256


def test_bigram_hash_spreads_like_a_random_function() -> None:
    """350 k distinct bigrams of a Zipf-like vocabulary fill (almost) as many of 1 M buckets as
    a random function would; hash 1 (kept for old runs) reduced to 3a + b and collided."""
    gen = torch.Generator().manual_seed(0)
    ranks = torch.arange(1, 30_001, dtype=torch.float64)
    pick = torch.multinomial(1.0 / ranks, 1_400_000, replacement=True, generator=gen)
    pairs = torch.unique((pick[:-1] + 2) * 40_000 + (pick[1:] + 2))
    first, second = pairs // 40_000, pairs % 40_000
    n, buckets = len(pairs), 1_000_000
    random_fill = buckets * (1 - (1 - 1 / buckets) ** n)
    new = len(torch.unique(bigram_buckets(first, second, buckets, 2)))
    old = len(torch.unique(bigram_buckets(first, second, buckets, 1)))
    assert n > 200_000
    assert new >= 0.98 * random_fill
    assert old < 0.5 * random_fill
    assert int(bigram_buckets(first, second, buckets, 2).min()) >= 0


def test_new_models_use_hash_2_and_old_runs_keep_hash_1() -> None:
    spec = resolve_spec(ModelConfig(ngram_buckets=1000), vocab_size=30)
    assert spec.ngram_hash == 2 and build_model(spec).wide.hash_version == 2  # type: ignore[union-attr]
    old = spec.to_dict()
    written_later = ("ngram_hash", "negation_scope", "negation_ids", "clause_ids", "lexicon_prior")
    for key in written_later:
        del old[key]  # model.json written before hash 2 (and before the scope and the lexicon)
    old_model = _randomised(build_model(ModelShape.from_dict(old)))
    assert old_model.wide.hash_version == 1  # type: ignore[union-attr]
    tokens = torch.tensor([[4, 7, 9]])
    rows, _ = old_model.wide.ids(tokens, torch.tensor([3]))  # type: ignore[union-attr]
    assert rows[0, 3:].tolist() == [
        30 + (4 * 1_000_003 + 7) % 1000,
        30 + (7 * 1_000_003 + 9) % 1000,
    ]
    with pytest.raises(ConfigError, match="ngram_hash"):
        build_model(ModelShape.from_dict({**old, "ngram_hash": 3}))

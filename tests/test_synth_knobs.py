"""`synth --distinct` (share of distinct texts) and `synth --dataset` (dataset.h5 written
directly): measured shares, the preprocessor's layout read by the real loader, learnability."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import orjson
import pytest

from engine.errors import InputError
from engine.preprocess.encode import load_encoder
from engine.preprocess.writer import CHUNK_BYTES
from engine.sentiment.data import load_split, read_info
from engine.synth import generate
from engine.synth.dataset import write_synthetic_dataset
from tui.cli.main import main


def _distinct_share(path: Path) -> float:
    texts, good = set(), 0
    with open(path, "rb") as fh:
        for line in fh:
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record.get("reviewText"), str) and record.get("overall") is not None:
                texts.add(record["reviewText"])
                good += 1
    return len(texts) / good


@pytest.mark.parametrize("share", [0.05, 0.5, 0.9, 1.0])
def test_distinct_share_is_what_was_asked(tmp_path: Path, share: float) -> None:
    path = tmp_path / "r.jsonl"
    stats = generate(path, 3_000_000, distinct=share, malformed_rate=0.0)
    measured = _distinct_share(path)
    assert measured == pytest.approx(share, abs=0.02)
    assert stats["duplicate_rate"] == pytest.approx(1 - measured, abs=0.01)
    assert stats["distinct_requested"] == share


def test_distinct_default_keeps_the_corpus_rate_and_the_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    generate(a, 1_000_000, seed=4)
    generate(b, 1_000_000, seed=4, distinct=0.9)
    assert _distinct_share(a) == pytest.approx(0.15, abs=0.03)
    assert a.read_bytes() != b.read_bytes()
    generate(b, 1_000_000, seed=4, distinct=0.9)
    c = tmp_path / "c.jsonl"
    generate(c, 1_000_000, seed=4, distinct=0.9)
    assert b.read_bytes() == c.read_bytes()


def test_distinct_out_of_range_is_an_input_error(tmp_path: Path) -> None:
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(InputError, match="--distinct"):
            generate(tmp_path / "x.jsonl", 10_000, distinct=bad)


def test_dataset_has_the_preprocessor_layout_and_reads_back(tmp_path: Path) -> None:
    stats = write_synthetic_dataset(tmp_path, 70_000, 7_000, seq_len=40, vocab_size=500, seed=1)
    info = read_info(tmp_path)
    assert (info.train_size, info.test_size, info.seq_len, info.vocab_size) == (
        70_000,
        7_000,
        40,
        502,
    )
    with h5py.File(tmp_path / "dataset.h5", "r") as h5:
        for key in ("vocab_size", "num_ids", "seq_len", "pad_id", "unk_id", "vocab_sha256"):
            assert key in h5.attrs
        tokens = h5["train/tokens"]
        assert tokens.dtype == np.uint16
        assert tokens.chunks == (CHUNK_BYTES // (40 * 2), 40)
        assert h5["train"].attrs["rows"] == 70_000
    assert len(load_encoder(tmp_path).index) == 500
    assert json.loads((tmp_path / "stats.json").read_text()) == stats
    assert stats["train"] + stats["test"] == stats["kept"] == 77_000
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    split = load_split(tmp_path, "train")
    lengths = split.lengths
    assert lengths.min() >= 1 and lengths.max() <= 40
    positions = np.arange(40)[None, :]
    assert np.all((split.tokens[positions >= lengths[:, None]]) == 0)  # padding after length
    assert np.all(split.tokens[positions < lengths[:, None]] >= 1)
    assert split.tokens.max() <= 501
    assert 0.6 < split.labels.mean() < 0.75


def test_dataset_is_deterministic_and_learnable(tmp_path: Path) -> None:
    write_synthetic_dataset(tmp_path / "a", 20_000, 2_000, seq_len=50, vocab_size=2000, seed=3)
    write_synthetic_dataset(tmp_path / "b", 20_000, 2_000, seq_len=50, vocab_size=2000, seed=3)
    with h5py.File(tmp_path / "a" / "dataset.h5") as x, h5py.File(tmp_path / "b/dataset.h5") as y:
        for name in ("train/tokens", "train/labels", "test/lengths"):
            assert np.array_equal(x[name][()], y[name][()])
    # multinomial naive Bayes fit on train beats the majority rate on test by a margin
    train, test = load_split(tmp_path / "a", "train"), load_split(tmp_path / "a", "test")

    def log_p(label: int) -> np.ndarray:
        counts = np.bincount(train.tokens[train.labels == label].ravel(), minlength=2002)
        counts[0] = 0  # padding
        return np.log((counts + 1.0) / (counts.sum() + len(counts)))

    weight = log_p(1) - log_p(0)
    weight[0] = 0.0
    prior = np.log(train.labels.mean() / (1 - train.labels.mean()))
    score = weight[test.tokens].sum(axis=1) + prior
    threshold = 0.0
    accuracy = float(((score > threshold) == (test.labels == 1)).mean())
    majority = float(max(test.labels.mean(), 1 - test.labels.mean()))
    assert accuracy > majority + 0.1


def test_cli_dataset_and_its_argument_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ds"
    code = main(["synth", "--dataset", str(out), "--reviews", "10k", "--seq-len", "20", "--json"])
    assert code == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["train"], stats["test"]) == (9_000, 1_000)
    assert read_info(out).seq_len == 20
    assert main(["synth", "--dataset", str(out)]) == 2
    assert "--reviews" in capsys.readouterr().err
    assert main(["synth", "--dataset", str(out), "--reviews", "1k", "--distinct", "0.5"]) == 2
    assert "--distinct" in capsys.readouterr().err
    assert main(["synth", "--size", "1MB"]) == 2
    assert "--output" in capsys.readouterr().err


def test_cli_distinct(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.jsonl"
    code = main(["synth", "-o", str(path), "--size", "400KB", "--distinct", "0.8", "--json"])
    assert code == 0
    stats = json.loads(capsys.readouterr().out)
    assert 1 - stats["duplicate_rate"] == pytest.approx(0.8, abs=0.04)
    assert main(["synth", "-o", str(path), "--size", "1MB", "--distinct", "2"]) == 2
    assert "--distinct" in capsys.readouterr().err


def test_an_absurd_sequence_length_is_refused_everywhere(tmp_path: Path) -> None:
    """`synth --dataset D --reviews 100 --seq-len 100000000` wrote 19 GB of padding for 100
    rows; preprocessing and profiles took such a length too. One bound, MAX_SEQ_LEN, for all."""
    from engine.config import MAX_SEQ_LEN, PreprocessConfig
    from engine.errors import ConfigError
    from remote.profile import ProfileError, load_profile

    with pytest.raises(InputError, match="--seq-len: must be 1 to 65,536"):
        write_synthetic_dataset(tmp_path / "ds", 100, 10, seq_len=MAX_SEQ_LEN + 1)
    assert not (tmp_path / "ds").exists()
    with pytest.raises(ConfigError, match="seq_len"):
        PreprocessConfig(inputs=["x.jsonl"], output="out", seq_len=MAX_SEQ_LEN + 1)
    profile = tmp_path / "p.yaml"
    text = Path("profiles/local.yaml").read_text()
    profile.write_text(text.replace("preprocess:", f"preprocess:\n  seq_len: {MAX_SEQ_LEN + 1}", 1))
    with pytest.raises(ProfileError, match="seq_len"):
        load_profile(profile)


def test_a_dataset_folder_is_replaced_whole(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    write_synthetic_dataset(out, 300, 100, seq_len=8, vocab_size=50, seed=1)
    write_synthetic_dataset(out, 200, 100, seq_len=6, vocab_size=40, seed=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no stage folder beside it
    assert sorted(p.name for p in out.iterdir()) == ["dataset.h5", "stats.json", "vocab.json"]
    info = read_info(out)
    assert (info.seq_len, info.vocab_size) == (6, 42)  # 40 words + padding + unknown
    assert json.loads((out / "stats.json").read_text())["train"] == 200
    assert load_split(out, "train").tokens.shape == (200, 6)


def test_a_dataset_folder_holding_other_files_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me\n")
    assert main(["synth", "--dataset", str(out), "--reviews", "1k"]) == 2
    err = capsys.readouterr().err
    assert "--dataset" in err and "notes.txt" in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]

"""Settings and inputs a new user tries: refused with a message, never a traceback or a fake
result (no shared data needed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.embeddings import cli as embed_cli
from engine.embeddings import svd as svd_mod
from engine.embeddings.cli import run_local
from engine.embeddings.config import EmbedConfig
from engine.embeddings.corpus import Corpus, epoch_pairs, max_pairs, skipgram_pairs
from engine.embeddings.evaluate import cooccurrence, nearest_neighbours
from engine.errors import ConfigError
from tests.embeddings.topics import write_topic_reviews
from tui.cli import main as sentitop


@pytest.fixture
def reviews(tmp_path: Path) -> Path:
    return write_topic_reviews(tmp_path / "topics.jsonl")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--lr", "inf"], "embed.lr = inf is not allowed; expected a finite number"),
        (["--subsample", "nan"], "embed.subsample = nan"),
        (["--seed", "-1", "--mode", "svd"], "embed.seed = -1 is not allowed"),
        (["--seed", str(2**70)], "embed.seed"),
        (["--mode", "svd", "--straggle", "0:4"], "--mode svd trains nothing"),
        (["--mode", "async", "--nproc", "2", "--straggle", "0:4"], "rank 0 is the parameter"),
        (["--eval-words", "2"], "embed.eval_words = 2 is not allowed; expected >= 3"),
        (["--batch", "10000000"], "--batch 10000000 is more than the 43,200 skip-gram pairs"),
        (
            ["--mode", "async", "--nproc", "3", "--batch", "30000"],
            "the smallest of 2 workers' shares holds",
        ),
    ],
)
def test_settings_that_cannot_train_exit_2_before_any_rank_starts(
    flags: list[str],
    message: str,
    reviews: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--lr inf crashed encoding the config (exit 1, a traceback); --seed -1 crashed in numpy;
    a --straggle of the server or of an SVD run slowed nothing and said nothing; a --batch
    above every pair a worker could draw trained no step and ended `ok` with SGNS loss 0.0000
    and its random start written as the vectors."""

    def no_ranks(*_args: object, **_kw: object) -> None:
        raise AssertionError("ranks were started")

    monkeypatch.setattr(embed_cli, "launch", no_ranks)
    argv = ["embed", "--input", str(reviews), "--run-dir", str(tmp_path / "run"), "--dim", "8"]
    assert sentitop([*argv, *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "run" / "summary.json").exists()


def test_max_pairs_counts_every_pair_sub_sampling_could_keep() -> None:
    corpus = Corpus(
        ids=(np.arange(20) % 5).astype(np.int32),
        doc_starts=np.array([0, 1, 4, 12, 20]),
        itos=list("abcde"),
        counts=np.full(5, 4, dtype=np.int64),
        raw_tokens=20,
    )
    for window in (1, 2, 3, 7, 50):
        centres, _ = skipgram_pairs(corpus.ids, corpus.doc_of(), window)
        assert max_pairs(corpus, (0, 4), window) == len(centres)
    kept, _, _ = epoch_pairs(corpus, (0, 4), window=3, subsample=1e-3, seed=0)
    assert len(kept) <= max_pairs(corpus, (0, 4), 3)


def test_a_window_past_the_longest_review_counts_what_the_longest_allows(reviews: Path) -> None:
    """--window 100000 crashed the SVD's chunked count (a broadcast ValueError) and made the
    reference loop 100000 times over the corpus; no pair lies farther apart than the longest
    document allows."""
    from engine.embeddings.corpus import build_corpus
    from engine.embeddings.sources import Sources

    corpus = build_corpus(Sources([str(reviews)]), min_count=5, max_vocab=1000)
    assert corpus.reach(100_000) == 11 and corpus.reach(3) == 3  # 12-word reviews
    assert np.array_equal(cooccurrence(corpus, 20, 100_000), cooccurrence(corpus, 20, 11))
    assert svd_mod.cooccurrence(corpus, 100_000, chunk=1000).nnz > 0
    for window in (2, 11):  # chunks shorter than a distance, and exactly as long
        whole = svd_mod.cooccurrence(corpus, window)
        chunked = svd_mod.cooccurrence(corpus, window, chunk=7)
        assert abs(whole - chunked).max() < 1e-9


def test_nearest_neighbours_never_list_the_word_itself() -> None:
    vectors = np.random.default_rng(0).normal(size=(3, 4))
    near = nearest_neighbours(vectors, ["a", "b", "c"], ["a", "c"], k=5)
    assert near == {"a": sorted(near["a"], key=["b", "c"].index), "c": near["c"]}
    assert all(word not in near[word] and len(near[word]) == 2 for word in near)
    assert nearest_neighbours(np.ones((1, 4)), ["a"], ["a"]) == {"a": []}


def _dataset(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    assert sentitop(["synth", "--dataset", str(folder), "--reviews", "300", "--json"]) == 0
    return folder


@pytest.mark.parametrize("damage", ["corrupt h5", "no folder", "short vocab"])
def test_a_broken_data_folder_is_named(
    damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A corrupt dataset.h5 crashed with h5py's OSError traceback; a vocab.json shorter than
    the ids with an IndexError; a missing folder read as an unreadable vocab.json."""
    folder = _dataset(tmp_path)
    capsys.readouterr()
    if damage == "corrupt h5":
        (folder / "dataset.h5").write_bytes(b"not hdf5 at all")
        expected = "not a readable HDF5 file"
    elif damage == "no folder":
        folder = tmp_path / "nowhere"
        expected = "--data " + str(folder) + ": no such folder"
    else:
        (folder / "vocab.json").write_text(json.dumps({"itos": ["<pad>", "<unk>", "word"]}))
        expected = "come from different runs"
    argv = ["embed", "--data", str(folder), "--run-dir", str(tmp_path / "run"), "--mode", "svd"]
    assert sentitop(argv) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_a_dataset_folder_trains_svd_vectors(tmp_path: Path) -> None:
    """The control: the same folder, undamaged, gives vectors."""
    folder = _dataset(tmp_path)
    cfg = EmbedConfig(run_dir=str(tmp_path / "run"), data_dir=str(folder), mode="svd", dim=8)
    summary = run_local(cfg, 1, on_line=lambda *_: None)
    assert summary["status"] == "ok" and summary["vocab"] > 8


def test_config_files_get_the_same_checks_as_flags() -> None:
    """`python -m engine.embeddings --config FILE` bypasses the option parsers."""
    with pytest.raises(ConfigError, match="straggle"):
        EmbedConfig(run_dir="r", input="x", straggle={1: float("inf")})
    with pytest.raises(ConfigError, match="lr"):
        EmbedConfig.from_dict({"run_dir": "r", "input": "x", "lr": float("nan")})


def test_a_file_without_json_records_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Random bytes read "no record with any word in its `reviewText` field", a field the file
    never had; a JSON-lines file whose texts are empty keeps that message."""
    binary = tmp_path / "reviews.jsonl"
    binary.write_bytes(np.random.default_rng(3).bytes(5000))
    blank = tmp_path / "blank.jsonl"
    blank.write_text('{"reviewText": ""}\n' * 5)
    for path, expected in (
        (binary, "none of its first lines is a JSON record"),
        (blank, "no record with any word in its `reviewText` field (5 line(s) passed over)"),
    ):
        argv = ["embed", "--input", str(path), "--run-dir", str(tmp_path / "run"), "--mode", "svd"]
        assert sentitop(argv) == 2
        assert expected in capsys.readouterr().err


def test_a_vocabulary_too_small_to_judge_is_refused_not_scored_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Over two words the centred PIP loss is 0.0000 for any vectors: `--eval-words 2`, or a
    two-word vocabulary, printed a perfect score for random vectors."""
    pair = tmp_path / "pair.jsonl"
    pair.write_text('{"reviewText": "alpha beta"}\n' * 50)
    argv = ["embed", "--input", str(pair), "--run-dir", str(tmp_path / "run"), "--mode", "svd"]
    assert sentitop([*argv, "--dim", "1"]) == 2
    assert "cannot be judged on fewer than 3 words" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()

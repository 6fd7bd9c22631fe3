"""The run folder of `sentitop embed`: what a failed, interrupted or repeated run leaves.

Nothing here needs the shared data: the corpus is :func:`write_topic_reviews`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from engine.embeddings import cli as embed_cli
from engine.embeddings import svd as svd_mod
from engine.embeddings.cli import run_local
from engine.embeddings.config import EmbedConfig
from engine.errors import ConfigError
from engine.events import read_events
from engine.sentiment.pretrained import load_pretrained
from tests.embeddings.topics import write_topic_reviews
from tui.cli import main as sentitop


def _quiet(rank: int, stream: str, line: str) -> None:
    """A launcher line handler that keeps the test output clean."""


def _svd(run: Path, source: Path, **kw: object) -> dict[str, object]:
    cfg = EmbedConfig(run_dir=str(run), input=str(source), mode="svd", dim=8, **kw)  # type: ignore[arg-type]
    return run_local(cfg, 1, on_line=_quiet)


def _words(run: Path) -> list[str]:
    with np.load(run / "corpus.npz") as z:
        return list(json.loads(str(z["itos"])))


def _prepare_ends(run: Path) -> list[str]:
    """Status of each `stage_end` of the prepare stage, in order."""
    return [
        e["status"]
        for e in read_events(run / "events.jsonl")
        if e["type"] == "stage_end" and e.get("stage") == "prepare"
    ]


def _tail(run: Path, n: int) -> list[tuple[str, str | None, str | None]]:
    events = list(read_events(run / "events.jsonl"))[-n:]
    return [(e["type"], e.get("stage"), e.get("status")) for e in events]


@pytest.mark.parametrize("under", [False, True])
def test_a_run_dir_that_is_a_file_is_named_not_a_traceback(
    under: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It crashed (exit 1) with FileExistsError / NotADirectoryError from the events file."""
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    run = a_file / "sub" if under else a_file
    argv = ["embed", "--input", str(reviews), "--run-dir", str(run), "--mode", "svd"]
    assert sentitop(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith("bad configuration: --run-dir")
    assert ("cannot be created or written" if under else "is a file, not a folder") in err
    assert a_file.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders")
def test_a_read_only_run_dir_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        argv = ["embed", "--input", str(reviews), "--run-dir", str(locked), "--mode", "svd"]
        assert sentitop(argv) == 2
        assert "cannot be created or written" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)


def test_a_refused_input_leaves_no_run_folder_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad input left RUN_DIR (and the folders above it that the run made) holding an
    events.jsonl of one `stage_start`; `sentitop runs` then listed it as running or stopped."""
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text('{"a": 1, "b": "x"}\n' * 20)
    run = tmp_path / "runs" / "deep" / "e1"
    argv = ["embed", "--input", str(garbage), "--run-dir", str(run), "--mode", "svd"]
    assert sentitop(argv) == 2
    assert "no text field found" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_refused_input_keeps_an_earlier_finished_run_and_says_why_it_stopped(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    _svd(run, write_topic_reviews(tmp_path / "r.jsonl"))
    before = (run / "embeddings.npy").read_bytes()
    lone = tmp_path / "lone.jsonl"  # words that never share a review: nothing to learn
    lone.write_text("".join(f'{{"reviewText": "w{i % 9}"}}\n' for i in range(90)))
    with pytest.raises(Exception, match="nothing to learn"):
        _svd(run, lone, min_count=1)
    assert (run / "embeddings.npy").read_bytes() == before  # the input was refused first
    assert (run / "summary.json").is_file() and len(_words(run)) == 96
    assert _tail(run, 2) == [("error", None, None), ("stage_end", "prepare", "failed")]


def test_an_interrupted_rerun_leaves_no_old_vectors_beside_a_new_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished run's summary.json and embeddings.npy stayed while an interrupted re-run
    replaced corpus.npz: `train.model.init_embeddings` took the folder as finished and, with
    vocabularies of one size (--max-vocab caps them), gave words other words' vectors."""
    run = tmp_path / "run"
    _svd(run, write_topic_reviews(tmp_path / "a.jsonl", seed=1), max_vocab=40)
    assert load_pretrained(run).vectors.shape == (40, 8)
    other = write_topic_reviews(tmp_path / "b.jsonl", seed=2, docs=400)

    def stopped(*_args: object, **_kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(svd_mod, "svd_vectors", stopped)
    with pytest.raises(KeyboardInterrupt):
        _svd(run, other, max_vocab=40)
    assert not (run / "summary.json").exists() and not (run / "embeddings.npy").exists()
    with pytest.raises(ConfigError, match="not a finished embeddings run"):
        load_pretrained(run)
    assert _tail(run, 2) == [("error", None, None), ("stage_end", "svd", "interrupted")]
    warnings = [e for e in read_events(run / "events.jsonl") if e["type"] == "warning"]
    assert [w["code"] for w in warnings] == ["replaced_run"]


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), SystemExit(143)])
def test_stopped_training_ends_its_stage_in_the_events(
    stop: BaseException, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranks stopped by Ctrl-C or SIGTERM cannot say so: the launcher appends the end."""
    run = tmp_path / "run"

    def stopped(*_args: object, **_kw: object) -> None:
        raise stop

    monkeypatch.setattr(embed_cli, "launch", stopped)
    cfg = EmbedConfig(
        run_dir=str(run), input=str(write_topic_reviews(tmp_path / "r.jsonl")), dim=8, batch=64
    )
    with pytest.raises(type(stop)):
        run_local(cfg, 1, on_line=_quiet)
    events = list(read_events(run / "events.jsonl"))
    assert (events[-1]["type"], events[-1]["stage"], events[-1]["status"]) == (
        "stage_end", "train", "interrupted",
    )  # fmt: skip
    expected = (
        "interrupted (Ctrl-C)" if isinstance(stop, KeyboardInterrupt) else "terminated (SIGTERM)"
    )
    assert events[-2] == {**events[-2], "type": "error", "message": expected}
    assert not (run / "summary.json").exists()


def test_the_prepared_corpus_is_read_again_when_the_input_file_changes(tmp_path: Path) -> None:
    """The cache key held the input's path only: a review file rewritten in place (or a file
    added to an input folder) was not read again, and the old corpus was reused."""
    reviews = tmp_path / "reviews.jsonl"
    run = tmp_path / "run"
    write_topic_reviews(reviews)
    _svd(run, reviews)
    assert len(_words(run)) == 96
    write_topic_reviews(reviews, docs=480, words=12, seed=3)
    lines = reviews.read_text().splitlines()
    reviews.write_text("\n".join(line.replace("topica", "fresh") for line in lines) + "\n")
    _svd(run, reviews)
    assert any(w.startswith("fresh") for w in _words(run))
    assert _prepare_ends(run) == ["ok"]  # each run's events file holds its own events
    _svd(run, reviews)  # unchanged now: reused
    assert _prepare_ends(run) == ["cached"]


def test_a_preparation_cut_short_is_not_reused_as_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prepare.json was rewritten last but removed never: a run cut after writing corpus.npz
    (a full disk here) left the old key beside the new corpus, and the next run with the old
    settings reused a corpus of other text."""
    run = tmp_path / "run"
    first = write_topic_reviews(tmp_path / "a.jsonl")
    _svd(run, first)
    words = _words(run)
    second = tmp_path / "b.jsonl"
    second.write_text(first.read_text().replace("topicb", "other"))
    real_savez = np.savez

    def full_disk(path: object, **arrays: object) -> None:
        if str(path).endswith("reference.npz"):
            raise OSError(28, "No space left on device")
        real_savez(path, **arrays)  # type: ignore[arg-type]

    monkeypatch.setattr(np, "savez", full_disk)  # corpus.npz is written, reference.npz not
    with pytest.raises(OSError, match="No space"):
        _svd(run, second)
    assert _prepare_ends(run) == ["failed"]
    monkeypatch.setattr(np, "savez", real_savez)
    _svd(run, first)
    assert _words(run) == words
    assert _prepare_ends(run) == ["ok"]  # not `cached`


def test_a_training_run_folder_is_not_taken_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--run-dir` of a `sentitop train` run: embed replaced (now: removed first) its
    summary.json."""
    run = tmp_path / "train-run"
    run.mkdir()
    summary = json.dumps({"status": "ok", "accuracy": 0.9, "epochs": 3})
    (run / "summary.json").write_text(summary)
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    argv = ["embed", "--input", str(reviews), "--run-dir", str(run), "--mode", "svd"]
    assert sentitop(argv) == 2
    assert "holds another kind of run" in capsys.readouterr().err
    assert (run / "summary.json").read_text() == summary
    assert sorted(p.name for p in run.iterdir()) == ["summary.json"]

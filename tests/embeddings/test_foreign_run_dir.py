"""`--run-dir` of another workload (an interrupted training run, a preprocessed dataset) is
refused before anything in it changes; an embeddings run's own folder is still reused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.embeddings.cli import main as engine_main
from tests.embeddings.topics import write_topic_reviews
from tui.cli import main as sentitop

EVENTS = json.dumps({"type": "stage_start", "t": 1.0, "rank": 0, "stage": "train"}) + "\n"


def _training_run(folder: Path) -> None:
    """What an interrupted `sentitop train` leaves: no summary.json yet."""
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "latest.pt").write_bytes(b"weights")
    (folder / "train_config.json").write_text("{}")
    (folder / "model.json").write_text("{}")
    (folder / "events.jsonl").write_text(EVENTS)


def _dataset(folder: Path) -> None:
    """A preprocessed dataset folder."""
    folder.mkdir(parents=True)
    for name in ("dataset.h5", "vocab.json", "stats.json"):
        (folder / name).write_text(name)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("make", "held"),
    [
        (_training_run, "a sentiment training run: checkpoints/, model.json, train_config.json"),
        (_dataset, "a preprocessed dataset: dataset.h5, stats.json, vocab.json"),
    ],
)
@pytest.mark.parametrize("entry", ["sentitop", "prepare-only"])
def test_another_workloads_folder_is_refused_and_left_as_it_was(
    make: Callable[[Path], None],
    held: str,
    entry: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Exit 0 before: the training run's events.jsonl was emptied and corpus.npz,
    embeddings.npy and an embeddings summary.json were written among its files."""
    run = tmp_path / "taken"
    make(run)
    before = _snapshot(run)
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    flags = ["--input", str(reviews), "--run-dir", str(run), "--dim", "8"]
    if entry == "sentitop":
        assert sentitop(["embed", *flags, "--mode", "svd"]) == 2
    else:
        assert engine_main([*flags, "--prepare-only"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bad configuration: --run-dir {run} holds another kind of run ({held})")
    assert "hint: choose another --run-dir" in err
    assert _snapshot(run) == before
    assert sorted(p.name for p in run.iterdir()) == sorted({p.split("/")[0] for p in before})


def test_a_folder_with_a_single_foreign_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "train_config.json").write_text("{}")
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    argv = ["embed", "--input", str(reviews), "--run-dir", str(run), "--mode", "svd"]
    assert sentitop(argv) == 2
    assert "(a sentiment training run: train_config.json)" in capsys.readouterr().err
    assert [p.name for p in run.iterdir()] == ["train_config.json"]


def test_an_embeddings_run_folder_and_an_unfinished_one_are_still_reused(tmp_path: Path) -> None:
    """Its own files (embed_config.json, prepare.json, events.jsonl...) are not another
    workload's: a re-run replaces the run, finished or stopped."""
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    run = tmp_path / "run"
    argv = ["embed", "--input", str(reviews), "--run-dir", str(run), "--mode", "svd", "--dim", "8"]
    assert sentitop(argv) == 0
    assert sentitop(argv) == 0
    (run / "summary.json").unlink()  # as a stopped run leaves it
    assert sentitop(argv) == 0
    assert json.loads((run / "summary.json").read_text())["workload"] == "embeddings"

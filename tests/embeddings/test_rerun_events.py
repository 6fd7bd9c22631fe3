"""A re-run into the same --run-dir starts a fresh events.jsonl, as it replaces the summary and
vectors: a replay showed both runs mixed (no shared data needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.embeddings.cli import main, run_local
from engine.embeddings.config import EmbedConfig
from engine.events import read_events
from tests.embeddings.topics import write_topic_reviews


def _quiet(rank: int, stream: str, line: str) -> None:
    """A launcher line handler that keeps the test output clean."""


def _svd(run: Path, reviews: Path) -> None:
    run_local(EmbedConfig(run_dir=str(run), input=str(reviews), mode="svd", dim=8), 1,
              on_line=_quiet)  # fmt: skip


def _types(run: Path) -> list[str]:
    return [e["type"] for e in read_events(run / "events.jsonl")]


def test_a_rerun_replaces_the_events_of_the_finished_run(tmp_path: Path) -> None:
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    run = tmp_path / "run"
    _svd(run, reviews)
    first = _types(run)
    assert first.count("summary") == 2  # prepare's and the vectors'
    _svd(run, reviews)
    events = list(read_events(run / "events.jsonl"))
    assert [e["type"] for e in events].count("summary") == 1  # the prepared corpus is reused
    assert sum(e["type"] == "stage_end" and e["stage"] == "svd" for e in events) == 1
    warning = events[0]
    assert (warning["type"], warning["code"]) == ("warning", "replaced_run")
    assert "summary.json, embeddings.npy and events.jsonl are kept in" in warning["message"]
    assert not (run / "previous").exists()  # kept until the re-run finished


def test_a_rerun_after_a_stopped_run_says_its_events_are_replaced(tmp_path: Path) -> None:
    """A folder with only an earlier run's events (stopped before it finished)."""
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    run = tmp_path / "run"
    run.mkdir()
    old = {"type": "stage_start", "t": 1.0, "rank": 0, "stage": "prepare"}
    (run / "events.jsonl").write_text(json.dumps(old) + "\n")
    _svd(run, reviews)
    events = list(read_events(run / "events.jsonl"))
    assert events[0]["type"] == "stage_start" and events[0]["t"] != 1.0  # this run's, first
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert len(warnings) == 1 and "held an earlier run; its events.jsonl is removed" in warnings[0]


def test_prepare_only_also_starts_a_fresh_events_file(tmp_path: Path) -> None:
    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    run = tmp_path / "run"
    argv = ["--input", str(reviews), "--run-dir", str(run), "--dim", "8", "--prepare-only"]
    assert main(argv) == 0
    assert main(argv) == 0
    assert _types(run) == ["warning", "stage_end"]  # replaced_run, then the cached corpus


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("rebuilt", [False, True], ids=["corpus-reused", "corpus-rebuilt"])
def test_a_stopped_rerun_keeps_the_finished_run_it_was_replacing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rebuilt: bool
) -> None:
    """Ctrl-C in a re-run into a finished run's folder: the earlier vectors, corpus, summary
    and events are kept whole in RUN_DIR/previous (they were deleted at the re-run's start);
    a training run can still start from them; the next finished run removes them."""
    from engine.embeddings import svd
    from engine.sentiment.pretrained import load_pretrained

    reviews = write_topic_reviews(tmp_path / "r.jsonl")
    run = tmp_path / "run"
    _svd(run, reviews)
    before = _files(run)

    def stopped(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(svd, "run_svd", stopped)
    cfg = EmbedConfig(run_dir=str(run), input=str(reviews), mode="svd", dim=8,
                      max_docs=300 if rebuilt else None)  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        run_local(cfg, 1, on_line=_quiet)
    kept = run / "previous"
    assert not (run / "summary.json").exists() and not (run / "embeddings.npy").exists()
    after = _files(kept)
    for name in ("summary.json", "embeddings.npy", "corpus.npz", "reference.npz", "events.jsonl"):
        assert after[name] == before[name], name
    assert load_pretrained(kept).vectors.shape == (json.loads(before["summary.json"])["vocab"], 8)
    assert ((run / "corpus.npz").read_bytes() != before["corpus.npz"]) is rebuilt
    monkeypatch.undo()
    _svd(run, reviews)
    assert not kept.exists() and (run / "summary.json").is_file()

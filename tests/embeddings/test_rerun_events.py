"""A re-run into the same --run-dir starts a fresh events.jsonl, as it replaces the summary and
vectors: a replay showed both runs mixed (no shared data needed)."""

from __future__ import annotations

import json
from pathlib import Path

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
    assert "summary.json, embeddings.npy and events.jsonl are removed" in warning["message"]


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

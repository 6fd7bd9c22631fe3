"""What preprocessing kept is said where a run is watched: `sentitop run` showed only the
training lines and the dashboard's log nothing of it, so 34,529 lines read down to 5,410
reviews (84 % duplicates, 43 lines skipped) passed unseen."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from tui.cli.headless import HeadlessProgress
from tui.format import preprocess_line
from tui.model import RunState

STATS: dict[str, Any] = {
    "read": 34529, "title_rows": 0, "kept": 5410, "duplicates": 29076, "skipped_total": 43,
    "skipped": {"malformed_json": 9, "missing_text": 9, "empty_text": 6, "bad_rating": 13,
                "rating_out_of_range": 6, "too_long": 0},
    "positive": 4328, "negative": 1082, "train": 4895, "test": 515, "vocab_size": 5002,
    "seconds": 1.25, "input_bytes": 30_000_000,
}  # fmt: skip


def test_the_line_gives_the_counts_a_user_checks_first() -> None:
    line = preprocess_line(STATS)
    assert line.startswith("preprocess: 34,529 lines read → 5,410 reviews kept")
    assert (
        "29,076 duplicates" in line
        and "43 skipped: 13 bad rating, 9 malformed json, 9 missing text, …)" in line
    )
    assert "4,895 train / 515 test" in line and "80.0 % positive" in line
    assert "vocabulary 5,002" in line and "too long" not in line  # reasons never met: left out


def test_a_cached_dataset_and_sparse_stats_still_read_plainly() -> None:
    """A cached set says so; stats without counts (a synthetic dataset.h5) give dashes, not a
    crash: the display must never take a run down."""
    cached = preprocess_line({**STATS, "cached": True})
    assert cached.startswith("preprocess (cached): 34,529 lines read")
    bare = preprocess_line({"train": 100, "test": 10})
    assert bare.startswith("preprocess: — lines read → — reviews kept")
    assert "100 train / 10 test" in bare and "skipped" not in bare


def test_sentitop_run_prints_it_once_the_stage_ends() -> None:
    out = io.StringIO()
    console = Console(file=out, width=300, color_system=None, force_terminal=False)
    with HeadlessProgress(console, epochs=1) as display:
        display.on_event({"type": "summary", "stage": "preprocess", **STATS})
        display.on_event({"type": "summary", "stage": "train", "accuracy": 0.9})
    text = out.getvalue()
    assert text.count("preprocess: 34,529 lines read → 5,410 reviews kept") == 1
    assert "train summary" not in text  # the run's own table sums up training


def test_the_dashboard_log_gives_the_same_line() -> None:
    state = RunState()
    state.ingest_many(
        [
            {"type": "run_start", "t": 0.0, "run": "r", "profile": "p", "world_size": 2},
            {"type": "stage_start", "t": 1.0, "stage": "preprocess"},
            {"type": "summary", "t": 2.0, "stage": "preprocess", **STATS},
            {"type": "stage_end", "t": 2.0, "stage": "preprocess", "status": "ok", "seconds": 1.0},
        ]
    )
    texts = [line.text for line in state.log]
    assert preprocess_line(STATS) in texts
    assert not any("summary: written" in t for t in texts)


def test_a_cached_set_is_said_once() -> None:
    out = io.StringIO()
    console = Console(file=out, width=300, color_system=None, force_terminal=False)
    with HeadlessProgress(console, epochs=1) as display:
        display.on_event({"type": "summary", "stage": "preprocess", "cached": True, **STATS})
        display.on_event({"type": "stage_end", "stage": "preprocess", "status": "ok",
                          "cached": True})  # fmt: skip
        display.on_event({"type": "stage_end", "stage": "prepare", "status": "ok", "cached": True})
    text = out.getvalue()
    assert "preprocess (cached): 34,529 lines read" in text
    assert "preprocess: reused cached result" not in text
    assert "prepare: reused cached result" in text  # a stage with no such summary still says it

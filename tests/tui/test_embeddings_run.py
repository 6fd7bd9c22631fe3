"""The Run screen on an embeddings run: words/s, PIP loss, SGNS epochs, worker phases.

The fixture is a recorded real run (`sentitop embed --mode sync --nproc 2 --max-docs 200
--epochs 4 --batch 128 --log-every 10 --eval-words 100 --max-vocab 2000 --dim 20 --threads 1`
on the IMDB reviews); update its snapshot with `--snapshot-update` after an intended change.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from textual.widgets import DataTable, Static

from engine.events import read_events
from tests.tui.fakes import FIXTURE_RUN, build_app
from tests.tui.scenes import SIZE, settle
from tui.model import RunState
from tui.screens.run import RunScreen
from tui.widgets.line_plot import LinePlot

EMBED_RUN = Path(__file__).resolve().parent / "fixtures" / "embed-runs" / "20261121-embed"


def _events(kind: str) -> list[dict[str, Any]]:
    return [e for e in read_events(EMBED_RUN / "events.jsonl") if e["type"] == kind]


def _columns(table: DataTable[Any]) -> list[str]:
    return [c.label.plain for c in table.columns.values()]


def test_state_reads_words_per_s_pip_loss_and_worker_phases() -> None:
    state = RunState()
    state.ingest_many(read_events(EMBED_RUN / "events.jsonl"))
    start = next(e for e in _events("stage_start") if e["stage"] == "train")
    epochs, steps = _events("epoch"), _events("step")
    assert state.embeddings and state.total_epochs == start["epochs"] == len(epochs)
    assert state.world_size == start["world_size"]
    assert list(state.pip_loss.y) == [start["pip_loss"]] + [e["pip_loss"] for e in epochs]
    assert list(state.word_throughput.y) == [s["words_per_s"] for s in steps]
    assert state.words_per_s == steps[-1]["words_per_s"]
    assert [r.pip_loss for r in state.epochs] == [e["pip_loss"] for e in epochs]
    assert state.phase_names == ("compute", "comm", "straggle")
    assert set(state.phase_last) == {0, 1}
    assert state.phase_last[1]["compute"] > 0
    sentiment = RunState()
    sentiment.ingest_many(read_events(FIXTURE_RUN / "events.jsonl"))
    assert not sentiment.embeddings and len(sentiment.pip_loss) == 0
    assert "forward" in sentiment.phase_names


async def test_replay_shows_words_per_s_and_pip_loss_then_sentiment_again() -> None:
    app = build_app(replay=EMBED_RUN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.state.status == "ok"
        throughput = screen.query_one("#plot-throughput", LinePlot)
        assert throughput.border_title == "words/s"
        steps = _events("step")
        np.testing.assert_allclose(throughput.lines[0].y, [s["words_per_s"] for s in steps])
        pip = screen.query_one("#plot-shares", LinePlot)
        assert pip.border_title is not None and "PIP loss" in pip.border_title
        assert [ln.label for ln in pip.lines] == ["PIP"]
        assert pip.lines[0].y[-1] == _events("epoch")[-1]["pip_loss"]
        loss = screen.query_one("#plot-loss", LinePlot)
        assert loss.border_title is not None and loss.border_title.startswith("SGNS loss")
        epochs = screen.query_one("#epochs", DataTable)
        assert _columns(epochs) == ["ep", "SGNS", "PIP", "words/s", "time"]
        assert epochs.row_count == len(_events("epoch"))
        last = epochs.get_row_at(epochs.row_count - 1)
        assert last[2] == format(_events("epoch")[-1]["pip_loss"], ".4g")
        status = str(screen.query_one("#run-status").render())
        assert "words/s" in status and "samples/s" not in status
        assert "embeddings sync · 2 worker(s)" in status
        console = Console(width=80, record=True, file=io.StringIO())
        console.print(screen.query_one("#phases", Static).content)
        phases = console.export_text()
        assert "compute" in phases and "straggle" in phases and "forward" not in phases
        cost = screen.query_one("#plot-cost", LinePlot)  # it said "waiting for data…" forever
        assert cost.empty == "no cost recorded for this run"

        screen.start_replay(FIXTURE_RUN)  # a sentiment run after it: its own layout is back
        await settle(pilot)
        assert throughput.border_title == "samples/s"
        assert pip.border_title == "load shares"
        assert [ln.label for ln in pip.lines] == ["r0", "r1", "r2", "r3"]
        assert _columns(epochs) == ["ep", "train", "test", "acc", "F1", "time"]
        assert epochs.row_count == 3


@pytest.mark.parametrize("name", ["run-embeddings"])
def test_embeddings_run_snapshot(name: str, snap_compare: Any) -> None:
    assert snap_compare(build_app(replay=EMBED_RUN), terminal_size=SIZE, run_before=settle)

"""The Run screen shows a recovered node loss: node table, log, status line and cost plot."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from engine.events import read_events
from tests.tui.fakes import FIXTURE_RUN, build_app
from tests.tui.scenes import SIZE, settle
from tui.screens.run import RunScreen
from tui.widgets.line_plot import LinePlot
from tui.widgets.log_pane import LogPane


def with_recovery(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with a spot notice for a node after the second epoch: a checkpoint stored
    here, the node given up, and the run recovered by shrinking to the other ranks."""
    events = [dict(e) for e in events]
    second = [i for i, e in enumerate(events) if e["type"] == "epoch"][1]
    t = events[second]["t"]
    node = next(e["node"] for e in events if e["type"] == "node")
    added = [
        {"type": "spot_notice", "t": t + 1, "node": node, "action": "terminate", "at": "soon"},
        {"type": "node", "t": t + 1, "node": node, "status": "interrupting",
         "detail": "spot notice: terminate"},
        {"type": "checkpoint_stored", "t": t + 2, "epoch": 2, "step": 0, "global_step": 240,
         "path": "runs/r/train/checkpoints/latest.pt", "source": node, "seconds": 0.4},
        {"type": "node", "t": t + 3, "node": node, "status": "lost",
         "detail": "[gone] spot interruption notice; checkpointed first"},
        {"type": "node", "t": t + 4, "node": node, "status": "dropped", "detail": "left behind"},
        {"type": "recovery", "t": t + 30, "attempt": 1, "status": "ok", "lost": [node],
         "cause": "spot_interruption", "action": "shrink", "world_size": 3, "downtime_s": 29.0,
         "redone_s": 12.0, "usd": 0.0123},
    ]  # fmt: skip
    events[second + 1 : second + 1] = added
    return events


def _with_recovery(tmp_path: Path) -> Path:
    """A copy of the fixture run folder with :func:`with_recovery` applied."""
    run = tmp_path / FIXTURE_RUN.name
    shutil.copytree(FIXTURE_RUN, run)
    events = with_recovery(list(read_events(run / "events.jsonl")))
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run


async def test_a_recovery_is_marked_in_nodes_log_status_and_cost_plot(tmp_path: Path) -> None:
    app = build_app(replay=_with_recovery(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        status = str(screen.query_one("#run-status").render())
        assert "⟳ 1 recovery, 29s down, $0.012 lost" in status
        # the node table showed the node's states as they came (the fixture ends it later)
        node_lines = [(ln.source, ln.text, ln.level) for ln in screen.state.log]
        assert any(t.startswith("lost [gone]") and lv == "error" for _, t, lv in node_lines)
        assert any(t.startswith("dropped") for _, t, _ in node_lines)
        log = "\n".join(text for _, text, _ in node_lines)
        assert "recovery 1: lost" in log and "shrink -> 3 ranks" in log
        assert "spot_interruption" in log
        cost = screen.query_one("#plot-cost", LinePlot)
        (mark,) = [ln for ln in cost.lines if ln.label == "⟳1"]
        assert mark.x[1] - mark.x[0] == 29.0  # the downtime on the time axis
        assert screen.query_one(LogPane) is not None

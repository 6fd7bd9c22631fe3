"""The Run screen shows the data read rate and each rank's memory when training reports them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.tui.fakes import FIXTURE_RUN, build_app
from tests.tui.scenes import SIZE, settle
from tui.model import RunState
from tui.screens.run import RunScreen
from tui.widgets.run_status import data_and_memory


def _with_data_fields(tmp_path: Path) -> Path:
    """The fixture run with the streaming loader's fields on its last `step` event."""
    run = tmp_path / FIXTURE_RUN.name
    shutil.copytree(FIXTURE_RUN, run)
    lines = (run / "events.jsonl").read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if '"type":"step"' in line)
    event = json.loads(lines[last])
    event.update(read_mb_s=3.14, disk_mb_s=0.42, rss_mb=[310.2, 294.0, 301.0, 288.9])
    lines[last] = json.dumps(event)
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    return run


async def test_run_screen_shows_read_rate_and_memory_per_rank(tmp_path: Path) -> None:
    app = build_app(replay=_with_data_fields(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        raw = str(screen.query_one("#run-status").render())
        assert "3.14\u00a0MB/s" in raw  # a wrap never splits "3.14" from "MB/s"
        status = raw.replace("\u00a0", " ")
        assert "read 3.14 MB/s (0.42 MB/s from disk)" in status
        assert "RAM/rank 310/294/301/289 MB" in status


async def test_runs_without_the_fields_show_neither(tmp_path: Path) -> None:
    app = build_app(replay=FIXTURE_RUN)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        status = str(app.screen.query_one("#run-status").render())
        assert "read " not in status and "RAM/rank" not in status


def test_phase_events_fill_memory_per_rank_and_many_ranks_show_the_largest() -> None:
    state = RunState()
    for rank in range(6):
        state.ingest({"type": "phase", "t": 1.0, "rank": rank, "epoch": 0, "rss_mb": 100.0 + rank})
    assert state.rank_rss_mb == {r: 100.0 + r for r in range(6)}
    assert str(data_and_memory(state)) == "  RAM/rank max 105\u00a0MB"


async def test_every_status_field_stays_in_view_when_the_line_is_longer_than_the_terminal(
    tmp_path: Path,
) -> None:
    app = build_app(replay=_with_data_fields(tmp_path))
    async with app.run_test(size=(110, 40)) as pilot:  # the narrowest "wide" layout
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        strips = [strip.text for strip in screen._compositor.render_strips()]
        region = screen.query_one("#run-status").region
        shown = "\n".join(strips[region.y : region.bottom])  # the status rows on screen
        flat = " ".join(shown.split())  # a wrapped field may break across rows
        for field in ("epoch 3/3", "cost $0.499", "read 3.14 MB/s", "RAM/rank 310/294/301/289 MB"):
            assert field in flat, (field, shown)
        assert flat.index("cost $0.499") < flat.index("read 3.14")  # cost comes first


def test_a_run_stopped_before_its_first_step_reads_no_epoch_not_epoch_0() -> None:
    from tui.widgets.run_status import status_text

    state = RunState()
    state.ingest({"type": "run_start", "t": 0.0, "run": "r", "profile": "p", "world_size": 1})
    state.ingest({"type": "train_start", "t": 1.0, "rank": 0, "epochs": 12, "resumed_epoch": 0,
                  "resumed_step": 0, "steps_per_epoch": 10, "total_steps": 120})  # fmt: skip
    state.ingest({"type": "run_end", "t": 2.0, "status": "interrupted", "reason": "Ctrl-C"})
    shown = status_text(state, {"eta": None, "projected": None}).plain
    assert "epoch —/12" in shown and "epoch 0/12" not in shown

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
        status = str(screen.query_one("#run-status").render())
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
    assert str(data_and_memory(state)) == "  RAM/rank max 105 MB"


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

"""A resumed run's epochs table starts with the epochs its earlier runs trained (dim)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text

from engine.events import encode_event
from tests.tui.fakes import build_app
from tests.tui.scenes import SIZE, settle
from tests.tui.test_runs_screen import T0
from tui.model.earlier_epochs import earlier_epochs
from tui.widgets.epochs_table import EpochsTable


def leg(folder: Path, epochs: dict[int, float], resumed: tuple[Path, int] | None) -> Path:
    """A run folder's events: a run that trained ``epochs`` (epoch → test loss), resuming
    (the run, at epoch) when given; stopped (interrupted) at its end."""
    folder.mkdir(parents=True)
    start: dict[str, Any] = {"type": "run_start", "t": T0, "run": folder.name, "world_size": 1}
    plan: dict[str, Any] = {"type": "train_start", "t": T0 + 1, "rank": 0, "epochs": 8}
    if resumed is not None:
        start["resumed_from"] = resumed[0].name
        plan |= {"resumed_epoch": resumed[1], "resumed_step": 0}
    events = [start, plan]
    for n, (epoch, loss) in enumerate(sorted(epochs.items())):
        events.append({"type": "epoch", "t": T0 + 10 + n, "rank": 0, "epoch": epoch,
                       "train_loss": 0.5, "test_loss": loss, "accuracy": 0.8, "f1": 0.85,
                       "seconds": 9.0})  # fmt: skip
    events.append({"type": "run_end", "t": T0 + 60, "status": "interrupted"})
    (folder / "events.jsonl").write_text("".join(encode_event(e) + "\n" for e in events))
    return folder


def chain(tmp: Path) -> tuple[Path, Path, Path]:
    """A stopped in epoch 3 (its checkpoint mid-epoch 2), B resumed it in epoch 3 and stopped
    after epoch 4, C resumed B at epoch 5."""
    a = leg(tmp / "20261201-100000-a", {0: 0.61, 1: 0.52, 2: 0.47}, None)
    b = leg(tmp / "20261201-110000-b", {2: 0.44, 3: 0.41}, (a, 2))
    c = leg(tmp / "20261201-120000-c", {4: 0.39, 5: 0.38}, (b, 4))
    return a, b, c


def test_each_epoch_comes_from_the_newest_run_that_trained_it(tmp_path: Path) -> None:
    a, b, c = chain(tmp_path)
    found = earlier_epochs(c, 4)
    assert [(r.epoch, r.test_loss) for r in found.rows] == [(0, 0.61), (1, 0.52), (2, 0.44),
                                                             (3, 0.41)]  # fmt: skip
    assert found.runs == [a.name, b.name]
    assert earlier_epochs(b, 2).rows[-1].epoch == 1  # A's epoch 2 was trained again by B
    assert earlier_epochs(a, 0).rows == []  # resumed nothing


def test_a_gone_earlier_run_leaves_the_table_as_it_was(tmp_path: Path) -> None:
    _, b, c = chain(tmp_path)
    (b / "events.jsonl").unlink()
    found = earlier_epochs(c, 4)
    assert found.rows == [] and found.runs == []


async def test_the_replay_of_a_resumed_run_shows_every_epoch(tmp_path: Path) -> None:
    """Its table started at epoch 5: the four epochs before the checkpoint were nowhere."""
    *_, c = chain(tmp_path)
    app = build_app(replay=c, runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.pause(0.5)  # the earlier runs are read off the UI thread
        await settle(pilot)
        table = app.run_screen.query_one(EpochsTable)
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        assert [str(r[0]) for r in rows] == ["1", "2", "3", "4", "5", "6"]
        assert [str(r[2]) for r in rows] == ["0.610", "0.520", "0.440", "0.410", "0.390", "0.380"]
        dim = [isinstance(r[0], Text) and r[0].style == "dim" for r in rows]
        assert dim == [True] * 4 + [False] * 2
        assert table.border_subtitle == "dim: from 2 earlier runs"
        assert table.cursor_row == 5  # on the newest epoch

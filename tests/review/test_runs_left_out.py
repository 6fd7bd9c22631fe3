"""Run folders `sentitop runs` leaves out: every one counted and named, broken JSON placed by line
and column, figures of the wrong type refused with their field and shown literally."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tui.replay
from engine.errors import InputError
from remote.runs_store import list_runs, load_run
from tui.cli import main


def _with(folder: Path, **fields: Any) -> None:
    """``folder``'s summary.json with ``fields`` changed."""
    summary = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").write_text(json.dumps({**summary, **fields}))


@pytest.mark.parametrize("broken", [3, 4, 6])
def test_the_count_of_left_out_folders_agrees_with_the_names(
    make_run: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    broken: int,
) -> None:
    make_run("good", nproc=1, epoch_s=[5.0], sync_s=0.1)
    for i in range(broken):
        folder = make_run(f"bad{i}", nproc=1, epoch_s=[5.0], sync_s=0.1)
        (folder / "summary.json").write_text('{"status": "ok", "accu')  # killed mid-write
    assert main(["runs", "--runs-dir", str(tmp_path / "runs")]) == 0
    err = capsys.readouterr().err
    named = sum(f"bad{i}/summary.json" in err for i in range(broken))
    assert f"left out {broken} run folder(s)" in err
    if broken > named:
        assert named == 3 and err.rstrip().endswith(f"; … and {broken - named} more")
    else:
        assert named == broken and "more" not in err


def test_broken_json_is_placed_by_line_and_column(make_run: Callable[..., Path]) -> None:
    folder = make_run("r", nproc=1, epoch_s=[1.0], sync_s=0.0)
    # line 3 holds a raw tab inside a string (a file cut short and written over, say)
    (folder / "summary.json").write_text('{\n "status": "ok",\n "profile": "a\tb"\n}')
    with pytest.raises(InputError) as info:
        load_run(folder)
    assert info.value.message == (
        f"{folder / 'summary.json'}: invalid JSON at line 3, column 15 (invalid control character)"
    )
    (folder / "summary.json").write_text('{\n "status": "ok",\n "profile": "cut sh')
    with pytest.raises(InputError, match=r"invalid JSON at line 3, column 13 \(unterminated"):
        load_run(folder)
    (folder / "summary.json").write_text("")
    with pytest.raises(InputError, match=r"summary\.json: empty file, not JSON"):
        load_run(folder)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"accuracy": "[bold red]BOOM[/]"}, "accuracy: expected a number from 0 to 1, not "),
        ({"accuracy": 80.0}, "accuracy: expected a number from 0 to 1, not 80.0"),
        ({"f1": True}, "f1: expected a number from 0 to 1, not True"),
        ({"wall_s": "12"}, "wall_s: expected a number (0 or more), not '12'"),
        ({"usd": -1.5}, "usd: expected a number (0 or more), not -1.5"),
        ({"pip_loss": [1]}, "pip_loss: expected a number (0 or more), not [1]"),
        ({"world_size": "two"}, "world_size: expected a count (0 or more), not 'two'"),
        ({"cost": "free"}, "cost: expected an object, not 'free'"),
        ({"per_epoch": [{"seconds": "5"}]}, "per_epoch[0].seconds: expected a number"),
    ],
)
def test_a_figure_of_the_wrong_type_leaves_the_run_out_named_by_its_field(
    make_run: Callable[..., Path], tmp_path: Path, fields: dict[str, Any], said: str
) -> None:
    make_run("a", nproc=1, epoch_s=[5.0], sync_s=0.1)
    _with(make_run("b", nproc=1, epoch_s=[5.0], sync_s=0.1), **fields)
    unreadable: list[str] = []
    assert [r.run_id for r in list_runs(tmp_path / "runs", unreadable)] == ["a"]
    assert len(unreadable) == 1 and f"b/summary.json: {said}" in unreadable[0]


def test_markup_in_a_summary_is_shown_literally(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_run("a", nproc=1, epoch_s=[5.0], sync_s=0.1)
    _with(make_run("b", nproc=1, epoch_s=[5.0], sync_s=0.1), accuracy="[bold red]BOOM[/]")
    assert main(["runs", "--runs-dir", str(tmp_path / "runs")]) == 0
    out, err = capsys.readouterr()
    assert "accuracy: expected a number from 0 to 1, not '[bold red]BOOM[/]'" in err
    assert "BOOM" not in out and " b " not in out  # left out of the table, not listed as ok
    assert main(["runs", "--runs-dir", str(tmp_path / "runs"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)  # b: listed as unreadable, never as ok
    assert [(r["run"], r["status"], r["accuracy"] is None) for r in rows] == [
        ("a", "ok", False),
        ("b", "unreadable", True),
    ]
    assert "'[bold red]BOOM[/]'" in rows[1]["error"]


def test_a_huge_wrong_value_is_quoted_short(make_run: Callable[..., Path]) -> None:
    folder = make_run("b", nproc=1, epoch_s=[5.0], sync_s=0.1)
    _with(folder, samples_per_s="9" * 100_000)
    with pytest.raises(InputError, match=r"samples_per_s: expected a number") as info:
        load_run(folder)
    assert len(info.value.message) < len(str(folder)) + 120


def test_a_run_whose_events_cannot_be_read_is_left_out_not_a_traceback(
    make_run: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One run folder whose events.jsonl the user may not read (chmod 000; root, who runs CI,
    reads it anyway, so reading it is refused here as the OS would) crashed `runs`, `runs
    --json`, `report`, `plan` and `replay` with a PermissionError traceback."""
    import engine.events
    from tests.unreadable import refuse_reading

    make_run("a", nproc=1, epoch_s=[5.0], sync_s=0.1)
    locked = make_run("b", nproc=1, epoch_s=[5.0], sync_s=0.1) / "events.jsonl"
    refuse_reading(monkeypatch, locked, engine.events, tui.replay)
    runs = tmp_path / "runs"
    assert main(["runs", "--runs-dir", str(runs)]) == 0
    out, err = capsys.readouterr()
    assert f"{locked}: cannot be read: Permission denied" in err and "│ a " in out
    assert main(["runs", "--runs-dir", str(runs), "--json"]) == 0
    rows = {r["run"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["a"]["status"] == "ok" and rows["b"]["status"] == "unreadable"
    assert main(["plan", "profiles/local.yaml", "--runs-dir", str(runs)]) == 0
    assert "left out 1 run folder(s) that cannot be read" in capsys.readouterr().err
    assert main(["report", str(locked.parent), "--output", str(tmp_path / "rep")]) == 2
    assert "cannot be read: Permission denied" in capsys.readouterr().err
    assert main(["replay", str(locked.parent)]) == 2
    assert f"{locked}: cannot be read: Permission denied" in capsys.readouterr().err
    (locked.parent / "summary.json").unlink()  # no summary: only its events could say more
    assert main(["runs", "--runs-dir", str(runs)]) == 0
    assert "ended without a summary: b (unreadable)" in capsys.readouterr().err
    assert main(["runs", "--runs-dir", str(runs), "--json"]) == 0
    rows = {r["run"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["b"]["status"] == "unreadable" and rows["b"]["summary"] is False

"""Reports: Markdown with the $/hours table and five PNG plots; dashboard view data."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engine.events import JsonlFileSink
from remote.review.report import PLOTS, write_report
from remote.review.views import cost_speed_data
from remote.runs_store import import_csv, list_runs
from tests.review.conftest import SEED_CSV
from tui.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_report_of_local_runs(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_run("a", nproc=1, epoch_s=[10.0, 10.0], sync_s=0.2, tts=14.0, sweep="sw")
    make_run("b", nproc=2, epoch_s=[6.0, 6.0], sync_s=1.0, tts=9.0, sweep="sw")
    out = tmp_path / "out"
    assert (
        main(
            [
                "report",
                "sw",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--output",
                str(out),
                "--epochs",
                "4",
                "--deadline",
                "0.01",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "cheapest within 0.6 min: local ×2 proc" in printed  # 0.01 h; only it: 24 s
    for name in PLOTS.values():
        data = (out / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000, name
    text = (out / "report.md").read_text()
    assert "| local ×2 proc | 2 | local CPU |" in text
    assert "speedup 1.67, efficiency 0.83 (by time to threshold 1.56 / 0.78)" in text
    assert "h for 4 ep" in text and "Cheapest within 0.6 min: local ×2 proc" in text
    for name in PLOTS.values():
        assert f"]({name})" in text


@pytest.mark.slow
def test_report_of_the_seed_study_without_deadline_pick(tmp_path: Path) -> None:
    report = write_report(import_csv(SEED_CSV), tmp_path, deadline_h=1.0)
    text = report.markdown.read_text()
    assert report.pick is None
    assert "No configuration meets the 1 h deadline" in text and "2×g3.16xlarge at 2.65 h" in text
    assert (
        "| 4×g3.4xlarge | 4 | M60 | 4.56 | 1,397.3 | 13,973 | 3.88 | $17.69 | 2.57 | 0.64 |" in text
    )


def test_view_data(make_run: Callable[..., Path], tmp_path: Path) -> None:
    data = cost_speed_data(import_csv(SEED_CSV), deadline_h=4.0)
    assert [p.label for p in data.points if p.is_pick] == ["4×g3.4xlarge"]
    assert data.front[0] == pytest.approx((2.65, 24.168)) and all(p.on_front for p in data.points)
    make_run("failed", nproc=1, epoch_s=[], sync_s=0.0, status="failed")
    empty = cost_speed_data(list_runs(tmp_path / "runs"))
    assert not empty.points and "finished at least one epoch" in empty.message


def test_cost_speed_widget_renders_points_and_bars() -> None:
    from rich.console import Console

    from tui.widgets.cost_speed import render_cost_speed

    data = cost_speed_data(import_csv(SEED_CSV), deadline_h=4.0)
    console = Console(width=90, record=True, color_system=None)
    console.print(render_cost_speed(data, 88, 20))
    text = console.export_text()
    assert "★ 4×g3.4xlarge" in text and "◆ 2×g3.16xlarge" in text
    assert "0.64  ×2.57  3.88 h  $17.69" in text and "$24.17" in text
    assert text.count("█") > 40  # efficiency bars, longest for the baseline


def test_one_configuration_is_a_dot_not_a_line_across_the_plot(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    """With one configuration the x range was that point's own dash: it filled the width."""
    from rich.console import Console

    from tui.widgets.cost_speed import render_cost_speed

    make_run("one", nproc=1, epoch_s=[50.0, 50.0], sync_s=0.0)
    data = cost_speed_data(list_runs(tmp_path / "runs"))
    assert len(data.points) == 1
    console = Console(width=80, record=True, color_system=None)
    console.print(render_cost_speed(data, 78, 16))
    text = console.export_text()
    plot_rows = [line.split("┤", 1)[1] for line in text.splitlines() if "┤" in line]
    marked = [sum(ch not in " \u2800" for ch in row) for row in plot_rows]
    assert 0 < max(marked) <= 3  # a dot (the frontier's and the point's) near the right edge
    row = plot_rows[marked.index(max(marked))]
    assert len(row.rstrip()) > len(row) * 0.9


def test_report_names_a_run_still_running_or_stopped_before_its_end(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = make_run("done", nproc=1, epoch_s=[10.0, 10.0], sync_s=0.2, tts=14.0)
    running = make_run("running", nproc=2, epoch_s=[6.0, 6.0], sync_s=1.0, tts=9.0)
    (running / "summary.json").unlink()  # a run in progress has events, no summary yet
    out = tmp_path / "out"
    argv = ["report", str(done), "running", "--runs-dir", str(tmp_path / "runs"), "-o", str(out)]
    sink = JsonlFileSink(running / "events.jsonl")  # its controller writes the events
    try:
        assert main(argv) == 2 and not out.exists()
    finally:
        sink.close()
    err = capsys.readouterr().err
    assert f"{running}: still running" in err
    assert "sentitop replay running" in err and "Traceback" not in err
    assert main(argv) == 2 and not out.exists()  # no writer any more: it was killed
    err = capsys.readouterr().err
    assert f"{running}: stopped before its end" in err and "killed or crashed" in err


def test_an_output_that_is_a_file_is_named_as_one(tmp_path: Path) -> None:
    from engine.errors import InputError

    taken = tmp_path / "report.md"
    taken.write_text("mine")
    with pytest.raises(InputError, match="is a file, not a folder"):
        write_report(import_csv(SEED_CSV), taken)
    assert taken.read_text() == "mine"


def test_an_empty_output_is_a_usage_error(
    make_run: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report RUN -o ""` wrote report.md and five PNGs into the current folder."""
    done = make_run("done", nproc=1, epoch_s=[10.0, 10.0], sync_s=0.2)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SystemExit) as exc:
        main(["report", str(done), "-o", ""])
    assert exc.value.code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_cost_speed_widget_marks_an_untrusted_speedup(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    """Two processes 5× faster than one (a slowed baseline): the report marks the ratio
    untrusted, and the dashboard's view says so too instead of drawing a plain long bar."""
    from rich.console import Console

    from tui.widgets.cost_speed import render_cost_speed

    make_run("one", nproc=1, epoch_s=[50.0, 50.0], sync_s=0.0)
    make_run("two", nproc=2, epoch_s=[10.0, 10.0], sync_s=0.5)
    make_run("four", nproc=4, epoch_s=[20.0, 20.0], sync_s=0.5)
    data = cost_speed_data(list_runs(tmp_path / "runs"))
    marked = {p.workers: p.untrusted for p in data.points}
    assert marked == {1: False, 2: True, 4: False}
    console = Console(width=100, record=True, color_system=None)
    console.print(render_cost_speed(data, 98, 20))
    text = console.export_text()
    rows = {line.split("proc")[0]: line for line in text.splitlines() if " proc " in line}
    assert "⚠ 2.50  ×5.00" in rows["local ×2 "] and "⚠" not in rows["local ×4 "]
    assert sum("⚠" in line for line in text.splitlines()) == 2  # its row and the legend
    assert "not trustworthy: super-linear by far" in text

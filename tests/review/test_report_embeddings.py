"""`sentitop report` on embeddings runs: one configuration per mode, their own columns, and a
super-linear speedup marked untrusted."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from remote.review import plots
from remote.review.metrics import series_metrics
from remote.review.report import render_markdown
from remote.runs_store import list_runs, load_run
from tui.cli import main

EMBED_RUN = (
    Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "embed-runs" / "20261121-embed"
)
"""A recorded 2-rank sync embeddings run (summary.json + events.jsonl)."""
IMDB = Path(__file__).resolve().parents[3] / "shared" / "data" / "imdb_aclImdb_labeled.jsonl.gz"
ROOT = Path(__file__).resolve().parents[2]


def embed_run(
    root: Path,
    name: str,
    *,
    mode: str,
    nproc: int,
    threads: int,
    epoch_s: float,
    pip: float = 1.2,
    words_per_s: float = 20_000.0,
) -> Path:
    """The recorded run copied to ``root/name`` and rewritten as a run of ``mode`` on ``nproc``
    processes of ``threads`` torch threads each, every epoch taking ``epoch_s``."""
    folder = root / name
    shutil.copytree(EMBED_RUN, folder)
    summary = json.loads((folder / "summary.json").read_text())
    workers = nproc - 1 if mode == "async" else nproc
    for epoch in summary["per_epoch"]:
        epoch["seconds"] = epoch_s
    summary.update(
        mode=mode, world_size=nproc, workers=workers, pip_loss=pip, words_per_s=words_per_s
    )
    (folder / "summary.json").write_text(json.dumps(summary))
    lines = []
    for line in (folder / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "stage_start" and event["stage"] == "train":
            event.update(mode=mode, world_size=nproc, workers=workers, threads=threads)
        lines.append(json.dumps(event))
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def trial(tmp_path: Path) -> Path:
    """The user trial's three runs: sync on 1 process (2 threads on a loaded box: slow), sync on
    2 processes and async (a parameter server and 1 worker), 1 thread each."""
    root = tmp_path / "rd"
    embed_run(root, "emb_sync1", mode="sync", nproc=1, threads=2, epoch_s=25.84, pip=1.26)
    embed_run(root, "emb_sync2", mode="sync", nproc=2, threads=1, epoch_s=2.0, pip=1.30)
    embed_run(root, "emb_async2", mode="async", nproc=2, threads=1, epoch_s=4.0, pip=1.25)
    return root


def _table(text: str, first: str) -> list[list[str]]:
    """Rows (header first) of the Markdown table whose header starts with ``first``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first} |"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return [rows[0], *rows[2:]]


def test_sync_and_async_runs_are_never_one_configuration(trial: Path) -> None:
    series = series_metrics(list_runs(trial))
    by_label = {c.label: c for c in series.configs}
    assert set(by_label) == {
        "local ×1 proc, sync",
        "local ×2 proc, sync",
        "local ×2 proc, async",
    }
    assert [r.run_id for r in by_label["local ×2 proc, async"].runs] == ["emb_async2"]
    assert by_label["local ×2 proc, async"].epoch_s == 4.0  # not averaged with sync's 2.0
    assert by_label["local ×2 proc, sync"].epoch_s == 2.0
    assert series.task == "embeddings"


def test_the_table_shows_what_an_embeddings_run_measures(trial: Path, tmp_path: Path) -> None:
    runs = [str(trial / n) for n in ("emb_sync1", "emb_sync2", "emb_async2")]
    assert main(["report", *runs, "-o", str(tmp_path / "rep1")]) == 0
    text = (tmp_path / "rep1" / "report.md").read_text()
    head, *rows = _table(text, "configuration")
    assert "accuracy" not in head and "samples/s" not in head and "speedup (threshold)" not in head
    cells = {row[0]: dict(zip(head, row, strict=True)) for row in rows}
    async2 = cells["local ×2 proc, async"]
    assert async2["mode"] == "async (server + 1 worker)" and async2["processes"] == "2"
    assert async2["words/s"] == "20,000" and async2["threads/rank"] == "1"
    start = json.loads((EMBED_RUN / "summary.json").read_text())["pip_loss_initial"]
    assert async2["PIP loss (start → end)"] == f"{start:.3f} → 1.250"
    assert cells["local ×1 proc, sync"]["epochs run"] == "4"
    assert "–" not in {async2[k] for k in ("words/s", "PIP loss (start → end)", "mode")}
    run_head, *run_rows = _table(text, "run")
    runs_by_id = {row[0]: dict(zip(run_head, row, strict=True)) for row in run_rows}
    assert runs_by_id["emb_sync2"]["PIP loss"] == f"{start:.3f} → 1.300"
    assert runs_by_id["emb_sync2"]["configuration"] == "local ×2 proc, sync"
    assert "the runs mix embeddings modes (async, sync)" in text
    assert "differ in model or sequence settings" not in text  # only the mode differs


def test_a_speedup_far_above_linear_is_marked_untrusted(trial: Path) -> None:
    series = series_metrics(list_runs(trial))
    sync2 = next(c for c in series.configs if c.label == "local ×2 proc, sync")
    # against the ideal of its threads in all (1: the baseline ran 2 threads on one process)
    assert sync2.speedup == pytest.approx(12.92) and sync2.efficiency == pytest.approx(12.92)
    assert sync2.untrusted
    text = render_markdown(series, None, None)
    _head, *rows = _table(text, "configuration")
    row = next(r for r in rows if r[0] == "local ×2 proc, sync")
    assert "⚠ 12.92" in row
    assert "local ×2 proc, sync: speedup 12.92, efficiency 12.92 (not trustworthy" in text
    notes = [line for line in text.splitlines() if line.startswith("- local ×2 proc, sync:")]
    assert any("super-linear by far, not trustworthy" in n for n in notes)
    # the baseline ran 2 threads on its one process: both kept 2 threads busy
    assert any("the ideal speedup is 1, not 2" in n for n in notes)


def test_the_plots_keep_modes_apart_and_say_untrusted(
    trial: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures: list[Any] = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig) or path)
    series = series_metrics(list_runs(trial))
    plots.speedup_plot(series, tmp_path / "speedup.png")
    plots.throughput_plot(series, tmp_path / "throughput.png")
    speedup, throughput = figures
    for ax in speedup.axes:
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert list(lines["by epoch time (sync)"].get_xdata()) == [1, 2]
        assert list(lines["by epoch time (async)"].get_xdata()) == [2]  # never joined to sync
        texts = [t.get_text() for t in ax.texts]
        assert sum(t.endswith("(untrusted)") for t in texts) == 2, texts  # both 2-proc points
    (ax,) = throughput.axes
    assert ax.get_ylabel() == "words / s"


def test_a_mildly_superlinear_speedup_is_noted_but_not_marked(tmp_path: Path) -> None:
    root = tmp_path / "rd"
    embed_run(root, "one", mode="sync", nproc=1, threads=1, epoch_s=10.0)
    embed_run(root, "two", mode="sync", nproc=2, threads=1, epoch_s=3.7)  # efficiency 1.35
    series = series_metrics(list_runs(root))
    two = series.configs[1]
    assert two.efficiency == pytest.approx(1.35, abs=0.01) and not two.untrusted
    assert any("superlinear" in n for n in two.notes)
    assert not any("ideal speedup" in n for n in two.notes)  # equal threads per rank
    assert "⚠" not in render_markdown(series, None, None)


def test_runs_of_one_label_with_other_threads_are_not_pooled(
    make_run: Callable[..., Path],
) -> None:
    runs = [
        load_run(make_run("a", nproc=1, epoch_s=[10.0, 10.0], sync_s=0.0, threads=1)),
        load_run(make_run("b", nproc=1, epoch_s=[6.0, 6.0], sync_s=0.0, threads=2)),
    ]
    configs = series_metrics(runs).configs
    assert sorted(c.label for c in configs) == [
        "local ×1 proc, 1 thread(s)/rank",
        "local ×1 proc, 2 thread(s)/rank",
    ]
    assert sorted(c.epoch_s for c in configs) == [6.0, 10.0]


def _embed(run: Path, *args: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "tui.cli", "embed", "--input", str(IMDB), "--run-dir", str(run)]
    small = ["--max-docs", "200", "--epochs", "2", "--dim", "20", "--batch", "128"]
    common = [*small, "--eval-words", "100", "--threads", "1", "--json"]
    out = subprocess.run(
        [*cmd, *common, *args], cwd=ROOT, capture_output=True, text=True, timeout=280
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return summary


@pytest.mark.slow
def test_real_sync_and_async_runs_report_apart(tmp_path: Path) -> None:
    if not IMDB.is_file():
        pytest.skip(f"{IMDB} not found")
    sync = _embed(tmp_path / "rd" / "sync2", "--nproc", "2")
    asyn = _embed(tmp_path / "rd" / "async2", "--nproc", "2", "--mode", "async")
    assert main(["report", str(tmp_path / "rd" / "sync2"), str(tmp_path / "rd" / "async2"),
                 "-o", str(tmp_path / "rep")]) == 0  # fmt: skip
    text = (tmp_path / "rep" / "report.md").read_text()
    head, *rows = _table(text, "configuration")
    cells = {row[0]: dict(zip(head, row, strict=True)) for row in rows}
    assert set(cells) == {"local ×2 proc, sync", "local ×2 proc, async"}
    for mode, summary in (("sync", sync), ("async", asyn)):
        row = cells[f"local ×2 proc, {mode}"]
        assert row["words/s"] == f"{summary['words_per_s']:,.0f}"
        assert row["PIP loss (start → end)"].endswith(f"→ {summary['pip_loss']:.3f}")


def test_an_async_baseline_is_named_as_its_table_row_names_it(trial: Path, tmp_path: Path) -> None:
    """The header said "async (2 worker(s))" where the table said "server + 1 worker"."""
    run = str(trial / "emb_async2")
    assert main(["report", run, "-o", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "baseline **local ×2 proc, async** (server + 1 worker)" in text
    assert "worker(s)" not in text.split("\n\n")[1]

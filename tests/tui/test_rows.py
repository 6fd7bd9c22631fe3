"""Row loaders of the Profiles, Prices and Runs tables."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from tests.tui.fakes import FIXTURE_RUN, RUNS_DIR
from tui.model.rows import (
    UNREADABLE_SUMMARY,
    RowCache,
    load_profile_rows,
    load_run_rows,
    price_rows,
    profile_row,
)

ROOT = Path(__file__).resolve().parents[2]


def test_price_rows_from_a_real_price_book() -> None:
    from remote.pricing import Catalog, InstanceType, PriceBook

    catalog = Catalog(
        [
            InstanceType(
                "g5.xlarge", "us-east-1", 1, "A10G", 24, 4, 16, 1.006, None, date(2026, 11, 11)
            ),
            InstanceType("c5.large", "us-east-1", 0, "", 0, 2, 4, None, None, date(2026, 11, 11)),
        ]
    )
    book = PriceBook.from_catalog(catalog)
    now = datetime(2026, 11, 21, tzinfo=UTC).timestamp()
    rows = {r.instance: r for r in price_rows(book, now=now)}
    g5 = rows["g5.xlarge"]
    assert (g5.gpu_model, g5.gpus, g5.vcpus, g5.on_demand_usd) == ("A10G", 1, 4, 1.006)
    assert g5.source == "bundled" and g5.age_s == pytest.approx(10 * 86400)
    assert g5.spot_usd is None
    assert rows["c5.large"].on_demand_usd is None and rows["c5.large"].age_s is None


def test_the_dashboards_price_warning_names_its_own_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Prices screen said "this command reads no network (`sentitop prices --refresh` …)":
    no command was typed, and `u` is the screen's refresh."""
    from tui.model.rows import load_price_rows

    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))  # no cached live prices
    (warning,) = [w for w in load_price_rows().warnings if "live prices" in w]
    assert "press u to fetch them" in warning and "this command" not in warning


def test_profile_rows_from_real_profile_files(tmp_path: Path) -> None:
    shutil.copy(ROOT / "profiles" / "local.yaml", tmp_path / "local.yaml")
    (tmp_path / "broken.yaml").write_text("name: broken\nprovider: ec2\nnodes: []\n")
    rows = load_profile_rows(tmp_path)
    assert [r.name for r in rows] == ["local", "broken"]  # valid first
    local, broken = rows
    assert local.valid and local.cluster == "local" and local.nodes == 1 and local.ranks == 2
    # a CPU profile is never counted as GPUs
    assert (local.gpus, local.device) == (0, "GPU" if Path("/dev/nvidia0").exists() else "CPU")
    assert local.usd_per_hour is not None and local.usd_per_hour > 0  # priced as an m5.large
    assert not broken.valid and any("nodes" in e for e in broken.errors)
    assert any(e.startswith("line ") for e in broken.errors)


def test_a_profile_whose_machines_have_no_price_is_not_valid(tmp_path: Path) -> None:
    """It read "⚠ 1 warning(s)" and `r` started a run that `run` refuses (exit 2)."""
    text = "name: odd\nprovider: ec2\nnodes: [{instance_type: zz9.mega}]\n"
    (tmp_path / "odd.yaml").write_text(text + "data: {synthetic: {size: 1MB}}\n")
    (row,) = load_profile_rows(tmp_path)
    assert not row.valid and row.errors == ["nodes[0].instance_type: no price known for 'zz9.mega'"]


def test_profile_row_duck_types_a_profile() -> None:
    @dataclass
    class Node:
        gpus: int
        count: int = 2

    @dataclass
    class Prof:
        name: str
        nodes: list[Node]
        provider: str = "ec2"

        def hourly_usd(self, catalog: object) -> float:
            return 2.5

    row = profile_row(Prof("p", [Node(2), Node(2)]), Path("profiles/p.yaml"), catalog=object())
    assert (row.name, row.nodes, row.gpus, row.usd_per_hour, row.valid) == ("p", 4, 8, 2.5, True)
    assert (row.ranks, row.device) == (8, "8× GPU")  # no catalog model: "GPU"


def test_run_rows_from_events_and_summary(tmp_path: Path) -> None:
    rows = load_run_rows(RUNS_DIR)
    assert [r.run for r in rows] == ["20261120-single", "20261121-fixture"]
    fixture = rows[1]
    assert (fixture.gpus, fixture.epochs, fixture.status) == (4, 3, "ok")
    assert fixture.usd == pytest.approx(0.4987, abs=1e-3)
    # summary.json wins over events
    shutil.copytree(FIXTURE_RUN, tmp_path / "r1")
    (tmp_path / "r1" / "summary.json").write_text(json.dumps({"run": "r1", "usd": 9.5, "gpus": 8}))
    (tmp_path / "empty").mkdir()
    rows = load_run_rows(tmp_path)
    assert [(r.run, r.usd, r.gpus) for r in rows] == [("r1", 9.5, 8)]
    assert load_run_rows(tmp_path / "missing") == []


def test_a_stopped_run_shows_its_last_evaluated_epochs_f1_too(tmp_path: Path) -> None:
    """The Runs table showed a stopped run's last epoch accuracy (dimmed) beside "F1 —"."""
    shutil.copytree(FIXTURE_RUN, tmp_path / "r1")
    per_epoch = [{"epoch": 0, "accuracy": 0.8, "f1": 0.85}, {"epoch": 1, "accuracy": 0.87,
                 "f1": 0.93}, {"epoch": 2, "accuracy": None}]  # fmt: skip
    summary = {"run": "r1", "status": "interrupted", "accuracy": None,
               "train": {"partial": True, "per_epoch": per_epoch}}  # fmt: skip
    (tmp_path / "r1" / "summary.json").write_text(json.dumps(summary))
    (row,) = load_run_rows(tmp_path)
    assert (row.accuracy, row.f1, row.accuracy_epoch) == (0.87, 0.93, 2)


def test_a_summary_with_impossible_figures_is_read_from_the_events(tmp_path: Path) -> None:
    """A string where a number belongs ("epochs": "two") crashed the Runs screen (int("two"));
    a markup string as accuracy read as an ok run with blank columns. Broken or list-shaped
    JSON too: the figures come from the events, the status says the summary is unreadable
    (it read "ok", as a sound run), and each row is named by its folder (copies of one run
    were six rows with the same name)."""
    for name, bad in (("r1", {"epochs": "two"}), ("r2", {"accuracy": "[bold red]BOOM[/]"})):
        shutil.copytree(FIXTURE_RUN, tmp_path / name)
        (tmp_path / name / "summary.json").write_text(json.dumps({"run": name, "usd": 9.5, **bad}))
    for name, text in (("r3", '{"run": "r3", "usd": '), ("r4", "[1, 2, 3]")):
        shutil.copytree(FIXTURE_RUN, tmp_path / name)
        (tmp_path / name / "summary.json").write_text(text)
    rows = load_run_rows(tmp_path)
    assert [(r.run, r.epochs, r.status) for r in rows] == [
        (name, 3, UNREADABLE_SUMMARY) for name in ("r1", "r2", "r3", "r4")
    ]  # the events' figures
    assert all(r.usd == pytest.approx(0.4987, abs=1e-3) for r in rows)  # not the summary's 9.5


WRITER = """
import sys, time
from engine.events import Emitter, JsonlFileSink
emitter = Emitter(JsonlFileSink(sys.argv[1]), run="r")
emitter.emit("run_start", profile="p")
print("WRITING", flush=True)
time.sleep(60)
"""


def test_a_run_whose_process_died_reads_unfinished_not_running(tmp_path: Path) -> None:
    """A run folder whose events stop without `run_end` was listed `running` forever after its
    process was killed. Its controller holds a lock on events.jsonl while it writes, so the
    Runs screen tells a live run from a dead one, also for a row it cached while live."""
    import os
    import signal
    import subprocess
    import sys

    run = tmp_path / "20991231-000000-p"
    run.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(run / "events.jsonl")], env=env,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "WRITING\n"
        cache: RowCache = {}
        (live,) = load_run_rows(tmp_path, cache)
        assert live.status == "running"
        proc.send_signal(signal.SIGKILL)  # no chance to write run_end or close anything
        proc.wait(timeout=30)
        (dead,) = load_run_rows(tmp_path, cache)  # same files, same stamp: the cached row
        assert dead.status == "unfinished"
        (fresh,) = load_run_rows(tmp_path)
        assert fresh.status == "unfinished"
    finally:
        proc.kill()
        proc.wait()


def test_a_profile_row_knows_when_its_file_changed(tmp_path: Path) -> None:
    """`r` ran the settings read at the last reload after the file had been edited (even into
    invalid YAML) with no word: the row now tells the Profiles screen to read it again."""
    shutil.copy(ROOT / "profiles" / "local.yaml", tmp_path / "local.yaml")
    (row,) = load_profile_rows(tmp_path)
    assert row.valid and not row.changed_on_disk()
    with (tmp_path / "local.yaml").open("a") as fh:
        fh.write("train: [\n")
    assert row.changed_on_disk()
    (tmp_path / "local.yaml").unlink()
    assert row.changed_on_disk()

"""`sentitop runs` shows each run's workload with its own quality and rate columns."""

from __future__ import annotations

import json
from pathlib import Path

from tui.cli import main

EMBED_RUNS = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "embed-runs"


def test_runs_json_lists_embeddings_run_with_words_per_s_and_pip(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["runs", "--runs-dir", str(EMBED_RUNS), "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["workload"] == "embeddings"
    assert run["words_per_s"] > 0
    assert 0.0 <= run["pip_loss"] <= 2.0


def test_runs_table_shows_pip_loss_and_words_per_s(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["runs", "--runs-dir", str(EMBED_RUNS)]) == 0
    out = capsys.readouterr().out
    assert "embeddings" in out and "PIP " in out and " w/s" in out


def _events(folder: Path, *events: dict[str, object]) -> None:
    folder.mkdir(parents=True)
    lines = [json.dumps({"type": e["type"], "t": 1796064786.0 + i, "rank": 0, **e},
                        separators=(",", ":")) for i, e in enumerate(events)]  # fmt: skip
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")


def test_an_embeddings_run_stopped_before_training_is_not_called_killed(
    tmp_path: Path,
    capsys,  # type: ignore[no-untyped-def]
) -> None:
    """A trial's `sentitop embed` stopped with Ctrl-C right after its prepare stage (the events
    end "interrupted") was listed with the killed and crashed runs; one stopped during a re-run
    kept its earlier finished vectors in previous/, which `runs` did not say. A run whose
    events just stop is still named as killed or crashed."""
    prepared = (
        {"type": "stage_start", "stage": "prepare", "input": ["r.jsonl"]},
        {"type": "stage_end", "stage": "prepare", "status": "ok", "seconds": 9.6},
    )
    _events(
        tmp_path / "emb-int",
        *prepared,
        {"type": "error", "message": "interrupted (Ctrl-C)"},
        {"type": "stage_end", "stage": "train", "status": "interrupted", "seconds": 2.7},
    )
    _events(
        tmp_path / "emb-kill",
        *prepared,
        {"type": "stage_start", "stage": "train", "workload": "embeddings", "mode": "sync"},
    )
    _events(
        tmp_path / "emb-bad",
        {"type": "stage_start", "stage": "prepare", "input": ["x"]},
        {"type": "stage_end", "stage": "prepare", "status": "failed", "seconds": 0.1},
    )
    (tmp_path / "emb-int" / "previous").mkdir()
    (tmp_path / "emb-int" / "previous" / "summary.json").write_text("{}")
    assert main(["runs", "--runs-dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert (
        "note: 2 run(s) ended without a summary: emb-bad (failed), emb-int (interrupted; its "
        "earlier finished run is kept in previous/)" in err
    )
    assert "killed or crashed): emb-kill\n" in err


def test_a_run_that_ended_but_lost_its_summary_is_not_called_killed(
    tmp_path: Path,
    capsys,  # type: ignore[no-untyped-def]
) -> None:
    """A `sentitop run` folder whose runner wrote run_end (its summary.json deleted since) was
    named "stopped before their end (... killed or crashed)" while the Runs screen showed how it
    ended; one whose events just stop still is."""
    _events(tmp_path / "run-ok", {"type": "run_start"}, {"type": "run_end", "status": "ok"})
    _events(tmp_path / "run-failed", {"type": "run_start"},
            {"type": "stage_end", "stage": "train", "status": "ok"},
            {"type": "run_end", "status": "failed", "reason": "x"})  # fmt: skip
    _events(tmp_path / "run-killed", {"type": "run_start"})
    assert main(["runs", "--runs-dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "note: 2 run(s) ended without a summary: run-failed (failed), run-ok (ok)" in err
    assert "killed or crashed): run-killed\n" in err


def test_a_narrow_terminal_loses_columns_not_run_ids(
    make_run,
    monkeypatch,
    capsys,  # type: ignore[no-untyped-def]
) -> None:
    """At 80-100 columns the table cut every run id ("20261130-185303-tri…"), which `report`
    and `--resume` take, and at 160 it still showed an empty sweep column."""
    ids = ["20261130-185303-trialD-ok", "20261130-185334-trialD-rel"]
    for i, name in enumerate(ids):
        root = make_run(name, nproc=1 + i, epoch_s=[5.0 + i], sync_s=0.1).parent
    for width, gone in ((200, ()), (80, ("samples/s", "median epoch s"))):
        monkeypatch.setenv("COLUMNS", str(width))
        assert main(["runs", "--runs-dir", str(root)]) == 0
        shown = capsys.readouterr()
        lines = shown.out.splitlines()
        assert max(len(line) for line in lines) <= width
        assert all(any(f"│ {run} " in line for line in lines) for run in ids)  # whole
        header = next(line for line in lines if "┃ run" in line)
        assert "accuracy / PIP" in header and "sweep" not in header  # no run has a sweep
        assert all(col not in header for col in gone)
        assert ("left out to fit 80 columns" in shown.err) == bool(gone)


def test_a_very_narrow_terminal_loses_figures_not_ids_or_digits(
    make_run,
    monkeypatch,
    capsys,  # type: ignore[no-untyped-def]
) -> None:
    """At 50-60 columns, with every optional column gone, the table still cut the run ids
    ("20261202-081052-local…"), statuses ("interru…") and every $ ("0.00…", read as zero)."""
    ids = ["20261202-081052-local-np1", "20261202-080811-local"]
    root = make_run(ids[0], nproc=1, epoch_s=[5.0], sync_s=0.1).parent
    make_run(ids[1], nproc=1, epoch_s=[5.0], sync_s=0.1, status="interrupted")
    for width in (60, 50, 40):
        monkeypatch.setenv("COLUMNS", str(width))
        assert main(["runs", "--runs-dir", str(root)]) == 0
        shown = capsys.readouterr()
        lines = shown.out.splitlines()
        assert all(any(f"│ {run} " in line for line in lines) for run in ids), width  # whole
        assert not any("…" in line for line in lines if "│" in line or "┃" in line), width
        assert "left out to fit" in shown.err


def test_json_lists_the_runs_without_a_summary_too(
    make_run,
    tmp_path: Path,
    capsys,  # type: ignore[no-untyped-def]
) -> None:
    """`runs --json` left out every run without a summary.json (running, killed, summary lost)
    and every folder it could not read: a script watching runs saw none of them, only the
    table's stderr notes said so."""
    from engine.events import JsonlFileSink

    root = make_run("done", nproc=1, epoch_s=[5.0], sync_s=0.1).parent
    _events(root / "run-lost", {"type": "run_start"}, {"type": "run_end", "status": "failed"})
    _events(root / "run-killed", {"type": "run_start"})
    _events(root / "run-live", {"type": "run_start"})
    broken = make_run("broken", nproc=1, epoch_s=[5.0], sync_s=0.1)
    (broken / "summary.json").write_text('{"status": "ok", "accu')
    sink = JsonlFileSink(root / "run-live" / "events.jsonl")
    try:
        assert main(["runs", "--runs-dir", str(root), "--json"]) == 0
    finally:
        sink.close()
    rows = {row["run"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["done"]["status"] == "ok" and rows["done"]["summary"] is True
    assert {name: rows[name]["status"] for name in ("run-lost", "run-killed", "run-live")} == {
        "run-lost": "failed",
        "run-killed": "killed",
        "run-live": "running",
    }
    for name in ("run-lost", "run-killed", "run-live", "broken"):
        assert rows[name]["summary"] is False and rows[name]["accuracy"] is None
        assert set(rows[name]) == set(rows["done"])  # one shape for every row
    assert rows["broken"]["status"] == "unreadable"
    assert "invalid JSON" in rows["broken"]["error"] and rows["done"]["error"] is None
    assert rows["run-lost"]["path"] == str(root / "run-lost")

"""Runs store: run folders, sweep tags, CSV import and its errors (file:line: field, exit 2)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.errors import InputError
from engine.events import JsonlFileSink
from remote.runs_store import CSV_COLUMNS, import_csv, list_runs, load_run, resolve_runs
from tests.review.conftest import SEED_CSV
from tui.cli import main

HEADER = "run,instance_type,count,epochs,seconds,billing"


def _csv(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    path = tmp_path / "runs.csv"
    path.write_text("# a comment line\n" + header + "\n" + "\n".join(rows) + "\n")
    return path


def test_load_run_reads_summary_events_and_sweep(make_run: Callable[..., Path]) -> None:
    folder = make_run(
        "r1",
        nproc=2,
        epoch_s=[10.0, 12.0],
        sync_s=1.0,
        prep_s=3.0,
        sweep="sw-1",
        mode="weak",
        tts=15.0,
    )
    run = load_run(folder)
    assert (run.workers, run.epochs, run.train_s, run.epoch_s) == (2, 2, 22.0, 11.0)
    assert (run.sweep, run.mode, run.label, run.hardware) == (
        "sw-1",
        "weak",
        "local ×2 proc",
        "local CPU",
    )
    assert len(run.phases) == 4 and run.eval_s == pytest.approx(1.0)
    assert run.prep_s == 3.0 and not run.data_cached
    assert run.curve and run.curve[0][0] > 0 and run.time_to_threshold_s == 15.0
    assert run.usd_per_hour == pytest.approx(0.096) and run.n_train == 1000


def test_list_and_resolve(make_run: Callable[..., Path], tmp_path: Path) -> None:
    make_run("a", nproc=1, epoch_s=[5.0], sync_s=0.1, sweep="sw")
    make_run("b", nproc=2, epoch_s=[4.0], sync_s=0.3, sweep="sw")
    make_run("c", nproc=2, epoch_s=[4.0], sync_s=0.3)
    (tmp_path / "runs" / "not-a-run").mkdir()  # no summary.json: skipped by the listing
    root = tmp_path / "runs"
    assert [r.run_id for r in list_runs(root)] == ["a", "b", "c"]
    assert [r.run_id for r in resolve_runs(["sw"], root)] == ["a", "b"]
    assert [r.run_id for r in resolve_runs(["c", str(root / "a")], root)] == ["c", "a"]
    assert len(resolve_runs([str(SEED_CSV)], root)) == 3
    # one run named twice, or by its id and by its sweep, counts once
    assert [r.run_id for r in resolve_runs(["a", str(root / "a"), "sw", "./a"], root)] == ["a", "b"]
    with pytest.raises(InputError, match=r"nosuch: no run folder with summary\.json .*no sweep id"):
        resolve_runs(["nosuch"], root)
    with pytest.raises(InputError, match=r"not-a-run: no run folder with summary\.json \(tried"):
        resolve_runs([str(root / "not-a-run")], root)


def test_broken_summary_names_the_file(make_run: Callable[..., Path]) -> None:
    folder = make_run("r", nproc=1, epoch_s=[1.0], sync_s=0.0)
    (folder / "summary.json").write_text('{"status": "ok",\n "x": }')
    with pytest.raises(InputError, match=r"summary.json: invalid JSON at line 2, column 7"):
        load_run(folder)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"status": 5}, "status: expected a word such as ok, not 5"),
        ({"epochs": -3}, "epochs: expected a count (0 or more), not -3"),
        ({"epochs": "3"}, "epochs: expected a count (0 or more), not '3'"),
    ],
)
def test_a_summary_with_impossible_values_is_left_out_and_named(
    make_run: Callable[..., Path], tmp_path: Path, fields: dict[str, object], said: str
) -> None:
    make_run("a", nproc=1, epoch_s=[5.0], sync_s=0.1)
    bad = make_run("b", nproc=1, epoch_s=[5.0], sync_s=0.1)
    summary = json.loads((bad / "summary.json").read_text())
    (bad / "summary.json").write_text(json.dumps({**summary, **fields}))
    unreadable: list[str] = []
    assert [r.run_id for r in list_runs(tmp_path / "runs", unreadable)] == ["a"]
    assert len(unreadable) == 1 and f"b/summary.json: {said}" in unreadable[0]


def test_one_broken_run_does_not_hide_the_others(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_run("a", nproc=1, epoch_s=[5.0], sync_s=0.1)
    broken = make_run("b", nproc=1, epoch_s=[5.0], sync_s=0.1)
    (broken / "summary.json").write_text('{"status": "ok", "accu')  # killed mid-write
    root = tmp_path / "runs"
    unreadable: list[str] = []
    assert [r.run_id for r in list_runs(root, unreadable)] == ["a"]
    assert len(unreadable) == 1 and "b/summary.json: invalid JSON at line 1" in unreadable[0]
    assert main(["runs", "--runs-dir", str(root)]) == 0
    captured = capsys.readouterr()
    assert "left out 1 run folder(s) that cannot be read" in captured.err and "a" in captured.out
    running = root / "20991231-000000-running"
    running.mkdir()
    (running / "events.jsonl").write_text('{"type": "run_start", "t": 1.0}\n')
    assert main(["runs", "--runs-dir", str(root)]) == 0
    err = capsys.readouterr().err  # nobody writes its events: it was killed
    assert "1 run(s) stopped before their end" in err and running.name in err
    assert "billing" not in err  # no profile recorded: nothing says it ran in the cloud
    (running / "profile.yaml").write_text("name: g5\nprovider: ec2\n")
    assert main(["runs", "--runs-dir", str(root)]) == 0
    err = capsys.readouterr().err  # a killed EC2 run: its instances may still bill
    assert "may still be running and billing" in err and f"sentitop teardown {running.name}" in err
    sink = JsonlFileSink(running / "events.jsonl")  # as a live run's controller holds it
    try:
        assert main(["runs", "--runs-dir", str(root)]) == 0
        err = capsys.readouterr().err
        assert "1 run(s) still running" in err and running.name in err
        assert "stopped before" not in err
    finally:
        sink.close()
    assert main(["plan", "profiles/local.yaml", "--runs-dir", str(root)]) == 0
    assert "left out 1 run folder(s) that cannot be read" in capsys.readouterr().err
    assert main(["runs", "--runs-dir", str(tmp_path / "nosuch")]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("x")
    assert main(["runs", "--runs-dir", str(tmp_path / "a-file")]) == 2
    assert "a-file: a file, not a folder" in capsys.readouterr().err


def test_a_runs_folder_from_the_environment_that_is_a_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """SENTITOP_RUNS_DIR naming a file printed "no runs in FILE" and exit 0; a folder that
    does not exist yet still means no runs yet."""
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv("SENTITOP_RUNS_DIR", str(tmp_path / "a-file"))
    assert main(["runs"]) == 2
    assert f"{tmp_path / 'a-file'}: a file, not a folder" in capsys.readouterr().err
    monkeypatch.setenv("SENTITOP_RUNS_DIR", str(tmp_path / "none-yet"))
    assert main(["runs"]) == 0
    assert "no runs in" in capsys.readouterr().out


def test_csv_defaults_from_catalog(tmp_path: Path) -> None:
    (run,) = import_csv(_csv(tmp_path, "x,g5.12xlarge,2,3,900,"))
    assert (run.gpus, run.workers, run.gpu_model) == (8, 8, "A10G")
    assert run.usd_per_hour == pytest.approx(2 * 5.672)
    assert run.epoch_seconds == [300.0] * 3 and run.billing == "per_second"
    assert (run.line, run.source) == (3, "csv")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("x,g3.4xlarge,1,ten,100,", r":3: epochs: 'ten' is not a number"),
        ("x,g3.4xlarge,1,2.5,100,", r":3: epochs: '2.5' is not an integer"),
        ("x,g3.4xlarge,1,0,100,", r":3: epochs: 0 must be >= 1"),
        ("x,g3.4xlarge,1,10,0,", r":3: seconds: 0 must be > 0"),
        ("x,g3.4xlarge,1,10,,", r":3: seconds: is empty"),
        (",g3.4xlarge,1,10,5,", r":3: run: is empty"),
        ("x,g3.4xlarge,1,10,5,hourly", r":3: billing: 'hourly' is not one of per_second"),
        ("x,zz.9xlarge,1,10,5,", r":3: instance_type: 'zz.9xlarge' is not in the catalog"),
        ("x,g3.4xlarge,1,10", r":3: 4 fields, the header has 6"),
        ("x,g3.4xlarge,-1,10,5,", r":3: count: -1 must be >= 1"),
        ("x,g3.4xlarge,1,10,nan,", r":3: seconds: 'nan' is not finite"),
        ("x,g3.4xlarge,1,1e30,5,", r":3: epochs: 1e30 must be <= 100000"),  # OverflowError
        ("x,g3.4xlarge,1,1e8,5,", r":3: epochs: 1e8 must be <= 100000"),  # 800 MB of floats
    ],
)
def test_malformed_rows_name_file_line_field(tmp_path: Path, row: str, message: str) -> None:
    path = _csv(tmp_path, row)
    with pytest.raises(InputError, match=str(path).replace(".", r"\.") + message):
        import_csv(path)


def test_a_csv_saved_with_a_byte_order_mark_reads(tmp_path: Path) -> None:
    """Excel writes a BOM before the header: "unknown column(s) \ufeffrun; missing run"."""
    path = _csv(tmp_path, "x,g5.12xlarge,2,3,900,")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    (run,) = import_csv(path)
    assert run.run_id == "x" and run.epochs == 3


def test_header_and_duplicates(tmp_path: Path) -> None:
    with pytest.raises(
        InputError,
        match=r"runs\.csv:2: bad header; unknown column\(s\) secs; "
        r"missing column\(s\) seconds",
    ):
        import_csv(_csv(tmp_path, "x,g3.4xlarge,1,10,5,", header=HEADER.replace("seconds", "secs")))
    with pytest.raises(InputError, match=r":4: run: 'x' repeats line 3"):
        import_csv(_csv(tmp_path, "x,g3.4xlarge,1,10,5,", "x,g3.4xlarge,2,10,5,"))
    with pytest.raises(InputError, match="no such CSV file"):
        import_csv(tmp_path / "missing.csv")
    assert set(CSV_COLUMNS) >= set(HEADER.split(","))


def test_cli_exit_2_on_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _csv(tmp_path, "x,g3.4xlarge,1,10,five,")
    assert main(["report", str(bad), "--output", str(tmp_path / "out")]) == 2
    assert f"{bad}:3: seconds: 'five' is not a number" in capsys.readouterr().err
    assert (
        main(
            [
                "report",
                "no-such-run",
                "--runs-dir",
                str(tmp_path),
                "--output",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    assert "no-such-run: no run folder" in capsys.readouterr().err
    assert main(["runs", "--import", str(bad)]) == 2


def test_runs_json(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    make_run("a", nproc=1, epoch_s=[5.0], sync_s=0.1, sweep="sw")
    assert (
        main(["runs", "--runs-dir", str(tmp_path / "runs"), "--json", "--import", str(SEED_CSV)])
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in rows][:2] == ["a", "seed-1xg3.4xlarge"]
    assert rows[0]["sweep"] == "sw" and rows[0]["epoch_s"] == 5.0


@pytest.mark.parametrize(
    "bad",
    [
        '{"type": "step", "t": "abc", "loss": 1}',
        '{"type": "train_start", "t": null}',
        '{"type": "stage_end", "stage": "preprocess", "seconds": "ten"}',
        '{"type": "step", "loss": 0.5}',
    ],
)
def test_an_event_with_wrong_field_types_is_left_out_not_the_run(
    make_run: Callable[..., Path], tmp_path: Path, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One hand-edited or foreign events.jsonl line crashed `runs` and `report` (float(None),
    float('abc')) for every run; now that event is left out and the rest of the run counts."""
    folder = make_run("r1", nproc=2, epoch_s=[10.0, 12.0], sync_s=1.0, prep_s=3.0)
    events = folder / "events.jsonl"
    good = load_run(folder)
    lines = events.read_text().splitlines()
    events.write_text("\n".join([lines[0], bad, *lines[1:]]) + "\n")
    run = load_run(folder)
    assert (run.prep_s, len(run.phases), run.curve) == (good.prep_s, len(good.phases), good.curve)
    assert main(["runs", "--runs-dir", str(folder.parent), "--json"]) == 0
    assert '"run": "r1"' in capsys.readouterr().out
    assert main(["report", str(folder), "--output", str(tmp_path / "rep")]) == 0


def test_an_interrupted_run_lists_the_epochs_its_events_show_done(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`runs` said `epochs 0` for a run stopped after an epoch (no trainer summary); the Runs
    screen counted it from the events. Both now say the same."""
    import json

    folder = make_run("stopped", nproc=1, epoch_s=[5.0, 5.0], sync_s=0.1, status="interrupted")
    summary = json.loads((folder / "summary.json").read_text())
    summary.pop("train")  # stopped before the trainer summed up
    summary["epochs"] = 0
    (folder / "summary.json").write_text(json.dumps(summary))
    with (folder / "events.jsonl").open("a") as fh:
        fh.write('{"type": "checkpoint", "t": 2000.0, "rank": 0, "epoch": 2, "step": 0}\n')
    assert main(["runs", "--runs-dir", str(folder.parent), "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert (listed["status"], listed["epochs"]) == ("interrupted", 2)


def test_a_folder_written_by_sentitop_train_reads_with_its_epochs(tmp_path: Path) -> None:
    from engine.config import ModelConfig, TrainConfig
    from engine.sentiment.trainer import DistEnv, Trainer
    from engine.synth.dataset import write_synthetic_dataset

    data, run = tmp_path / "data", tmp_path / "run"
    write_synthetic_dataset(data, 240, 80, seq_len=12, vocab_size=50)
    cfg = TrainConfig(
        data_dir=str(data),
        run_dir=str(run),
        epochs=2,
        batch_size=32,
        model=ModelConfig(preset="seed", hidden=8),
        checkpoint_every_min=0,
    )
    Trainer(cfg, env=DistEnv()).fit()
    record = load_run(run)  # the trainer's own summary.json: per_epoch at its top level
    assert record.epochs == 2 and len(record.epoch_seconds) == 2
    assert all(s > 0 for s in record.epoch_seconds)
    assert main(["report", str(run), "--output", str(tmp_path / "report")]) == 0
    assert (tmp_path / "report" / "report.md").is_file()


def test_a_run_whose_ranks_changed_is_kept_out_of_speedups(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    """A shrink from 2 ranks to 1 was recorded as a 2-worker run: its median epoch (measured on
    1 rank) went into the 2-worker configuration and the planner's fit (+75 %, +161 %)."""
    from remote.review.metrics import series_metrics

    make_run("one", nproc=1, epoch_s=[10.0, 10.0], sync_s=0.0)
    make_run("two", nproc=2, epoch_s=[5.5, 5.5], sync_s=0.2)
    make_run("shrunk", nproc=1, epoch_s=[5.5, 10.0], sync_s=0.2,
             summary_extra={"world_sizes": [2, 1]})  # fmt: skip
    runs = list_runs(tmp_path / "runs")
    assert [r.run_id for r in runs if r.mixed_world] == ["shrunk"]
    series = series_metrics(runs)
    assert sorted(c.label for c in series.configs) == ["local ×1 proc", "local ×2 proc"]
    assert all(len(c.runs) == 1 for c in series.configs)
    assert any("left out: shrunk" in note for note in series.notes)


def test_gpu_machines_whose_ranks_trained_on_cpu_are_cpu_runs(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    """Ranks on g5.xlarge reported device cpu (a torch without CUDA): the run was filed as an
    A10G measurement, and its CPU rate chose the planner's machines."""
    from remote.profile import load_profile

    root = Path(__file__).resolve().parents[2]
    config = json.loads(
        json.dumps(load_profile(root / "profiles" / "aws-g5-2node.yaml").resolved())
    )
    folder = make_run("g5cpu", nproc=2, epoch_s=[30.0], sync_s=0.5, profile=config,
                      summary_extra={"provider": "ec2"})  # fmt: skip
    assert load_run(folder).hardware == "A10G"
    summary = json.loads((folder / "summary.json").read_text())
    summary["train"]["device"] = "cpu"
    (folder / "summary.json").write_text(json.dumps(summary))
    assert load_run(folder).hardware == "CPU g5.xlarge"


def test_a_killed_cloud_run_torn_down_since_is_no_longer_said_to_bill(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After `sentitop teardown RUN` had terminated everything, `runs` kept warning that the
    run's machines "may still be running and billing"."""
    from remote.teardown import TeardownReport, record_teardown

    root = tmp_path / "runs"
    killed = root / "20991231-000000-killed"
    killed.mkdir(parents=True)
    (killed / "events.jsonl").write_text('{"type": "run_start", "t": 1.0}\n')
    (killed / "profile.yaml").write_text("name: g5\nprovider: ec2\n")
    assert main(["runs", "--runs-dir", str(root)]) == 0
    assert "may still be running and billing" in capsys.readouterr().err
    record_teardown(killed, TeardownReport(run_id=killed.name, region="us-east-1", dry_run=False))
    assert main(["runs", "--runs-dir", str(root)]) == 0
    err = capsys.readouterr().err
    assert "billing" not in err and "1 run(s) stopped before their end" in err


def test_a_run_whose_machines_could_not_be_terminated_is_said_to_bill(
    make_run: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """AWS stopped answering at the run's end: it was listed as a plain "failed" run, with no
    word that its instances may still bill (a killed run's had one)."""
    from remote.teardown import TeardownReport, record_teardown

    timing: dict[str, Any] = {"nproc": 1, "epoch_s": [3.0], "sync_s": 0.0, "status": "failed"}
    folder = make_run("20991231-000000-aws", **timing,
                      summary_extra={"provider": "ec2", "leftovers": True})  # fmt: skip
    make_run("20991231-000001-fine", **timing, summary_extra={"provider": "ec2"})
    assert main(["runs", "--runs-dir", str(folder.parent)]) == 0
    err = capsys.readouterr().err
    assert f"warning: {folder.name}: its cloud machines could not be terminated" in err
    assert f"`sentitop teardown {folder.name}`" in err and "fine" not in err
    record_teardown(folder, TeardownReport(run_id=folder.name, region="us-east-1", dry_run=False))
    assert main(["runs", "--runs-dir", str(folder.parent)]) == 0
    assert "could not be terminated" not in capsys.readouterr().err


@pytest.mark.parametrize("command", ["predict", "eval"])
def test_a_run_that_failed_before_its_model_is_said_to_have(
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`predict <failed run id>` said "no run folder with model.json (tried …)", as for a typo,
    of a run `sentitop runs` lists."""
    runs = tmp_path / "runs"
    folder = runs / "20261201-010000-aws"
    folder.mkdir(parents=True)
    reason = "bad profile: nodes[0].key: ~/.ssh/k.pem is not a file\n  more"
    (folder / "summary.json").write_text(json.dumps({"status": "failed", "reason": reason}))
    given = ["--input", str(tmp_path / "r.jsonl")] if command == "eval" else ["great"]
    monkeypatch.setenv("SENTITOP_RUNS_DIR", str(runs))  # the bare run id, as `runs` lists it
    assert main([command, folder.name, *given]) == 2
    err = capsys.readouterr().err
    assert "run 20261201-010000-aws ended 'failed' (bad profile: nodes[0].key" in err
    assert "no run folder" not in err


def test_a_run_on_mixed_or_spot_machines_is_labelled_by_its_groups(
    make_run: Callable[..., Path],
) -> None:
    """A run on 1×g5.xlarge + 2×g4dn.xlarge spot was listed as '3×g5.xlarge' (the first
    group's type, every group's count): `report` then filed it as a g5-only configuration.
    It now reads as the planner labels the same profile."""
    from remote.profile import load_profile
    from remote.review.planner import label_of

    root = Path(__file__).resolve().parents[2]
    profile = load_profile(root / "profiles" / "aws-mixed-g4dn-g5.yaml")
    config = json.loads(json.dumps(profile.resolved()))
    folder = make_run("mixed", nproc=3, epoch_s=[30.0], sync_s=0.5, profile=config,
                      summary_extra={"provider": "ec2"})  # fmt: skip
    run = load_run(folder)
    groups = [(g["instance_type"], g["count"], g["spot"]) for g in config["nodes"]]
    assert len({t for t, _, _ in groups}) == 2 and any(s for _, _, s in groups)
    expected = " + ".join(f"{c}×{t}{' spot' if s else ''}" for t, c, s in groups)
    assert run.label == expected
    assert label_of(profile, run.instances, groups[0][0], 3) == expected
    # one on-demand group of one type keeps its short label
    g5 = load_profile(root / "profiles" / "aws-g5-2node.yaml")
    plain = make_run("g5", nproc=2, epoch_s=[30.0], sync_s=0.5,
                     profile=json.loads(json.dumps(g5.resolved())),
                     summary_extra={"provider": "ec2"})  # fmt: skip
    assert load_run(plain).label == "2×g5.xlarge"


def test_a_long_failure_reason_is_cut_between_words(tmp_path: Path) -> None:
    """The reason was cut at 120 characters: "… spot instance i-0a1b2c3d" lost the rest of the
    id a user would look up, with nothing to say it was cut."""
    from remote.run_folder import resolve_run_dir

    folder = tmp_path / "20261201-010000-aws"
    folder.mkdir()
    reason = (
        "launch failed: AWS refused the request for capacity in eu-west-1c after three tries; "
        "the spot instance i-0a1b2c3d4e5f60718 was reclaimed with a two-minute notice"
    )
    (folder / "summary.json").write_text(json.dumps({"status": "failed", "reason": reason}))
    with pytest.raises(InputError) as caught:
        resolve_run_dir(folder, want="model.pt", part="train")
    said = caught.value.message
    cut = said.split("(", 1)[1].rsplit(")", 1)[0]
    assert cut.endswith(" …") and reason.startswith(cut[: -len(" …")])
    assert reason[len(cut) - 2] == " "  # cut where a word ends, never inside one
    assert "i-0a1b2c3" not in said or "i-0a1b2c3d4e5f60718" in said


def test_a_reason_of_one_long_word_is_cut_inside_it(tmp_path: Path) -> None:
    from remote.run_folder import resolve_run_dir

    folder = tmp_path / "20261201-010000-aws"
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({"status": "failed", "reason": "x" * 300}))
    with pytest.raises(InputError, match=r"ended 'failed' \(x{119}…\) before it wrote"):
        resolve_run_dir(folder, want="model.pt", part="train")

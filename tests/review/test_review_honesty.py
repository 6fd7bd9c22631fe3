"""`runs`, `report` and `plan` tell the truth: one epoch figure, no 'ok' for a useless model,
no traceback for an unwritable output, prices and scaling stated, no GPU PyTorch cannot use."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from remote.profile import UNSUPPORTED_GPUS, load_profile
from remote.review.planner import plan_profile
from remote.runs_store import list_runs
from tests.review.conftest import TINY
from tui.cli import main

ROOT = Path(__file__).resolve().parents[2]
BELOW = {
    "majority_rate": 0.8,
    "warnings": [{"code": "below_majority", "message": "test accuracy 0.79 <= 0.80"}],
}


def _report(runs: Path, out: Path, *refs: str) -> str:
    assert main(["report", *refs, "--runs-dir", str(runs), "-o", str(out)]) == 0
    return (out / "report.md").read_text()


def _run_row(report: str, run_id: str) -> list[str]:
    (line,) = [x for x in report.splitlines() if x.startswith(f"| {run_id} |")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_runs_and_report_show_the_same_epoch_time(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    make_run("slowstart", nproc=1, epoch_s=[20.0, 6.0, 7.0], sync_s=0.1)  # mean 11, median 7
    assert main(["runs", "--runs-dir", str(runs), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["epoch_s"] == 7.0 and row["epoch_s_mean"] == 11.0
    assert main(["runs", "--runs-dir", str(runs)]) == 0
    table = capsys.readouterr().out
    assert "median epoch s" in table and " 7.0 " in table and "11.0" not in table
    report = _report(runs, tmp_path / "out", "slowstart")
    assert "| median epoch s |" in report
    assert _run_row(report, "slowstart")[5] == "7.0"  # the run's own median, beside its status
    assert "| local ×1 proc | 1 | local CPU | 0.096 | 7.0 |" in report


def test_a_model_below_the_majority_rate_is_not_shown_as_ok(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    make_run("useless", nproc=1, epoch_s=[5.0, 5.0], sync_s=0.1, accuracy=0.79, summary_extra=BELOW)
    assert main(["runs", "--runs-dir", str(runs)]) == 0
    assert "ok, below majority 0.800" in capsys.readouterr().out
    assert main(["runs", "--runs-dir", str(runs), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["outcome"] == "ok, below majority 0.800" and row["accuracy_counts"] is False
    report = _report(runs, tmp_path / "out", "useless")
    assert _run_row(report, "useless")[3] == "ok, below majority 0.800"
    config = _run_row(report, "local ×1 proc")
    assert config[-2:] == ["–", "–"]  # no accuracy, no $ per accuracy point
    assert "useless: test accuracy 0.790 does not beat the majority rate 0.800" in report


def test_a_failed_runs_accuracy_does_not_stand_for_its_configuration(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    make_run("good", nproc=1, epoch_s=[5.0, 5.0], sync_s=0.1, accuracy=0.7)
    make_run(
        "died",
        nproc=1,
        epoch_s=[5.0, 5.0],
        sync_s=0.1,
        accuracy=0.9,
        status="failed",
        summary_extra={"reason": "rank 1 exited with code 1"},
    )
    report = _report(runs, tmp_path / "out", "good", "died")
    assert _run_row(report, "died")[3] == "failed"
    assert _run_row(report, "local ×1 proc")[-2] == "0.700"  # not the median with the failed 0.9
    assert "died: failed (rank 1 exited with code 1): its accuracy is left out" in report


@pytest.mark.parametrize("blocked", ["report.md", "pareto.png"])
def test_an_output_that_cannot_be_written_is_exit_2_naming_the_file(
    blocked: str,
    make_run: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_run("a", nproc=1, epoch_s=[5.0], sync_s=0.1)
    out = tmp_path / "out"
    (out / blocked).mkdir(parents=True)  # a folder where the file goes: as unwritable as ro
    code = main(["report", "a", "--runs-dir", str(tmp_path / "runs"), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"cannot write {out / blocked}" in err


def test_report_cells_keep_a_pipe_in_a_run_name(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    make_run("a|b", nproc=1, epoch_s=[5.0], sync_s=0.1)
    report = _report(tmp_path / "runs", tmp_path / "out", str(tmp_path / "runs" / "a|b"))
    (line,) = [x for x in report.splitlines() if x.startswith("| a\\|b |")]
    assert len(re.split(r"(?<!\\)\|", line.strip("|"))) == 10  # the Runs table's columns


def test_plan_says_where_its_prices_come_from_and_how_old_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = str(ROOT / "profiles" / "aws-g5-2node.yaml")
    assert main(["plan", profile, "--runs-dir", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    (line,) = [x for x in json.loads(captured.out)["inputs"] if x.startswith("prices (")]
    assert "from the bundled catalog" in line and " old)" in line
    assert "no live or cached AWS price" in line and "sentitop prices --refresh" in line
    assert "live prices not fetched" in captured.err  # the price book's own warning, on stderr


def test_plan_never_ranks_gpus_current_pytorch_cannot_use(tmp_path: Path) -> None:
    profile = load_profile(ROOT / "profiles" / "aws-seed-g3.yaml")  # its own: 4x M60
    plan = plan_profile(profile, [], deadline_h=3.0)
    unsupported = set(UNSUPPORTED_GPUS)
    others = [c for c in plan.candidates if not c.is_target]
    assert others and not any(set(c.hardware.split("+")) & unsupported for c in others)
    assert plan.pick is not None and not set(plan.pick.hardware.split("+")) & unsupported
    (note,) = [n for n in plan.notes if n.startswith("not ranked:")]
    assert "p2.xlarge" in note and "the profile's own configuration uses M60" in note
    g5 = plan_profile(load_profile(ROOT / "profiles" / "aws-g5-2node.yaml"), [])
    (estimates,) = [n for n in g5.notes if n.startswith("estimates:")]
    assert "K80" not in estimates and "M60" not in estimates  # not candidates: not estimated


def test_plan_band_covers_the_wall_time_swings_of_past_runs(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    # same epochs, start-up 8 s vs 16 s (a shared machine): the plan predicts whole runs
    make_run("quick", nproc=1, epoch_s=[10.0, 10.0], sync_s=0.1, fixed_s=8.0)
    make_run("slow", nproc=1, epoch_s=[10.1, 10.1], sync_s=0.1, fixed_s=16.0)
    plan = plan_profile(load_profile(TINY), list_runs(tmp_path / "runs"))
    walls = [e for e in plan.errors if e.what == "wall s"]
    assert walls
    worst = max(abs(math.log1p(e.error)) for e in walls)
    assert math.log(plan.target.band) >= worst - 1e-9


def test_plan_basis_says_when_it_scales_past_the_measured_data_size(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    make_run("one", nproc=1, epoch_s=[10.0, 10.0], sync_s=0.1, n_train=1000)
    runs = list_runs(tmp_path / "runs")
    plain = plan_profile(load_profile(TINY), runs)
    assert "scaled from" not in plain.target.basis
    big = plan_profile(load_profile(TINY), runs, data_size=10**9)
    assert "scaled from their 1,000 to " in big.target.basis
    assert "not measured at this size" in big.target.basis
    # a band from 1,000 samples at 100x that size or more: said to be no measure of it
    assert not [n for n in plain.notes if "fewer than planned" in n]
    (said,) = [n for n in big.notes if "fewer than planned" in n]
    assert said.startswith("the band of local ×1 proc comes from runs on 1,000 training samples")


def test_a_run_whose_summary_warns_is_not_listed_as_plain_ok(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The end-of-run table said "finished, 1 warning(s)" (the blend left the LSTM out), while
    `runs` and the report listed the same run as a plain "ok"; its accuracy still counts."""
    runs = tmp_path / "runs"
    warned = {"warnings": [{"code": "path_unused", "message": "the LSTM got weight 0"}]}
    make_run("warned", nproc=1, epoch_s=[5.0, 5.0], sync_s=0.1, accuracy=0.9,
             summary_extra=warned)  # fmt: skip
    assert main(["runs", "--runs-dir", str(runs), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["outcome"] == "ok, 1 warning" and row["accuracy_counts"] is True
    assert main(["runs", "--runs-dir", str(runs)]) == 0
    assert "ok, 1 warning" in capsys.readouterr().out
    assert _run_row(_report(runs, tmp_path / "out", "warned"), "warned")[3] == "ok, 1 warning"


def test_a_broken_price_file_is_one_error_not_every_run_unreadable(
    make_run: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hand-edited prices.csv with a bad header made `runs` leave out every run folder (the
    same error once per run), print "no runs" and exit 0; `report RUN` blamed the run id."""
    runs = tmp_path / "runs"
    make_run("first", nproc=1, epoch_s=[5.0], sync_s=0.1, accuracy=0.9)
    make_run("second", nproc=1, epoch_s=[5.0], sync_s=0.1, accuracy=0.9)
    prices = tmp_path / "prices.csv"
    prices.write_text("garbage,,,\n")
    monkeypatch.setenv("SENTITOP_PRICES_FILE", str(prices))
    for command in (["runs", "--runs-dir", str(runs)], ["runs", "--runs-dir", str(runs), "--json"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count(f"{prices}:1: bad header") == 1 and "left out" not in err
    assert main(["report", "first", "--runs-dir", str(runs), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{prices}:1: bad header" in err and "no sweep id" not in err


def test_a_faster_configuration_for_no_more_dollars_is_pointed_out(
    make_run: Callable[..., Path], tmp_path: Path
) -> None:
    """The headline is the profile's own configuration; a trial's plan showed a faster one at
    the same $ in the table without a word."""
    make_run("one", nproc=1, epoch_s=[30.0, 30.0], sync_s=0.0)  # the profile's own: 1 rank
    make_run("two", nproc=2, epoch_s=[10.0, 10.0], sync_s=0.0)
    plan = plan_profile(load_profile(TINY), list_runs(tmp_path / "runs"))
    assert plan.target.label == "local ×1 proc"
    (said,) = [n for n in plan.notes if "is predicted faster than the profile's own" in n]
    assert said.startswith("local ×2 proc is predicted faster than the profile's own local ×1")


def test_the_faster_configuration_note_reads_both_times_in_one_unit() -> None:
    """A trial's plan read "1×g5.xlarge … (1,849 s against 6.65 h)": two units to compare."""
    from remote.review.candidates import Candidate
    from remote.review.planner import _beaten_note

    def candidate(label: str, seconds: float, usd: float) -> Candidate:
        return Candidate(label, "", None, 1, 1, 0.0, seconds, seconds, usd)

    own, fast = candidate("local ×2 proc", 6.65 * 3600, 0.64), candidate("1×g5.xlarge", 1849, 0.52)
    note = _beaten_note([own, fast], own)
    assert note is not None and "(0.51 h against 6.65 h)" in note
    own, fast = candidate("local ×1 proc", 600, 0.01), candidate("local ×2 proc", 300, 0.01)
    note = _beaten_note([own, fast], own)  # in the plan table's units: 0.17 h there too
    assert note is not None and "(0.08 h against 0.17 h)" in note
    own, fast = candidate("local ×1 proc", 300, 0.01), candidate("local ×2 proc", 100, 0.01)
    note = _beaten_note([own, fast], own)
    assert note is not None and "(100 s against 300 s)" in note

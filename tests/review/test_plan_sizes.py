"""Sizes on the command line: plan --data-size (empty, petabytes, negative, the largest) and
preprocess --memory-budget (negative, below 1MB: refused before any progress bar)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from engine.synth.size import format_size, parse_size
from tui.cli import build_parser, main

TWO_REVIEWS = (
    b'{"reviewText": "great strings, fine tone", "overall": 5}\n'
    b'{"reviewText": "broke after a day, awful", "overall": 1}\n'
)


@pytest.fixture
def no_runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


def _exit_code(argv: list[str]) -> int | str | None:
    """main's exit code, or argparse's (SystemExit) when the parser refuses the words."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _plan_json(size: str, runs: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["plan", "local", "--data-size", size, "--json", "--runs-dir", str(runs)]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


@pytest.mark.parametrize("text", ["", "  "])
def test_an_empty_data_size_is_refused(
    text: str, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--data-size ''` was ignored: it planned the profile's own 30 MB and exited 0."""
    assert main(["plan", "local", "--data-size", text, "--runs-dir", str(no_runs)]) == 2
    assert "--data-size: empty, expected a size" in capsys.readouterr().err


def test_a_petabyte_plans_as_a_thousand_terabytes(
    no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1PB was "cannot read" while 1000TB planned (84,995 h): the same corpus, the same plan;
    preprocessing scales with the bytes and every figure stays finite."""
    peta = _plan_json("1PB", no_runs, capsys)
    tera = _plan_json("1000TB", no_runs, capsys)
    one_tb = _plan_json("1TB", no_runs, capsys)
    assert peta["n_train"] == tera["n_train"] > 1000 * one_tb["n_train"] * 0.999
    assert peta["target"]["seconds"] == tera["target"]["seconds"]
    assert math.isfinite(peta["target"]["seconds"]) and math.isfinite(peta["target"]["usd"])
    prep, prep_tb = peta["preprocessing"][0], one_tb["preprocessing"][0]
    assert prep["seconds"] == pytest.approx(1000 * prep_tb["seconds"], rel=1e-4)


@pytest.mark.parametrize("size", ["11PB", "1000000TB", "99999999999999999999TB"])
def test_a_data_size_past_the_largest_corpus_is_refused_naming_the_limit(
    size: str, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1000000000000TB planned 12,177,508,331,932 h: a slip, not a corpus."""
    assert main(["plan", "local", "--data-size", size, "--runs-dir", str(no_runs)]) == 2
    err = capsys.readouterr().err
    assert "more than the largest corpus planned for, 10.0 PB" in err
    assert "Traceback" not in err
    assert main(["plan", "local", "--data-size", "10PB", "--runs-dir", str(no_runs)]) == 0


def test_an_unreadable_size_lists_every_unit(
    no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hint named 50KB, 200MB, 1GB, 1.5GiB: not TB, though 1000TB was taken."""
    assert main(["plan", "local", "--data-size", "1XB", "--runs-dir", str(no_runs)]) == 2
    hint = capsys.readouterr().err.split("hint:")[1]
    for unit in ("KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB", "PiB"):
        assert unit in hint


def test_sizes_read_and_write_petabytes() -> None:
    assert parse_size("1PB") == 10**15
    assert parse_size("1.5p") == 15 * 10**14
    assert parse_size("2PiB") == 2 * 1024**5
    assert [format_size(n) for n in (999 * 10**12, 10**15, 10**16)] == [
        "999.0 TB",
        "1.0 PB",
        "10.0 PB",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "local", "--data-size", "-5GB"], "--data-size: size must be positive"),
        (["plan", "local", "--data-size", "-.5GB"], "--data-size: size must be positive"),
        (["plan", "local", "--deadline", "-2h"], "'-2h': expected a time such as 2h"),
        (["plan", "local", "--top", "-3"], "'-3': expected an integer >= 1"),
        (["preprocess", "-i", "x", "-o", "y", "--memory-budget", "-5MB"], "must be positive"),
        (["report", "x", "--output", "o", "--deadline", "-2h"], "'-2h': expected a time such"),
    ],
)
def test_a_negative_value_reaches_the_options_own_check(
    argv: list[str], message: str, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse read -5GB as an option: "expected one argument"; only --data-size=-5GB reached
    the check that says what is wrong."""
    ran = [*argv, "--runs-dir", str(no_runs)] if argv[0] in ("plan", "report") else argv
    assert _exit_code(ran) == 2
    err = capsys.readouterr().err
    assert message in err and "expected one argument" not in err


def test_the_other_options_still_parse() -> None:
    parser = build_parser()
    words = "preprocess -i a.jsonl b.jsonl -o out --workers 2 --memory-budget 512MB"
    args = parser.parse_args([*words.split(), "--mrjob-arg=--conf-path=x", "--json"])
    assert (args.input, args.output, args.workers) == (["a.jsonl", "b.jsonl"], "out", 2)
    assert (args.memory_budget, args.mrjob_arg, args.json) == (512 * 10**6, ["--conf-path=x"], True)
    words = "plan local --epochs 2 --top 3 --deadline 90m --budget $5 --data-size 92GB"
    args = parser.parse_args([*words.split(), "--import", "a.csv", "--json"])
    assert (args.profile, args.epochs, args.top, args.deadline) == ("local", 2, 3, 1.5)
    assert (args.budget, args.data_size, args.json) == (5.0, "92GB", True)
    assert args.imports == [Path("a.csv")]
    with pytest.raises(SystemExit):
        parser.parse_args(["plan", "local", "-x"])  # an unknown option is still one


def test_a_budget_below_1mb_is_refused_before_any_progress_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It drew a "0.0/2.5 MB" progress bar, then said the budget was too small."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(TWO_REVIEWS)
    out = tmp_path / "out"
    assert main(["preprocess", "-i", str(src), "-o", str(out), "--memory-budget", "999KB"]) == 2
    err = capsys.readouterr().err
    assert "--memory-budget 999,000 bytes is below the smallest accepted: 1MB" in err
    assert "records/s" not in err and "0.0/" not in err
    assert not out.exists()
    inline = ["preprocess", "-i", str(src), "-o", str(out), "--runner", "inline", "--json"]
    assert main([*inline, "--memory-budget", "999KB"]) == 0  # the local runner's budget only


@pytest.mark.parametrize(
    ("written", "hours"), [("2h", 2.0), ("90m", 1.5), ("1h30m", 1.5), ("90s", 0.025), ("1.5", 1.5)]
)
def test_deadlines_take_the_units_a_profile_takes(written: str, hours: float) -> None:
    """`plan --deadline 30s` was refused while a profile's ready_timeout takes 90s."""
    from tui.cli.commands.plan import parse_hours

    assert parse_hours(written) == pytest.approx(hours)


def test_an_emr_profile_plan_counts_the_cluster_in_its_dollars(
    no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The EMR cluster that preprocesses was left out of the plan's $ (`sentitop profiles`
    prices it with the run)."""
    root = Path(__file__).resolve().parents[2]
    profile = str(root / "profiles" / "aws-seed-g3.yaml")
    args = ["plan", profile, "--data-size", "92GB", "--runs-dir", str(no_runs)]
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["preprocessing_runner"] == "emr"
    emr, local = data["preprocessing"]
    assert (emr["runner"], local["runner"]) == ("emr", "local")
    assert emr["usd_per_hour"] > 0 and local["usd"] == 0  # this machine is not billed
    assert emr["usd"] == pytest.approx(emr["usd_per_hour"] * max(emr["seconds"], 60) / 3600, 1e-2)
    assert main(args) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "of EMR preprocessing" in out and f"at ${emr['usd_per_hour']:.4g}/h" in out


def test_a_plan_past_the_profiles_own_budget_says_what_the_run_would_do(
    no_runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan` predicted $24.50 for a profile whose budget.max_usd is $5 without a word (the
    run stops at $5); nor that a $/h above max_usd_per_hour never launches."""
    root = Path(__file__).resolve().parents[2]
    profile = root / "profiles" / "aws-g5-2node.yaml"

    def notes(path: Path, size: str) -> list[str]:
        args = ["plan", str(path), "--data-size", size, "--json", "--runs-dir", str(no_runs)]
        assert main(args) == 0
        return [n for n in json.loads(capsys.readouterr().out)["notes"] if "budget." in n]

    assert notes(profile, "1GB") == []  # predicted far under its $5
    (big,) = notes(profile, "1TB")
    assert big.startswith("the profile's budget.max_usd $5 is below the predicted $")
    assert "would be stopped (and torn down) about" in big
    capped = tmp_path / "capped.yaml"
    capped.write_text(profile.read_text().replace("max_usd_per_hour: 3.0", "max_usd_per_hour: 1"))
    (rate,) = notes(capped, "1GB")
    assert rate.startswith("the profile's budget.max_usd_per_hour $1 is below its machines'")
    assert "refuses to launch" in rate

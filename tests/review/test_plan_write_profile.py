"""`sentitop plan --write-profile`: never loses a file that was there, reads as written."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from remote.profile import load_profile
from tui.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


def test_the_planned_profile_is_not_overwritten(
    tmp_path: Path, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = tmp_path / "mine.yaml"
    shutil.copy(ROOT / "profiles" / "local.yaml", own)
    before = own.read_text()
    args = ["plan", str(own), "--deadline", "2h", "--runs-dir", str(no_runs)]
    assert main([*args, "--write-profile", str(own)]) == 2
    assert "the profile being planned" in capsys.readouterr().err
    assert own.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.yaml", "runs"]


def test_a_refused_profile_leaves_the_file_that_was_there(
    tmp_path: Path, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "picked.yaml"
    earlier = "# Written by `sentitop plan local` on 2026-11-29: an earlier plan\n"
    out.write_text(earlier)
    args = ["plan", "local", "--runs-dir", str(no_runs), "--write-profile", str(out)]
    assert main([*args, "--data-size", "5TB"]) == 2  # plannable, but no synthetic.size
    err = capsys.readouterr().err
    assert "--data-size 5000000000000" in err and "data.synthetic.size" in err
    assert out.read_text() == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["picked.yaml", "runs"]  # no draft


def test_a_file_plan_did_not_write_is_not_replaced(
    tmp_path: Path, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--write-profile replaced a user's own profile of another name without a word; a file
    an earlier plan wrote is still replaced (the plan redone)."""
    mine = tmp_path / "real.yaml"
    shutil.copy(ROOT / "profiles" / "local.yaml", mine)
    before = mine.read_text()
    args = ["plan", "local", "--deadline", "2h", "--runs-dir", str(no_runs), "--write-profile"]
    assert main([*args, str(mine)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "a file that `sentitop plan` did not write is there" in err
    assert f"remove {mine} first" in err and "real-plan.yaml" in err
    assert mine.read_text() == before
    planned = tmp_path / "planned.yaml"
    assert main([*args, str(planned)]) == 0
    first = planned.read_text()
    assert main([*args, str(planned), "--epochs", "7"]) == 0  # its own earlier plan: replaced
    assert planned.read_text() != first and "7 epoch(s)" in planned.read_text()


def test_written_profile_reads_as_text_with_its_figures(
    tmp_path: Path, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "picked.yaml"
    out.write_text("# Written by `sentitop plan local` on 2026-11-29: replaced\n")
    args = ["plan", "local", "--deadline", "2h", "--top", "1", "--runs-dir", str(no_runs)]
    assert main([*args, "--write-profile", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "\\x" not in text and "×" in text  # 'local ×2 proc', not 'local \xD72 proc'
    assert "predicted 0.00 h" not in text and "$0.00 " not in text  # a seconds-long local run
    assert load_profile(out).name == "local-plan"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["picked.yaml", "runs"]


def test_small_amounts_are_shown_and_the_band_keeps_the_billing_minimum(
    no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["plan", "local", "--top", "12", "--runs-dir", str(no_runs)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "$0.00 at" not in out  # the header of a seconds-long local run
    row = next(line for line in out.splitlines() if line.startswith("│ 1×g4dn.xlarge "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    usd, band = cells[7], cells[8]
    minimum = f"{60 * 0.526 / 3600:.2g}"  # a few seconds are billed as 60 at $0.526/h
    assert usd == minimum and band == f"{minimum} – {minimum}"
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    row_json = next(c for c in data["candidates"] if c["label"] == "1×g4dn.xlarge")
    assert row_json["usd_band"][0] == pytest.approx(60 * 0.526 / 3600, abs=1e-4)


def test_a_prediction_and_its_band_read_in_one_unit(
    no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 5-minute prediction whose band reached past 6 minutes read "306 s (band 0.04 – 0.18 h)"
    and a lower end in seconds beside an upper one in hours: one unit, the upper end's."""
    args = ["plan", "local", "--top", "12", "--runs-dir", str(no_runs), "--data-size", "1GB"]
    assert main(args) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert re.search(r"predicted [\d.]+ h \(band [\d.]+ – [\d.]+ h\)", header), header
    rows = [line for line in out.splitlines() if line.startswith("│ ")]
    units = set()
    for row in rows:
        cells = [c.strip() for c in row.strip("│").split("│")]
        time, band = cells[5], cells[6]
        if band:
            assert re.fullmatch(r"[\d.,]+ – [\d.,]+ (s|h)", band), band
            assert time.split()[1] == band.split()[-1], (time, band)
            units.add(band.split()[-1])
    assert units == {"s", "h"}  # both kinds of row were checked
    written = no_runs.parent / "picked.yaml"  # the written profile's header says it the same way
    assert main([*args, "--write-profile", str(written)]) == 0
    comment = written.read_text(encoding="utf-8").splitlines()[1]
    match = re.search(r"predicted ([\d.,]+ (s|h)) \(band [\d.,]+ (s|h) – [\d.,]+ (s|h)\)", comment)
    assert match is not None and len(set(match.groups()[1:])) == 1, comment


def test_the_written_profile_keeps_recovery_and_the_ec2_waits(
    tmp_path: Path, no_runs: Path
) -> None:
    """ready_timeout, recovery and the dead man's switch were dropped: a spot setup lost its
    recovery (on_node_loss fell back to fail) and the SSH wait its 30 s, with no word."""
    source = tmp_path / "spot.yaml"
    text = (ROOT / "profiles" / "aws-mixed-g4dn-g5.yaml").read_text()
    source.write_text(
        text + "ready_timeout: 45s\nshutdown_unwatched_after: 20m\n"
        "recovery: {on_node_loss: replace, max_restarts: 5}\n"
    )
    out = tmp_path / "out.yaml"
    args = ["plan", str(source), "--runs-dir", str(no_runs), "--write-profile", str(out)]
    assert main(args) == 0
    written = load_profile(out)
    assert written.recovery.on_node_loss == "replace" and written.recovery.max_restarts == 5
    assert written.ready_timeout == 45  # type: ignore[attr-defined]
    assert written.shutdown_unwatched_after == 1200  # type: ignore[attr-defined]


def test_a_written_ec2_budget_allows_for_the_start_up(
    tmp_path: Path, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The budget was the slow end of the training's $ alone, for a run whose instances are
    billed (and counted against it) from boot: a 1-minute plan on a $98/h set got $1.64 and
    would stop before it trained. It now allows the SSH wait (ready_timeout) at the set's rate."""
    import math

    out = tmp_path / "ec2.yaml"
    args = ["plan", "aws-g5-2node", "--data-size", "92GB", "--deadline", "2h", "--json"]
    assert main([*args, "--runs-dir", str(no_runs), "--write-profile", str(out)]) == 0
    pick = json.loads(capsys.readouterr().out)["pick"]
    written = load_profile(out)
    rate = pick["usd_per_hour"]
    high = pick["usd_band"][1]  # rounded to 4 places in the JSON
    assert written.budget.max_usd == pytest.approx(
        math.ceil((high + rate * 900 / 3600) * 100) / 100, abs=0.011
    )
    assert written.budget.max_usd > high + rate * 0.24  # 15 min at the rate, not the slow end
    assert "plus 15 min of start-up at $" in out.read_text().splitlines()[1]
    local = tmp_path / "local.yaml"
    assert main(["plan", "local", "--runs-dir", str(no_runs), "--write-profile", str(local)]) == 0
    assert "start-up" not in local.read_text().splitlines()[1]  # nothing billed while starting

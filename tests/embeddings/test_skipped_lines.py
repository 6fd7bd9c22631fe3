"""Input lines passed over: counted by reason, and more than preprocessing's
``max_skipped_share`` of them is a `skipped_share` warning on stderr and in summary.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.embeddings.sources import Sources, SourceStats, skipped_warning
from tests.embeddings.topics import write_topic_reviews
from tui.cli import main as sentitop

ROOT = Path(__file__).resolve().parents[2]


def _mixed(path: Path, good: int = 300, bad: int = 400) -> Path:
    """``good`` topic reviews with ``bad`` lines that are not JSON between them."""
    reviews = write_topic_reviews(path, docs=good).read_text().splitlines()
    lines = []
    for i in range(max(good, bad)):
        lines += ([f"not json {i}"] if i < bad else []) + reviews[i : i + 1]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_lines_passed_over_are_counted_by_reason_with_their_first_line(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    rows = ['{"reviewText": "good film"}', "", "not json", "[1, 2]", '{"text": "x"}',
            '{"reviewText": 5}', '{"reviewText": "!!"}', "{broken",
            '{"reviewText": "fine"}']  # fmt: skip
    path.write_text("\n".join(rows) + "\n")
    sources = Sources([str(path)])
    assert list(sources) == [["good", "film"], ["fine"]]
    (stats,) = sources.stats
    assert stats.skipped == 7
    assert stats.reasons == {
        "empty_line": 1, "malformed_json": 2, "not_an_object": 1, "missing_text": 1,
        "text_not_string": 1, "empty_text": 1,
    }  # fmt: skip
    assert stats.first_lines["malformed_json"] == 3 and stats.first_lines["empty_text"] == 7


def test_the_warning_names_the_files_and_the_commonest_reasons() -> None:
    good = SourceStats("good.jsonl", docs=100, text_field="reviewText")
    bad = SourceStats("bad.jsonl", docs=10, text_field="reviewText")
    for n in range(1, 61):
        bad.skip("malformed_json" if n % 3 else "missing_text", n)
    warning = skipped_warning([good, bad])
    assert warning is not None and warning["code"] == "skipped_share"
    assert warning["message"] == (
        "bad.jsonl: skipped 35% of 170 lines (more than 20%): 40 malformed_json (neither JSON "
        "nor a Python literal, e.g. bad.jsonl:1); 20 missing_text (text field `reviewText` "
        "absent or null, e.g. bad.jsonl:3)"
    )
    good.docs = 300  # 60 of 370: 16 %, within what preprocessing lets pass quietly
    assert skipped_warning([good, bad]) is None


def test_embed_warns_when_most_lines_are_not_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 0 with `"warnings": []`, though prepare.json recorded 400 of 700 lines skipped."""
    mixed = _mixed(tmp_path / "mixed.jsonl")
    run = tmp_path / "run"
    argv = ["embed", "--input", str(mixed), "--run-dir", str(run), "--mode", "svd", "--dim", "8"]
    assert sentitop(argv) == 0
    err = capsys.readouterr().err
    said = f"WARNING: {mixed}: skipped 57% of 700 lines (more than 20%): 400 malformed_json"
    assert said in err and err.count("WARNING:") == 1  # said once, as the input was read
    summary = json.loads((run / "summary.json").read_text())
    (warning,) = summary["warnings"]
    assert (warning["stage"], warning["code"]) == ("prepare", "skipped_share")
    assert warning["message"] in err
    assert sentitop(argv) == 0  # the prepared corpus is reused: still said, still recorded
    assert said in capsys.readouterr().err
    assert [w["code"] for w in json.loads((run / "summary.json").read_text())["warnings"]] == [
        "skipped_share"
    ]


def test_a_trained_run_lists_the_warning_in_its_summary(tmp_path: Path) -> None:
    mixed = _mixed(tmp_path / "mixed.jsonl")
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "tui.cli", "embed", "--input", str(mixed), "--run-dir", str(run),
           "--mode", "sync", "--nproc", "1", "--device", "cpu", "--threads", "1", "--dim", "8",
           "--epochs", "1", "--batch", "64", "--json"]  # fmt: skip
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert "skipped_share" in [w["code"] for w in summary["warnings"]]
    assert f"WARNING: {mixed}: skipped 57% of 700 lines" in out.stderr


def test_a_few_bad_lines_pass_quietly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mixed = _mixed(tmp_path / "mixed.jsonl", good=300, bad=30)
    run = tmp_path / "run"
    argv = ["embed", "--input", str(mixed), "--run-dir", str(run), "--mode", "svd", "--dim", "8"]
    assert sentitop(argv) == 0
    assert "WARNING" not in capsys.readouterr().err
    assert json.loads((run / "summary.json").read_text())["warnings"] == []

"""`sentitop preprocess` and `python -m engine.preprocess`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tui.cli import main

from .conftest import review, write_lines


def _input(tmp_path: Path) -> Path:
    lines = [review(f"Review {i} good sound", 5 if i % 3 else 1) for i in range(60)] + [b"{oops"]
    return write_lines(tmp_path / "in.jsonl", lines)


def test_json_prints_stats_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc = main(["preprocess", "--input", str(_input(tmp_path)), "--output", str(out), "--json",
               "--vocab-size", "20", "--seq-len", "8", "--workers", "1"])  # fmt: skip
    assert rc == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats == json.loads((out / "stats.json").read_text())
    assert stats["read"] == 61 and stats["skipped"]["malformed_json"] == 1
    assert (out / "dataset.h5").exists() and (out / "vocab.json").exists()


def test_progress_and_summary_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["preprocess", "-i", str(_input(tmp_path)), "-o", str(tmp_path / "o")])
    captured = capsys.readouterr()
    assert rc == 0
    assert "preprocess summary" in captured.out and "malformed_json" in captured.out
    assert "records/s" in captured.err


def test_missing_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.json.gz"
    rc = main(["preprocess", "--input", str(missing), "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and str(missing) in err


def test_bad_option_value_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["preprocess", "-i", str(_input(tmp_path)), "-o", str(tmp_path / "o"),
               "--test-fraction", "1.5"])  # fmt: skip
    assert rc == 2 and "test_fraction" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_line_limit_below_one_byte_is_refused(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--max-line-bytes -5 was taken: every line skipped as too_long "(-5 bytes …)"."""
    rc = main(["preprocess", "-i", str(_input(tmp_path)), "-o", str(tmp_path / "o"),
               "--max-line-bytes", value])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and f"max_line_bytes = {value} is not allowed" in err  # not "all too long"
    assert not (tmp_path / "o").exists()


def test_module_entry_point_emits_events(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "engine.preprocess", "--input", str(_input(tmp_path)),
         "--output", str(tmp_path / "o"), "--events", "--workers", "1"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[0]["type"] == "stage_start"
    assert events[-1] == {**events[-1], "type": "stage_end", "status": "ok"}
    missing = subprocess.run(
        [sys.executable, "-m", "engine.preprocess", "-i", str(tmp_path / "nope"), "-o", "x"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and "nope" in missing.stderr


def test_inline_runner_progress_knows_the_total_and_mrjobs_notice_stays_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bar read "0/? bytes" until the inline runner ended, and mrjob's "No configs specified
    for inline runner" reached the terminal."""
    from rich.progress import Progress

    src = _input(tmp_path)
    totals: list[float | None] = []
    real_add_task = Progress.add_task

    def add_task(self: Progress, *args: object, **kwargs: object) -> object:
        totals.append(kwargs.get("total"))  # type: ignore[arg-type]
        return real_add_task(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Progress, "add_task", add_task)
    assert (
        main(["preprocess", "-i", str(src), "-o", str(tmp_path / "o"), "--runner", "inline"]) == 0
    )
    assert totals == [src.stat().st_size]

    proc = subprocess.run(
        [sys.executable, "-m", "engine.preprocess", "-i", str(src), "-o", str(tmp_path / "e"),
         "--runner", "inline", "--events"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "No configs specified" not in proc.stderr and proc.stderr == ""
    progress = [e for e in map(json.loads, proc.stdout.splitlines()) if e["type"] == "progress"]
    assert progress[0]["done"] == 0 and progress[0]["total"] == src.stat().st_size
    assert progress[-1]["done"] == progress[-1]["total"] == src.stat().st_size


def test_skipped_examples_keep_their_line_numbers_in_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long path was cut before its line number: "(e.g. /work/shared/data/amazon2014_M…"."""
    deep = tmp_path / "a" / "very" / "long" / "folder" / "name" / "that" / "goes" / "on"
    deep.mkdir(parents=True)
    path = deep / "amazon_reviews_of_some_category_5.jsonl"
    rows = [review(f"fine stand number {i}", 5 - i % 5) for i in range(300)]
    write_lines(path, [*rows, b"garbage line"])
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["preprocess", "-i", str(path), "-o", str(tmp_path / "out")]) == 0
    out = "".join(capsys.readouterr().out.split())  # the cell may wrap: join its pieces
    assert "amazon_reviews_of_some_category_5.jsonl:301" in out.replace("│", "")


@pytest.mark.parametrize(
    ("mrjob_arg", "said"),
    [
        # mrjob's own parser raised ValueError: a 47-line traceback, exit 1
        ("--foo", "--mrjob-arg: mrjob refused --foo: unrecognized arguments: --foo"),
        # read "cannot write to the scratch folder …", hinting at the output folder
        ("--conf-path=MISSING", "--conf-path: MISSING does not exist"),
        # yaml.parser.ParserError traceback, exit 1
        ("--conf-path=BAD", "BAD: not a valid mrjob config"),
    ],
)
def test_a_bad_mrjob_arg_is_bad_input_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mrjob_arg: str, said: str
) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text("runners:\n  inline:\n    foo: [unclosed\n")
    names = {"MISSING": str(tmp_path / "none.conf"), "BAD": str(bad)}
    for key, value in names.items():
        mrjob_arg, said = mrjob_arg.replace(key, value), said.replace(key, value)
    argv = ["preprocess", "--input", str(_input(tmp_path)), "--output", str(tmp_path / "o")]
    assert main([*argv, "--runner", "inline", f"--mrjob-arg={mrjob_arg}"]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    if "not a valid" in said:
        assert "line 4" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("runner", "extra", "said"),
    [
        (
            "inline",
            ["--memory-budget", "8MB", "--workers", "2"],
            "--memory-budget and --workers do",
        ),
        ("local", ["--mrjob-arg=--no-check-input-paths"], "--mrjob-arg does not apply"),
        ("local", [], None),
    ],
)
def test_options_the_runner_does_not_use_are_named(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    runner: str,
    extra: list[str],
    said: str | None,
) -> None:
    """--memory-budget and --workers with --runner inline, --mrjob-arg with local: ignored
    without a word."""
    argv = ["preprocess", "-i", str(_input(tmp_path)), "-o", str(tmp_path / "o"), "--json"]
    assert main([*argv, "--runner", runner, *extra]) == 0
    err = capsys.readouterr().err
    if said is None:
        assert "not apply" not in err
    else:
        assert said in err and f"--runner {runner}: ignored" in err


def test_a_refused_output_folder_draws_no_progress_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal came under an empty "preprocess 0.0/73.0 kB ? 0 records/s" bar."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["preprocess", "-i", str(_input(tmp_path)), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds files that are not a dataset's" in err
    assert "records/s" not in err and not err.startswith("\n")


def test_a_read_only_output_is_refused_by_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A chmod 555 output holding an earlier set: the new folder took its mode, and writing into
    it failed as "cannot write to the scratch folder out/.o.preprocess-new-7173" (for a user;
    root writes anyway), an internal name, with the earlier set's protection unsaid."""
    out = tmp_path / "o"
    argv = ["preprocess", "-i", str(_input(tmp_path)), "-o", str(out), "--workers", "1"]
    assert main(argv) == 0
    before = (out / "stats.json").read_bytes()
    out.chmod(0o555)
    try:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"--output {out} is read-only" in err and "scratch" not in err
        assert "chmod u+w" in err and (out / "stats.json").read_bytes() == before
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".o")] == []
    finally:
        out.chmod(0o755)

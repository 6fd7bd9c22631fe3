"""`preprocess --input FOLDER`: a folder stands for its review files, as for `sentitop embed`."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.config import PreprocessConfig
from engine.errors import InputError
from engine.preprocess import run_preprocess
from tui.cli import main

from .conftest import assert_same_dataset, load_dataset, review, write_lines


def _folder(tmp_path: Path) -> Path:
    """b.jsonl, a.jsonl.gz (taken in name order), an empty c.jsonl, a stray binary, notes."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    b_lines = [review(f"b review {i} fine", 5 if i % 3 else 1) for i in range(40)]
    a_lines = [review(f"a text {i} poor", 1 if i % 2 else 4) for i in range(30)]
    write_lines(folder / "b.jsonl", b_lines)
    write_lines(folder / "a.jsonl.gz", a_lines, gz=True)
    (folder / "c.jsonl").write_bytes(b"")
    (folder / "stray.bin").write_bytes(gzip.compress(b"\x00\xff" * 50))
    (folder / "notes.txt").write_text("not reviews\n")
    (folder / "sub").mkdir()  # not recursed into
    return folder


def test_a_folder_is_its_review_files_sorted_and_stats_list_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "cannot read input mixed: Is a directory" (exit 2)."""
    folder = _folder(tmp_path)
    out = tmp_path / "out"
    assert main(["preprocess", "--input", str(folder), "--output", str(out), "--workers", "1",
                 "--json"]) == 0  # fmt: skip
    captured = capsys.readouterr()
    stats = json.loads(captured.out)
    taken = [str(folder / "a.jsonl.gz"), str(folder / "b.jsonl")]
    assert stats["inputs"] == taken and stats["lines_per_file"] == [30, 40]
    assert stats == json.loads((out / "stats.json").read_text())
    assert f"{folder}: 2 review file(s) taken" in captured.err
    codes = [w["code"] for w in stats["warnings"]]
    assert codes[:2] == ["empty_input_file", "unknown_input_file"]
    assert stats["warnings"][0]["message"] == f"{folder}: skipped 1 empty review file(s): c.jsonl"
    assert stats["warnings"][1]["message"].endswith("): notes.txt, stray.bin")
    said = " ".join(captured.err.split())  # rich wraps long lines
    assert "WARNING: " + stats["warnings"][0]["message"] in said
    assert "Traceback" not in captured.err

    explicit = tmp_path / "explicit"
    cfg = PreprocessConfig(inputs=taken, output=str(explicit), workers=1)
    run_preprocess(cfg)
    assert_same_dataset(load_dataset(out), load_dataset(explicit))


def test_folders_and_files_mix_in_the_order_given(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    extra = write_lines(tmp_path / "z.jsonl", [review("zed good", 5), review("zed bad", 1)])
    cfg = PreprocessConfig(inputs=[str(extra), str(folder)], output=str(tmp_path / "o"), workers=1)
    stats = run_preprocess(cfg)
    assert stats["inputs"] == [str(extra), str(folder / "a.jsonl.gz"), str(folder / "b.jsonl")]


@pytest.mark.parametrize(
    ("fill", "message"),
    [
        (lambda d: (d / "x.txt").write_text("x"), "folder holds no review file (.jsonl, "),
        (lambda d: (d / "x.jsonl").write_bytes(b""), "holds only empty review files (x.jsonl)"),
    ],
)
def test_a_folder_with_nothing_usable_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fill: Callable[[Path], object], message: str
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    fill(folder)
    out = tmp_path / "out"
    assert main(["preprocess", "--input", str(folder), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith(f"bad input: {folder}: ") and message in err
    assert "Traceback" not in err and not out.exists()
    with pytest.raises(InputError, match=str(folder)):
        run_preprocess(PreprocessConfig(inputs=[str(folder)], output=str(out)))


def test_control_characters_in_file_names_are_shown_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file named with ESC [2J cleared the terminal when the error (and a folder's warning
    about its other files) named it; the names are shown with the escape written out."""
    folder = tmp_path / "data"
    folder.mkdir()
    write_lines(
        folder / "good.jsonl", [review(f"fine stand {i} works", 5 - i % 5) for i in range(60)]
    )
    (folder / "notes\x1b[2J.txt").write_text("x")
    bad = tmp_path / "bad\x1b[2J\x07.jsonl"
    bad.write_text("garbage\n")
    assert main(["preprocess", "--input", str(folder), "--output", str(tmp_path / "o1")]) == 0
    err = capsys.readouterr().err
    assert "notes\\x1b[2J.txt" in err and "\x1b[2J" not in err
    assert main(["preprocess", "--input", str(bad), "--output", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert "bad\\x1b[2J\\x07.jsonl" in err and "\x1b" not in err and "\x07" not in err

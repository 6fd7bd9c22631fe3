"""`sentitop predict` input: a blank TEXT is refused, a file's UTF-8 signature is not text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.cli import main
from tui.cli.commands.predict import read_lines


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_text_is_refused_not_scored(
    blank: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["predict", str(tmp_path / "no-run"), "great guitar", blank])
    captured = capsys.readouterr()
    assert rc == 2 and captured.out == ""
    assert "TEXT 2 is empty or only spaces" in captured.err and "Traceback" not in captured.err


def test_a_files_utf8_signature_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "texts.txt"
    path.write_bytes(b"\xef\xbb\xbfgreat guitar\r\n\r\nbroke in a day\n")
    assert read_lines(str(path)) == ["great guitar", "broke in a day"]

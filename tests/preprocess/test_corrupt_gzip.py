"""A truncated or damaged .gz input is a clear error naming the file wherever it is read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engine.config import PreprocessConfig
from engine.embeddings.sources import _text_field, iter_file_texts
from engine.errors import InputError
from engine.preprocess.readers import detect_spec, iter_records
from tests.bad_inputs import damaged_gzip, truncated_gzip


@pytest.mark.parametrize("write", [truncated_gzip, damaged_gzip])
def test_every_reader_names_the_damaged_file(tmp_path: Path, write: Callable[[Path], Path]) -> None:
    path = write(tmp_path)
    cfg = PreprocessConfig(inputs=[str(path)], output=str(tmp_path / "out"))
    with pytest.raises(InputError, match=r"truncated|damaged") as err:
        list(iter_records(str(path), cfg))  # what eval and the embeddings corpus read
    assert str(path) in err.value.message and "not a readable gzip file" in err.value.message
    with pytest.raises(InputError, match="not a readable gzip file"):  # `sentitop embed`
        list(iter_file_texts(str(path), "jsonl", "reviewText"))


def test_the_format_probe_names_a_damaged_file(tmp_path: Path) -> None:
    path = damaged_gzip(tmp_path)  # the first bytes already fail (a truncated file's do not)
    with pytest.raises(InputError, match="not a readable gzip file"):
        detect_spec(str(path), PreprocessConfig(inputs=[str(path)], output="-"))
    with pytest.raises(InputError, match="not a readable gzip file"):
        _text_field(str(path))


@pytest.mark.parametrize(
    "runner", ["local", "inline", pytest.param("spark", marks=pytest.mark.slow)]
)
def test_every_runner_says_a_truncated_gzip_in_two_lines(
    tmp_path: Path, runner: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """On Spark the map task's InputError came back as 170 lines of Java and Python
    tracebacks (exit 1); mrjob's inline runner printed "Error while reading from" first."""
    from tui.cli import main

    path = truncated_gzip(tmp_path)
    out = tmp_path / "out"
    assert main(["preprocess", "-i", str(path), "-o", str(out), "--runner", runner, "--json"]) == 2
    err = [ln for ln in capfd.readouterr().err.splitlines() if "incubator modules" not in ln]
    assert err[0].startswith(f"bad input: {path}: not a readable gzip file"), err
    assert err[1].startswith("  hint: the file is truncated or damaged") and len(err) == 2, err
    assert not out.exists()

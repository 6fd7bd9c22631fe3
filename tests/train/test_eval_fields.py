"""`sentitop eval` with a field name no line of the file has: the error names the option, the
field and the fields the file holds, instead of counting every line as skipped."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.errors import InputError
from engine.sentiment.evaluate import read_labelled


def _run(tmp_path: Path, **settings: Any) -> Any:
    """What read_labelled needs of a loaded run: its folder and preprocessing settings."""
    return SimpleNamespace(
        run_dir=tmp_path, encoder=SimpleNamespace(settings={"format": "auto", **settings})
    )


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def _amazon(n: int) -> list[dict[str, Any]]:
    return [{"reviewText": f"fine item {i}", "overall": 5 if i % 2 else 1} for i in range(n)]


@pytest.mark.parametrize("option", ["label_field", "text_field", "rating_field"])
def test_a_field_no_line_has_is_named_with_its_option(tmp_path: Path, option: str) -> None:
    """`--label-field nosuch` said "no usable review in reviews.jsonl (skipped: 300
    missing_rating)", `--text-field nosuch` "300 missing_text": as if the file were bad."""
    flag = "--" + option.replace("_", "-")
    path = _write(tmp_path / "reviews.jsonl", _amazon(300))
    with pytest.raises(InputError) as raised:
        read_labelled(_run(tmp_path), [str(path)], fields={option: "nosuch"})
    assert str(raised.value) == (
        f"{flag} 'nosuch': no line of {path} has this field; fields seen: overall, reviewText"
    )
    assert raised.value.hint is not None and flag in raised.value.hint


def test_a_misspelt_field_is_suggested_and_gzip_files_are_probed(tmp_path: Path) -> None:
    path = _write(tmp_path / "office.jsonl.gz", _amazon(40))
    with pytest.raises(InputError, match="--label-field 'overal': no line") as raised:
        read_labelled(_run(tmp_path), [str(path)], fields={"label_field": "overal"})
    assert "fields seen: overall, reviewText" in str(raised.value)
    assert raised.value.hint is not None
    assert raised.value.hint.startswith("did you mean --label-field overall?")


def test_a_field_the_user_did_not_name_is_described_as_the_runs(tmp_path: Path) -> None:
    """`--text-field text` alone keeps the rating field the run reads ('overall' by default):
    a file with `rating` instead is told so, with the option that names the files' own."""
    rows = [{"text": f"good {i}", "rating": 5} for i in range(30)]
    path = _write(tmp_path / "other.jsonl", rows)
    with pytest.raises(InputError) as raised:
        read_labelled(_run(tmp_path), [str(path)], fields={"text_field": "text"})
    message, hint = str(raised.value), raised.value.hint or ""
    assert message.startswith("the rating field 'overall': no line of ")
    assert message.endswith("fields seen: rating, text")
    assert "--rating-field" in hint and "'overall' when none is named" in hint


def test_nearly_every_line_missing_it_is_a_wrong_name_a_few_are_skipped_lines(
    tmp_path: Path,
) -> None:
    """One line in 300 with the field is a wrong name still; a field absent from some lines
    (or null on all) is counted as skipped lines as before, or named with the count."""
    rows = [{"text": f"item {i}", "stars": 5 if i % 2 else 1} for i in range(300)]
    rows[7]["sentiment"] = 1
    path = _write(tmp_path / "almost.jsonl", rows)
    fields: dict[str, str | None] = {"text_field": "text", "label_field": "sentiment"}
    with pytest.raises(InputError, match=r"299 of 300 lines of .* lack a value for it"):
        read_labelled(_run(tmp_path), [str(path)], fields=fields)
    for row in rows[:50]:
        row["sentiment"] = row["stars"] // 5
    _write(path, rows)
    texts, labels = read_labelled(_run(tmp_path), [str(path)], fields=fields)
    assert len(texts) == 50 and set(labels) == {0, 1}  # the rest skipped, not an error
    nulls = [{"text": f"item {i}", "sentiment": None} for i in range(60)]
    with pytest.raises(InputError, match=r"60 of 60 lines .* lack a value .*fields seen: sent"):
        read_labelled(_run(tmp_path), [str(_write(path, nulls))], fields=fields)


def test_files_that_cannot_be_read_keep_their_own_errors(tmp_path: Path) -> None:
    """The check judges records only: junk lines stay the 'no usable review' error, and files
    with the right fields are read as before."""
    junk = tmp_path / "junk.jsonl"
    junk.write_text("{junk\n" * 5)
    fields: dict[str, str | None] = {"label_field": "nosuch"}
    with pytest.raises(InputError, match=r"no usable review .*5 malformed_json"):
        read_labelled(_run(tmp_path), [str(junk)], Counter(), fields)
    path = _write(tmp_path / "fine.jsonl", _amazon(20))
    texts, labels = read_labelled(_run(tmp_path), [str(path)], fields={"text_field": "reviewText"})
    assert len(texts) == 20 and list(labels) == [i % 2 for i in range(20)]


def test_eval_exits_2_naming_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import engine.sentiment.evaluate as evaluate
    import tui.cli.commands.evaluate as command
    from tui.cli import main

    monkeypatch.setattr(command, "classifier_folder", Path)
    run = _run(tmp_path)
    run.from_checkpoint = None
    monkeypatch.setattr(evaluate, "load_run", lambda folder: run)  # reading needs no model
    path = _write(tmp_path / "reviews.jsonl", _amazon(300))
    argv = ["eval", str(tmp_path), "--input", str(path)]
    assert main([*argv, "--label-field", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "--label-field 'nosuch': no line of" in err and "fields seen: overall, reviewText" in err
    assert "missing_rating" not in err
    assert main([*argv, "--text-field", "nosuch"]) == 2
    assert "--text-field 'nosuch': no line of" in capsys.readouterr().err

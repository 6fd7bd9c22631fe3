"""The mrjob runners read each input with its own record format, as the local runner does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import assert_same_dataset, review, write_lines

Run = Callable[..., dict[str, Any]]
COUNTS = (
    "read",
    "kept",
    "skipped",
    "lines_per_file",
    "skipped_per_file",
    "empty_files",
    "warnings",
)


def _food(text: str, score: int) -> bytes:
    """A Fine Food line (fields Text/Score, not reviewText/overall)."""
    return json.dumps({"Id": 1, "Text": text, "Score": score}).encode()


def test_same_named_files_in_two_folders_keep_their_own_format(
    tmp_path: Path, preprocess: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inline runner told relative inputs apart by file name: b/reviews.jsonl (Fine Food)
    was read with a/reviews.jsonl's McAuley fields, and all its lines were skipped as
    missing_text."""
    monkeypatch.chdir(tmp_path)  # inputs as a user types them, relative
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    mcauley = write_lines(
        Path("a", "reviews.jsonl"),
        [review(f"guitar string {i} sounds great", 5 if i % 3 else 1) for i in range(30)],
    )
    food = write_lines(
        Path("b", "reviews.jsonl"),
        [_food(f"coffee bean {i} tastes stale", 1 if i % 2 else 5) for i in range(20)],
    )
    local = preprocess([mcauley, food])
    inline = preprocess([mcauley, food], runner="inline")
    assert_same_dataset(local, inline)
    assert {k: inline["stats"][k] for k in COUNTS} == {k: local["stats"][k] for k in COUNTS}
    assert inline["stats"]["lines_per_file"] == [30, 20]
    assert inline["stats"]["skipped_total"] == 0


def test_a_file_given_twice_is_read_once_by_every_runner(tmp_path: Path, preprocess: Run) -> None:
    """`-i data data/x.jsonl` read x.jsonl twice; the inline runner then counted both copies'
    lines for the first and listed the second as an empty file."""
    folder = tmp_path / "data"
    folder.mkdir()
    path = write_lines(
        folder / "x.jsonl", [review(f"pedal {i} works", 5 if i % 2 else 2) for i in range(10)]
    )
    local = preprocess([folder, path])
    inline = preprocess([folder, path], runner="inline")
    assert_same_dataset(local, inline)
    for got in (local, inline):
        stats = got["stats"]
        assert stats["inputs"] == [str(path)]
        assert (stats["read"], stats["lines_per_file"], stats["empty_files"]) == (10, [10], [])
        # ten reviews hold out none at the default test fraction: training would refuse them
        assert [w["code"] for w in stats["warnings"]] == ["repeated_input_file", "empty_test_split"]
        assert str(path) in stats["warnings"][0]["message"]


def test_names_with_glob_characters_are_read_as_themselves(
    tmp_path: Path, preprocess: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mrjob globs its inputs: `[i]d/[b]y*.jsonl` matched nothing and the inline runner
    failed with a traceback ("Input path ... does not exist"), a file that exists."""
    monkeypatch.chdir(tmp_path)  # relative, as typed: an inline task runs in another folder
    folder = Path("[i]d")
    folder.mkdir()
    rows = [review(f"strap {i} [bold]fits[/] well", 5 if i % 3 else 1) for i in range(30)]
    path = write_lines(folder / "[b]y*.jsonl", rows)
    other = write_lines(Path("plain.jsonl"), [review(f"case {i} cracked", 2) for i in range(9)])
    local = preprocess([folder, other])
    inline = preprocess([folder, other], runner="inline")
    assert_same_dataset(local, inline)
    assert inline["stats"]["inputs"] == [str(path), str(other)]
    assert inline["stats"]["lines_per_file"] == [30, 9]


@pytest.mark.parametrize("runner", ["hadoop", "emr"])
def test_a_name_with_glob_characters_is_refused_where_mrjob_uploads_it(
    tmp_path: Path, preprocess: Run, runner: str
) -> None:
    """Hadoop and EMR upload local inputs by the name mrjob was given, which must be escaped
    for its glob: the upload would not find the file. Said before anything starts."""
    from engine.errors import InputError

    path = write_lines(tmp_path / "[b]y.jsonl", [review("strap fits", 5)])
    with pytest.raises(InputError, match=f"--runner {runner} cannot upload a file whose name"):
        preprocess([path], runner=runner)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["[b]y.jsonl"]


def test_uploaded_copies_are_named_as_mrjob_names_them() -> None:
    """Hadoop and EMR map an uploaded copy, named by mrjob's upload manager."""
    from engine.preprocess.run_mrjob import input_uris

    uris = input_uris(["a/reviews.jsonl", "b/reviews.jsonl", "s3://bucket/reviews.jsonl"])
    assert [u[1] for u in uris[:2]] == ["reviews.jsonl", "reviews-1.jsonl"]
    assert uris[2] == ["s3://bucket/reviews.jsonl"]


@pytest.mark.parametrize("how", ["bad input", "interrupted"])
def test_a_failed_inline_job_leaves_no_scratch_folder(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mrjob keeps a failed job's local scratch for debugging: a trial's truncated gzip (exit
    2) and a Ctrl-C each left a /tmp/run_mrjob.* folder behind, 133 MB for a 40 MB input."""
    import gzip
    import tempfile

    from engine.config import PreprocessConfig
    from engine.errors import InputError
    from engine.preprocess import run_preprocess
    from engine.preprocess.run_mrjob import PreprocessJob

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    lines = b"".join(review(f"sturdy stand {i}", 5 if i % 2 else 1) + b"\n" for i in range(400))
    path = tmp_path / "r.jsonl.gz"
    path.write_bytes(gzip.compress(lines)[:-40] if how == "bad input" else gzip.compress(lines))
    if how == "interrupted":

        def stop(self: Any, *args: Any) -> Any:
            raise KeyboardInterrupt

        monkeypatch.setattr(PreprocessJob, "reduce_text", stop)
    cfg = PreprocessConfig(inputs=[str(path)], output=str(tmp_path / "o"), runner="inline")
    with pytest.raises(InputError if how == "bad input" else KeyboardInterrupt):
        run_preprocess(cfg)
    assert [p.name for p in scratch.iterdir() if p.name.startswith("run_mrjob")] == []


def test_a_file_of_garbage_beside_good_files_is_warned_about_by_name(
    tmp_path: Path, preprocess: Run
) -> None:
    """Binary data and half-written JSON beside good files: exit 0 with no warning, the share
    skipped over all files being small; the only trace was a count in the table."""
    good = write_lines(
        tmp_path / "good.jsonl",
        [review(f"amp {i} hums loudly" if i % 3 else f"amp {i} is great", 5 if i % 3 else 1)
         for i in range(200)],
    )  # fmt: skip
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"".join(bytes([0xFF, 0xFE, 0x80 + i, 0x00]) + b"\n" for i in range(12)))
    half = write_lines(tmp_path / "half.jsonl", [b'{"reviewText": "fine", "overall": 5'] * 3)
    local = preprocess([good, junk, half])
    inline = preprocess([good, junk, half], runner="inline")
    assert_same_dataset(local, inline)
    assert {k: inline["stats"][k] for k in COUNTS} == {k: local["stats"][k] for k in COUNTS}
    stats = local["stats"]
    assert stats["lines_per_file"] == [200, 12, 3]
    assert stats["skipped_per_file"] == [{}, {"invalid_utf8": 12}, {"malformed_json": 3}]
    shared = [w for w in stats["warnings"] if w["code"] == "skipped_share"]
    assert not shared  # 15 of 215 lines: under the share over all files
    named = [w["message"] for w in stats["warnings"] if w["code"] == "skipped_share_file"]
    assert len(named) == 2
    assert named[0].startswith(f"{junk}: skipped 100% of its 12 lines")
    assert "12 invalid_utf8" in named[0] and "binary data" in named[0]
    assert named[1].startswith(f"{half}: skipped 100% of its 3 lines")

"""`synth`: bad arguments exit 2 in one line; bounded memory, disk check, cleanup on SIGTERM."""

from __future__ import annotations

import gzip
import importlib
import json
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import h5py
import orjson
import pytest

from engine.errors import InputError
from engine.sentiment.splits import check_splits
from engine.synth import generate
from engine.synth.dataset import write_synthetic_dataset
from engine.synth.size import format_size, parse_count
from tests.stall import stage_written
from tui.cli.main import main

synth_generate = importlib.import_module("engine.synth.generate")  # the package exports a function


class _Usage(NamedTuple):
    total: int
    used: int
    free: int


def _free_space(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: _Usage(free, 0, free))


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    """Run `sentitop synth ARGV`: exit 2 and a `bad input` message holding every needle."""
    code = main(["synth", *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("bad input: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


# 1. --seed


def test_negative_seed_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _refused(capsys, ["-o", str(tmp_path / "s.jsonl"), "--size", "50KB", "--seed", "-1"], "--seed")
    _refused(
        capsys, ["--dataset", str(tmp_path / "d"), "--reviews", "1k", "--seed", "-3"], "--seed"
    )
    assert _leftovers(tmp_path) == []
    with pytest.raises(InputError, match="--seed"):
        generate(tmp_path / "s.jsonl", 50_000, seed=-1)
    with pytest.raises(InputError, match="--seed"):
        write_synthetic_dataset(tmp_path / "d", 10, 10, seed=-1)
    assert _leftovers(tmp_path) == []


# 2. --output naming a folder


@pytest.mark.parametrize("suffix", ["/", ""])
def test_output_naming_a_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    _refused(capsys, ["-o", str(tmp_path) + suffix, "--size", "50KB"], "--output", "folder")
    assert _leftovers(tmp_path) == []


def test_output_dot_slash_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _refused(capsys, ["-o", "./", "--size", "50KB"], "--output", "'./' is a folder")
    assert _leftovers(tmp_path) == []


# 3. --dataset naming a file


def test_dataset_naming_an_existing_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = tmp_path / "notes.txt"
    existing.write_text("keep me")
    _refused(capsys, ["--dataset", str(existing), "--reviews", "5000"], "--dataset", "is a file")
    assert existing.read_text() == "keep me"
    _refused(capsys, ["--dataset", str(existing / "sub"), "--reviews", "5000"], "--dataset")
    assert _leftovers(tmp_path) == ["notes.txt"]


# 4. free disk space and bounded memory


def test_size_larger_than_the_free_space_is_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _free_space(monkeypatch, 5 * 1000**3)
    _refused(capsys, ["-o", str(tmp_path / "h.jsonl"), "--size", "10TB"], "10.0 TB", "5.0 GB")
    # gzip needs about half the uncompressed size (the ratio is ≈ 2.3)
    _refused(capsys, ["-o", str(tmp_path / "h.jsonl.gz"), "--size", "20GB"], "10.0 GB", "5.0 GB")
    _refused(capsys, ["--dataset", str(tmp_path / "d"), "--reviews", "30M"], "--reviews", "5.0 GB")
    assert _leftovers(tmp_path) == []


def test_disk_check_lets_a_file_that_fits_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _free_space(monkeypatch, 60_000)
    assert generate(tmp_path / "fits.jsonl", 50_000)["bytes"] <= 50_000
    with pytest.raises(InputError, match=r"60\.0 KB free"):
        generate(tmp_path / "too-big.jsonl", 70_000)


def test_huge_size_plans_a_bounded_pool() -> None:
    records = 10 * 1000**4 / 750  # 10 TB of lines
    started = time.perf_counter()
    pool, one_off = synth_generate.plan_pool(records, None, synth_generate.MAX_POOL)
    assert pool == synth_generate.MAX_POOL
    assert 0.14 < one_off < 0.15  # nearly every distinct text is a one-off at this size
    assert time.perf_counter() - started < 10
    assert synth_generate.solve_pool_size(records) == synth_generate.MAX_POOL


def test_huge_size_generates_with_bounded_memory_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10 TB asked for (disk check passed): the first block is written without allocating in
    proportion to the size; stopping there leaves no file."""
    _free_space(monkeypatch, 10**15)
    monkeypatch.setattr(synth_generate, "MAX_POOL", 20_000)
    monkeypatch.setattr(synth_generate, "BLOCK", 4096)  # a short first block: a fast test

    class Stop(Exception):
        pass

    def stop(_done: int) -> None:
        raise Stop

    tracemalloc.start()
    try:
        with pytest.raises(Stop):
            generate(tmp_path / "huge.jsonl", 10 * 1000**4, progress=stop)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 500e6, f"{peak / 1e6:.0f} MB"
    assert _leftovers(tmp_path) == []


def test_a_capped_pool_keeps_the_distinct_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(synth_generate, "MAX_POOL", 300)
    path = tmp_path / "capped.jsonl"
    stats = generate(path, 2_000_000, seed=3, malformed_rate=0.0)
    texts: Counter[str] = Counter()
    for line in path.read_bytes().splitlines():
        try:
            texts[orjson.loads(line)["reviewText"]] += 1
        except orjson.JSONDecodeError:
            continue  # a Python-literal line
    share = len(texts) / sum(texts.values())
    assert share == pytest.approx(0.15, abs=0.03)
    assert 1 - stats["duplicate_rate"] == pytest.approx(share, abs=0.01)


# 5. a size too small for one record


@pytest.mark.parametrize("size", ["100", "1", "999"])
def test_size_below_one_record_is_refused_naming_the_minimum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], size: str
) -> None:
    _refused(capsys, ["-o", str(tmp_path / "s.jsonl"), "--size", size], "--size", "1.0 KB")
    assert _leftovers(tmp_path) == []


def test_the_minimum_size_holds_a_record(tmp_path: Path) -> None:
    for seed in range(8):
        stats = generate(tmp_path / "min.jsonl", synth_generate.MIN_SIZE, seed=seed)
        assert stats["records"] >= 1
        assert 0 < (tmp_path / "min.jsonl").stat().st_size <= synth_generate.MIN_SIZE


def test_zero_records_is_never_reported_as_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(synth_generate, "MIN_SIZE", 1)
    with pytest.raises(InputError, match="--size"):
        generate(tmp_path / "empty.jsonl", 50)
    assert _leftovers(tmp_path) == []


# 6. the file name and the compression agree


def test_a_gz_name_means_gzip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.jsonl.gz"
    assert main(["synth", "-o", str(path), "--size", "20KB", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["gzip"] is True
    assert len(gzip.decompress(path.read_bytes())) == stats["bytes"]
    plain = tmp_path / "x.jsonl"
    assert main(["synth", "-o", str(plain), "--size", "20KB", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gzip"] is False
    assert plain.read_bytes() == gzip.decompress(path.read_bytes())


def test_gzip_flag_with_a_plain_name_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _refused(capsys, ["-o", str(tmp_path / "x.jsonl"), "--size", "20KB", "--gzip"], "--gzip", ".gz")
    assert _leftovers(tmp_path) == []
    with pytest.raises(InputError, match="--gzip"):
        generate(tmp_path / "x.jsonl", 20_000, gzip=True)


# 7. --dataset settings that train would refuse


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--reviews", "5000", "--test-fraction", "0"], ("--test-fraction",)),
        (["--reviews", "5000", "--test-fraction", "1"], ("--test-fraction",)),
        (["--reviews", "1"], ("--reviews", "15")),
        (["--reviews", "10"], ("--reviews", "1 test", "15")),
        (["--reviews", "20", "--test-fraction", "0.95"], ("1 train", "--reviews 30")),
        (["--reviews", "2.5"], ("--reviews", "whole number")),
        (["--reviews", "0"], ("--reviews",)),
        # 10 G words: the word list ran the box out of memory (OOM kill, a stage folder left)
        (["--reviews", "1000", "--vocab-size", "10000000000"], ("--vocab-size", "2,000,000")),
        (["--reviews", "1000", "--vocab-size", "1"], ("--vocab-size",)),
    ],
)
def test_dataset_settings_without_both_splits_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needles: tuple[str, ...]
) -> None:
    _refused(capsys, ["--dataset", str(tmp_path / "d"), *argv], *needles)
    assert _leftovers(tmp_path) == []


def test_the_smallest_dataset_allowed_trains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "d"
    assert main(["synth", "--dataset", str(out), "--reviews", "15", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["train"], stats["test"]) == (13, 2)
    with h5py.File(out / "dataset.h5") as h5:
        check_splits(out, h5["train/labels"][()], h5["test/labels"][()])


def test_every_split_of_two_rows_or_more_has_both_labels(tmp_path: Path) -> None:
    for seed in range(12):
        out = tmp_path / f"d{seed}"
        stats = write_synthetic_dataset(out, 3, 2, seq_len=5, vocab_size=50, seed=seed)
        with h5py.File(out / "dataset.h5") as h5:
            train, test = h5["train/labels"][()], h5["test/labels"][()]
        check_splits(out, train, test)
        assert stats["positive"] == int(train.sum() + test.sum())


@pytest.mark.parametrize(
    ("text", "expected"), [("5000", 5000), ("2.5k", 2500), ("1.1k", 1100), ("30M", 30_000_000)]
)
def test_parse_count_reads_whole_numbers(text: str, expected: int) -> None:
    assert parse_count(text, name="--reviews") == expected


@pytest.mark.parametrize("text", ["2.5", "0", "1.0001k", "abc", "-3"])
def test_parse_count_rejects_fractions_and_non_positive(text: str) -> None:
    with pytest.raises(InputError, match="--reviews"):
        parse_count(text, name="--reviews")


def test_format_size() -> None:
    assert [format_size(n) for n in (999, 1000, 5 * 10**9, 10**13)] == [
        "999 B",
        "1.0 KB",
        "5.0 GB",
        "10.0 TB",
    ]


# 8. SIGTERM


def _terminate_when(argv: list[str], cwd: Path, started: Any) -> subprocess.CompletedProcess[str]:
    """Run `python -m tui.cli synth ARGV` in `cwd`, SIGTERM it once `started()` is true."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "synth", *argv],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not started() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize("name", ["huge.jsonl", "huge.jsonl.gz"])
def test_sigterm_removes_the_partial_file(tmp_path: Path, name: str) -> None:
    def writing() -> bool:
        partial = list(tmp_path.glob(f".{name}.*.partial"))
        return bool(partial) and partial[0].stat().st_size > 0

    done = _terminate_when(["-o", name, "--size", "2GB", "--json"], tmp_path, writing)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "terminated" in done.stderr
    assert "Traceback" not in done.stderr
    assert _leftovers(tmp_path) == []


def test_sigterm_removes_the_partial_dataset(tmp_path: Path) -> None:
    out = tmp_path / "new" / "ds"
    done = _terminate_when(
        ["--dataset", str(out), "--reviews", "5M", "--json"],
        tmp_path,
        lambda: stage_written(out),
    )
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert _leftovers(tmp_path) == []


def test_a_users_file_named_like_the_output_plus_tmp_is_left_alone(tmp_path: Path) -> None:
    """synth wrote into OUTPUT.tmp and renamed it: a user's own file of that name was
    overwritten, then gone. Its partial file now has a name of its own."""
    mine = tmp_path / "reviews.jsonl.tmp"
    mine.write_text("my notes\n")
    assert main(["synth", "-o", str(tmp_path / "reviews.jsonl"), "--size", "20KB"]) == 0
    assert mine.read_text() == "my notes\n"
    assert _leftovers(tmp_path) == ["reviews.jsonl", "reviews.jsonl.tmp"]

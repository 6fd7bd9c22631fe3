"""Memory budget: the spill path gives the in-memory path's bytes on the real files; a full
disk, an unwritable scratch folder and a killed worker leave no output taken as done."""

from __future__ import annotations

import filecmp
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.config import PreprocessConfig
from engine.errors import InputError, SentitopError, StorageError
from engine.events import Emitter
from engine.preprocess import run_preprocess
from engine.preprocess.spill import Spiller, bucket_of, plan_spill
from engine.preprocess.text import clean_text
from tests.preprocess.conftest import DATA, MUSICAL, needs_spark, write_lines

BEAUTY = DATA / "amazon2018_All_Beauty_5.jsonl.gz"
OFFICE = DATA / "amazon2018_Office_Products_5.balanced9000.jsonl.gz"
VOLATILE = ("seconds", "mb_per_s", "cpu_seconds", "memory_budget", "spill")

needs_data = pytest.mark.skipif(
    not (MUSICAL.exists() and BEAUTY.exists() and OFFICE.exists()),
    reason=f"real review files not in {DATA}",
)


class ListSink:
    """Collects events."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def write(self, event: dict[str, Any]) -> None:
        self.events.append(dict(event))

    def close(self) -> None:
        pass


def _run(
    inputs: list[Path], out: Path, workers: int, budget: int | None, title_rows: bool = False
) -> dict[str, Any]:
    cfg = PreprocessConfig(
        inputs=[str(p) for p in inputs], output=str(out), workers=workers, memory_budget=budget,
        title_rows=title_rows,
    )  # fmt: skip
    return run_preprocess(cfg)


def _assert_same(a: Path, b: Path) -> None:
    assert filecmp.cmp(a / "dataset.h5", b / "dataset.h5", shallow=False)
    assert filecmp.cmp(a / "vocab.json", b / "vocab.json", shallow=False)
    sa, sb = (json.loads((d / "stats.json").read_text()) for d in (a, b))
    for key in VOLATILE:
        sa.pop(key)
        sb.pop(key)
    assert sa == sb


TWO_CLASSES = [
    b'{"reviewText": "fine words here", "overall": 5}',
    b'{"reviewText": "poor words there", "overall": 1}',
]


def _many_distinct(tmp_path: Path) -> Path:
    """≈ 20 MB of distinct reviews: several map tasks, so two workers both map."""
    filler = "some more words to make the line longer " * 3
    lines = [
        json.dumps({"reviewText": f"distinct review {i} {filler}", "overall": i % 5 + 1}).encode()
        for i in range(140_000)
    ]
    return write_lines(tmp_path / "in.jsonl", lines)


def _leftovers(out: Path) -> list[str]:
    """Hidden scratch entries left in ``out`` (none when a failed run removed the folder)."""
    return [p.name for p in out.iterdir() if p.name.startswith(".")] if out.exists() else []


@needs_data
@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_spill_path_is_byte_identical_to_the_in_memory_path(tmp_path: Path, workers: int) -> None:
    inputs = [MUSICAL, BEAUTY, OFFICE]
    memory = _run(inputs, tmp_path / "memory", workers, None)
    spilled = _run(inputs, tmp_path / "spill", workers, 2 << 20)
    assert memory["spill"]["runs"] == 0
    assert spilled["spill"]["runs"] >= 2 * workers  # spilled during the map, not only at its end
    assert spilled["spill"]["buckets"] > workers
    assert spilled["memory_budget"] == 2 << 20
    assert spilled["workers"] == memory["workers"] == workers
    _assert_same(tmp_path / "memory", tmp_path / "spill")
    assert _leftovers(tmp_path / "spill") == []


@needs_data
@pytest.mark.slow
def test_title_rows_spill_to_the_in_memory_paths_bytes(tmp_path: Path) -> None:
    inputs = [MUSICAL, BEAUTY]
    memory = _run(inputs, tmp_path / "memory", 2, None, title_rows=True)
    spilled = _run(inputs, tmp_path / "spill", 2, 2 << 20, title_rows=True)
    assert spilled["spill"]["runs"] >= 2 and memory["title_rows"] > 10_000
    _assert_same(tmp_path / "memory", tmp_path / "spill")


@needs_data
def test_spill_with_one_worker_on_one_file(tmp_path: Path) -> None:
    memory = _run([MUSICAL], tmp_path / "memory", 1, None)
    spilled = _run([MUSICAL], tmp_path / "spill", 1, 1 << 20)
    assert spilled["spill"]["runs"] >= 2 and memory["kept"] == spilled["kept"] > 10_000
    _assert_same(tmp_path / "memory", tmp_path / "spill")


def test_spill_on_small_synthetic_lines_with_two_workers(tmp_path: Path) -> None:
    """No real files needed: many distinct texts, duplicates across both workers' halves."""
    filler = "some more words to make the line longer " * 3
    lines = [
        json.dumps(
            {"reviewText": f"text {i % 70_000} is good {i % 13} {filler}", "overall": i % 5 + 1}
        )
        for i in range(140_000)
    ]
    src = tmp_path / "in.jsonl"
    write_lines(src, [line.encode() for line in lines])
    _run([src], tmp_path / "memory", 2, None)
    spilled = _run([src], tmp_path / "spill", 2, 1 << 20)
    assert spilled["spill"]["runs"] > 2 and spilled["workers"] == 2
    _assert_same(tmp_path / "memory", tmp_path / "spill")


@pytest.mark.parametrize("workers", [1, 2])
def test_spill_with_empty_buckets_is_byte_identical(tmp_path: Path, workers: int) -> None:
    """Heavily duplicated input under a tiny budget: fewer distinct texts than buckets, so some
    bucket holds none. Its reduced part had no token matrix and stashing it failed an assert
    (a traceback, exit 1); it gives the in-memory path's bytes."""
    distinct, copies = 80, 16
    texts = [
        f"review {i} " + " ".join(f"word{(i * 7 + j) % 500}" for j in range(560))
        for i in range(distinct)
    ]  # ≈ 4 KB each: 80 of them pass a worker's spill threshold (≤ 256 KiB at 1 MiB)
    lines = [
        json.dumps({"reviewText": texts[k % distinct], "overall": k % 5 + 1}).encode()
        for k in range(distinct * copies)
    ]
    src = write_lines(tmp_path / "in.jsonl", lines)
    seq_len = PreprocessConfig(inputs=[str(src)], output=str(tmp_path / "spill")).seq_len
    plan = plan_spill(1 << 20, workers, src.stat().st_size, seq_len)
    assert len({bucket_of(clean_text(t), plan.buckets) for t in texts}) < plan.buckets
    memory = _run([src], tmp_path / "memory", workers, None)
    spilled = _run([src], tmp_path / "spill", workers, 1 << 20)
    assert spilled["spill"]["runs"] >= workers and spilled["spill"]["buckets"] == plan.buckets
    assert memory["kept"] == spilled["kept"] == distinct and spilled["workers"] == workers
    _assert_same(tmp_path / "memory", tmp_path / "spill")


def test_budget_below_the_minimum_is_exit_2(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    write_lines(src, [b'{"reviewText": "fine", "overall": 5}'])
    with pytest.raises(InputError, match="--memory-budget"):
        _run([src], tmp_path / "out", 1, 1000)
    with pytest.raises(InputError) as info:
        _run([src], tmp_path / "out", 1, 999_999)
    assert info.value.message == (
        "--memory-budget 999,999 bytes is below the smallest accepted: 1MB (1,000,000 bytes)"
    )
    with pytest.raises(InputError, match="--memory-budget 1 byte is below"):
        _run([src], tmp_path / "out", 1, 1)
    with pytest.raises(InputError, match="the one usable review"):  # 1MB passes the budget
        _run([src], tmp_path / "out", 1, 1_000_000)  # check (it was refused while 1MiB)


def test_budget_above_the_available_memory_is_warned_about_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--memory-budget 1000TB (a slip for 1000MB) was taken silently: the runner then never
    spills and the machine runs out of memory. Said before the run starts and in stats.json;
    a budget that fits says nothing."""
    from tui.cli import main

    src = tmp_path / "in.jsonl"
    write_lines(src, TWO_CLASSES)
    argv = ["preprocess", "-i", str(src), "--workers", "1", "--json", "--memory-budget"]
    assert main([*argv, "1000TB", "-o", str(tmp_path / "big")]) == 0
    out, err = capsys.readouterr()
    codes = [w["code"] for w in json.loads(out)["warnings"]]
    assert codes == ["memory_budget_above_available", "empty_test_split"]  # two reviews
    said = " ".join(err.split())
    assert said.startswith("WARNING: --memory-budget 1,000,000.00 GB is more than the ")
    assert said.count("may run out of memory first") == 2  # at the start, and with the stats
    assert main([*argv, "64MB", "-o", str(tmp_path / "fits")]) == 0
    out, err = capsys.readouterr()
    assert [w["code"] for w in json.loads(out)["warnings"]] == ["empty_test_split"]
    assert "--memory-budget" not in err


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (a real full disk); skipped where mounting is not allowed."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@needs_data
@pytest.mark.parametrize("workers", [1, 2])
def test_full_disk_is_a_clear_error_and_no_output(small_disk: Path, workers: int) -> None:
    out = small_disk / "out"
    sink = ListSink()
    cfg = PreprocessConfig(
        inputs=[str(MUSICAL)], output=str(out), workers=workers, memory_budget=1 << 20
    )
    with pytest.raises(StorageError) as caught:
        run_preprocess(cfg, Emitter(sink))
    assert "no space left" in caught.value.message
    assert str(out) in caught.value.message
    assert caught.value.exit_code == 1
    assert not (out / "dataset.h5").exists()
    assert _leftovers(out) == []  # the scratch folder is gone
    assert sink.events[-1]["type"] == "stage_end" and sink.events[-1]["status"] == "failed"


@needs_data
@needs_spark
@pytest.mark.slow
def test_a_full_disk_under_spark_is_the_same_clear_error(small_disk: Path) -> None:
    """Spark's scratch ran out of disk: a Py4JJavaError traceback (and a hint to raise the
    memory budget, which Spark does not use)."""
    out = small_disk / "out"
    cfg = PreprocessConfig(inputs=[str(MUSICAL)], output=str(out), runner="spark", workers=1)
    with pytest.raises(StorageError) as caught:
        run_preprocess(cfg, Emitter(ListSink()))
    assert caught.value.message == f"no space left on the device of {out} while preprocessing"
    assert "--memory-budget" not in (caught.value.hint or "")
    assert not (out / "dataset.h5").exists() and _leftovers(out) == []


def test_enospc_in_a_forked_worker_is_reported_as_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no tmpfs can be mounted: the write itself raises ENOSPC (monkeypatched) in the
    second worker, a forked process."""
    real_spill = Spiller.spill

    def spill(self: Spiller, *args: Any) -> None:
        if self.wid == 1:
            import errno

            raise OSError(errno.ENOSPC, "No space left on device")
        real_spill(self, *args)

    monkeypatch.setattr(Spiller, "spill", spill)
    src = _many_distinct(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(StorageError, match="no space left"):
        _run([src], out, 2, 1 << 20)
    assert not (out / "dataset.h5").exists()
    assert _leftovers(out) == []


def test_killed_worker_leaves_no_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker 1 is SIGKILLed (as by the OOM killer) at its first spill."""

    def spill(self: Spiller, *args: Any) -> None:
        if self.wid == 1:
            os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(Spiller, "spill", spill)
    src = _many_distinct(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(SentitopError, match=r"died|stopped"):
        _run([src], out, 2, 1 << 20)
    assert not (out / "dataset.h5").exists()
    assert _leftovers(out) == []


def test_unwritable_output_is_exit_2_naming_the_folder(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    write_lines(src, [b'{"reviewText": "fine", "overall": 5}'])
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(InputError) as caught:
        _run([src], blocker / "out", 1, None)
    assert str(blocker / "out") in caught.value.message
    with pytest.raises(InputError) as caught:  # it read "cannot write to the scratch folder"
        _run([src], blocker, 1, None)
    assert caught.value.message == f"--output {blocker} is a file, not a folder"
    assert blocker.read_text() == "not a folder"


def test_stale_scratch_of_a_killed_run_is_removed(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    write_lines(src, TWO_CLASSES)
    out = tmp_path / "out"
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = out / f".preprocess-tmp-{dead.pid}"
    stale.mkdir(parents=True)
    (stale / "run-0-0.bin").write_bytes(b"x" * 100)
    _run([src], out, 1, None)
    assert _leftovers(out) == []


def test_large_input_warns_before_starting(tmp_path: Path) -> None:
    lines = [
        json.dumps({"reviewText": f"review {i} " + "word " * 150, "overall": i % 5 + 1}).encode()
        for i in range(20_000)
    ]
    src = tmp_path / "in.jsonl"
    write_lines(src, lines)
    sink = ListSink()
    cfg = PreprocessConfig(inputs=[str(src)], output=str(tmp_path / "o"), memory_budget=1 << 20)
    stats = run_preprocess(cfg, Emitter(sink))
    progress = [e for e in sink.events if e["type"] == "progress"]
    assert "spill" in progress[0]["note"] and str(tmp_path / "o") in progress[0]["note"]
    assert progress[0]["done"] == 0
    assert all(e["memory_budget"] == 1 << 20 and e["spill_expected"] for e in progress)
    assert stats["spill"]["runs"] >= 1
    quiet = ListSink()
    cfg = PreprocessConfig(inputs=[str(src)], output=str(tmp_path / "q"))
    run_preprocess(cfg, Emitter(quiet))
    assert not any("note" in e for e in quiet.events)


def test_help_shows_the_default_budget_and_stats_record_it(tmp_path: Path) -> None:
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    shown = subprocess.run(
        [sys.executable, "-m", "engine.preprocess", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert "--memory-budget" in shown and "GB" in " ".join(shown.split())
    src = tmp_path / "in.jsonl"
    write_lines(src, TWO_CLASSES)
    stats = _run([src], tmp_path / "out", 1, None)
    assert stats["memory_budget"] > 1 << 20
    assert stats["spill"] == {"runs": 0, "bytes": 0, "buckets": 0}


def test_profile_memory_budget_is_a_size() -> None:
    from pydantic import ValidationError

    from remote.profile_spec import PreprocessSpec

    cfg = PreprocessSpec(memory_budget="4GB").to_config(["x.jsonl"], "out")  # type: ignore[arg-type]
    assert cfg.memory_budget == 4_000_000_000
    assert PreprocessSpec().to_config(["x.jsonl"], "out").memory_budget is None
    with pytest.raises(ValidationError, match=r"memory_budget|size"):
        PreprocessSpec(memory_budget="lots")  # type: ignore[arg-type]


def test_a_gzip_input_is_planned_on_its_decompressed_size(tmp_path: Path) -> None:
    """IMDB's 25.8 MB .gz (69 MB of JSON) at an 8 MB budget: no note at all, and the buckets
    were sized for 25.8 MB; the note's "up to" was under the scratch a plain file used."""
    import gzip

    lines = [
        json.dumps({"reviewText": f"review {i} " + "word " * 150, "overall": i % 5 + 1}).encode()
        for i in range(20_000)
    ]
    plain = b"".join(line + b"\n" for line in lines)
    src = tmp_path / "in.jsonl.gz"
    src.write_bytes(gzip.compress(plain))
    assert src.stat().st_size * 20 < len(plain)  # compresses well, as text does
    sink = ListSink()
    cfg = PreprocessConfig(inputs=[str(src)], output=str(tmp_path / "o"), memory_budget=1 << 20)
    stats = run_preprocess(cfg, Emitter(sink))
    note = next(e for e in sink.events if e["type"] == "progress")["note"]
    assert f"input {len(plain) / 1e6:.1f} MB is much larger" in note
    assert f"up to ≈ {2 * len(plain) / 1e6:.1f} MB" in note
    assert stats["spill"]["runs"] >= 1

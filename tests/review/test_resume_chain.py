"""A resumed training is one chain of runs: its $ and hours add up, and it is counted once."""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.errors import InputError
from remote.checkpoint_keeper import NODE_CHECKPOINT
from remote.profile import load_profile
from remote.resume import resumable_run
from tests.bad_inputs import torch_like_zip
from tui.cli import main


def resumed(folder: Path, epoch: int, step: int) -> None:
    """Make ``folder``'s trainer start where a resume took over (epoch, step within it)."""
    lines = (folder / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    for event in events:
        if event["type"] == "train_start":
            event.update(resumed_epoch=epoch, resumed_step=step)
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


@pytest.fixture
def chain(make_run: Callable[..., Path]) -> tuple[Path, Path, Path]:
    """A stopped with a checkpoint mid-epoch 1, B resumed it there and stopped with one
    mid-epoch 2, C resumed B there and finished: 4 epochs of 10 s, of which the two split ones
    read 3 s and 4 s in C's history (the part after the resume). $0.50 + $0.30 + $0.70."""

    def stopped(name: str, usd: float, wall: float, before: Path | None) -> Path:
        extra: dict[str, Any] = {"usd": usd, "wall_s": wall, "epochs": None}
        extra |= {"resumed_from": str(before)} if before else {}
        folder = make_run(name, nproc=2, epoch_s=[10.0], sync_s=1.0, status="interrupted",
                          summary_extra=extra)  # fmt: skip
        summary = json.loads((folder / "summary.json").read_text())
        summary["train"] = {}  # a run stopped before its trainer summed up
        (folder / "summary.json").write_text(json.dumps(summary))
        torch_like_zip(folder / NODE_CHECKPOINT)
        return folder

    a = stopped("20261127-100000-tiny", 0.5, 1800.0, None)
    b = stopped("20261127-110000-tiny", 0.3, 900.0, a)
    resumed(b, 1, 3)
    c = make_run("20261127-120000-tiny", nproc=2, epoch_s=[10.0, 3.0, 4.0, 10.0],
                 sync_s=1.0, summary_extra={"usd": 0.7, "wall_s": 2700.0,
                                            "resumed_from": str(b)})  # fmt: skip
    resumed(c, 2, 5)
    return a, b, c


def test_runs_json_gives_the_chain_total_of_a_resumed_run(
    chain: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The resumed run's $ was its own ($0.70): the $1.50 the training cost was nowhere."""
    a, b, c = chain
    assert main(["runs", "--runs-dir", str(c.parent), "--json"]) == 0
    rows = {r["run"]: r for r in json.loads(capsys.readouterr().out)}
    last = rows[c.name]
    assert last["usd"] == pytest.approx(0.7) and last["resumed_from"] == b.name
    assert last["chain"] == [a.name, b.name, c.name]
    assert last["chain_usd"] == pytest.approx(1.5) and last["chain_wall_s"] == pytest.approx(5400)
    assert rows[a.name]["resumed_by"] == [b.name] and rows[b.name]["resumed_by"] == [c.name]
    assert last["epoch_s"] == pytest.approx(10.0)  # as report: not the split 3 s and 4 s
    assert main(["runs", "--runs-dir", str(c.parent)]) == 0
    table = capsys.readouterr().out
    assert "↳ resumes (3 runs):" in table and "Σ 1.5000" in table
    lines = [line.strip("│ ").split(" ")[0] for line in table.splitlines()]
    arrow = lines.index("↳", lines.index(c.name))
    assert lines[arrow + 1] == b.name  # the id on a line of its own, never cut
    # the first run's folder deleted: the chain says so and counts what is left
    shutil.rmtree(a)
    assert main(["runs", "--runs-dir", str(c.parent), "--json"]) == 0
    last = {r["run"]: r for r in json.loads(capsys.readouterr().out)}[c.name]
    assert last["chain"] == [b.name, c.name] and last["chain_not_counted"] == [a.name]
    assert last["chain_usd"] == pytest.approx(1.0)


def test_report_counts_a_resumed_training_once_at_its_whole_cost(
    chain: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Named together, the stopped runs were left out silently and the result showed only the
    last run's $0.70; the split epochs (3 s, 4 s) pulled the median epoch time down to 7 s."""
    a, b, c = chain
    out = tmp_path / "report"
    assert main(["report", str(a), str(b), str(c), "-o", str(out)]) == 0
    text = (out / "report.md").read_text()
    runs = text.split("## Runs")[1]
    assert runs.count("| 20261127-") == 1  # one row: the chain, under its last run
    assert f"{c.name} (resumes {b.name} ← {a.name})" in runs
    assert "$1.50 ($0.70)" in runs and "5,400.0 (2,700.0)" in runs
    assert f"{a.name}: resumed, counted in the chain of {c.name}" in text
    assert "2 epoch(s) split by a mid-epoch resume" in text
    assert "| 10.0 | 40 |" in text  # median epoch 10 s, so 40 s for 4 epochs
    # only the first run named: the report is of its chain, not of a stopped run
    alone = tmp_path / "alone"
    assert main(["report", str(a), "-o", str(alone)]) == 0
    text = (alone / "report.md").read_text()
    assert f"{a.name}: resumed; reported as its chain, which ends in {c.name}" in text
    assert "$1.50 ($0.70)" in text


def test_a_run_resumed_already_is_not_resumed_again(chain: tuple[Path, Path, Path]) -> None:
    """Resuming A again trained its epochs a second time (and billed them) beside B and C."""
    a, b, c = chain
    with pytest.raises(InputError, match=f"already resumed by run {b.name}") as caught:
        resumable_run(a)
    assert caught.value.hint is not None and f"--resume {b}" in caught.value.hint
    with pytest.raises(InputError, match=f"already resumed by run {c.name} \\(ok\\)") as caught:
        resumable_run(b)
    assert caught.value.hint == "its training finished there; start a new run to train longer"


@pytest.mark.parametrize(("status", "resumable"), [("ok", False), ("interrupted", True)])
def test_a_run_whose_summary_is_lost_is_judged_by_its_events(
    make_run: Callable[..., Path], status: str, resumable: bool
) -> None:
    """With summary.json emptied, a finished run was resumed: a new run that trained nothing,
    reported "ok" with the old run's figures and was billed again. Its events' run_end says
    how it ended."""
    folder = make_run("20261127-130000-tiny", nproc=1, epoch_s=[10.0], sync_s=1.0, status=status)
    with (folder / "events.jsonl").open("a") as fh:
        fh.write(json.dumps({"type": "run_end", "t": 1.0, "status": status, "reason": ""}) + "\n")
    torch_like_zip(folder / NODE_CHECKPOINT)
    (folder / "summary.json").write_text("")
    if resumable:
        assert resumable_run(folder) == folder.absolute()
    else:
        with pytest.raises(InputError, match="finished ok; there is nothing to resume"):
            resumable_run(folder)


def test_a_truncated_checkpoint_is_refused_before_any_node_starts(
    make_run: Callable[..., Path],
) -> None:
    """A cut checkpoint was copied into a new run whose ranks all failed; that run then said
    "continue with: sentitop run --resume NEW", which failed the same way and billed again."""
    folder = make_run("20261127-140000-tiny", nproc=1, epoch_s=[10.0], sync_s=1.0,
                      status="interrupted")  # fmt: skip
    checkpoint = folder / NODE_CHECKPOINT
    checkpoint.parent.mkdir(parents=True)
    with zipfile.ZipFile(checkpoint, "w") as saved:
        saved.writestr("archive/data.pkl", b"x" * 5000)
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])  # cut, as a full disk leaves it
    with pytest.raises(InputError, match="cannot be read as a checkpoint") as caught:
        resumable_run(folder)
    assert str(checkpoint) in caught.value.message
    assert caught.value.hint is not None and "--resume" not in caught.value.hint


def _foreign_zip(path: Path) -> None:
    """A zip that is not a torch save (no pickle in it), e.g. another tool's archive."""
    with zipfile.ZipFile(path, "w") as saved:
        saved.writestr("notes.txt", b"not a model")


def _damaged_inside(path: Path) -> None:
    """A torch-like zip whose stored pickle has a byte changed (its directory still whole)."""
    torch_like_zip(path, b"x" * 5000)
    data = bytearray(path.read_bytes())
    at = data.index(b"x" * 100) + 50
    data[at] = ord("y")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("spoil", [_foreign_zip, _damaged_inside], ids=["foreign", "damaged"])
def test_a_zip_that_is_no_whole_torch_save_is_refused(
    make_run: Callable[..., Path], spoil: Callable[[Path], None]
) -> None:
    """The check took any readable zip directory for a checkpoint: a foreign archive or one
    damaged inside passed it and then failed in every rank of the resumed run."""
    folder = make_run("20261127-150000-tiny", nproc=1, epoch_s=[10.0], sync_s=1.0,
                      status="interrupted")  # fmt: skip
    checkpoint = folder / NODE_CHECKPOINT
    checkpoint.parent.mkdir(parents=True)
    spoil(checkpoint)
    assert zipfile.is_zipfile(checkpoint)  # what the old check asked
    with pytest.raises(InputError, match="cannot be read as a checkpoint"):
        resumable_run(folder)


def test_a_real_torch_save_passes_the_torch_free_check(tmp_path: Path) -> None:
    """The check must accept what torch.save writes (else every resume would be refused)."""
    import torch

    from remote.resume import looks_like_checkpoint

    path = tmp_path / "latest.pt"
    torch.save({"epoch": 1, "model": {"w": torch.zeros(300, 10)}}, path)
    assert looks_like_checkpoint(path)
    path.write_bytes(path.read_bytes()[:-200])
    assert not looks_like_checkpoint(path)


def test_resuming_with_fewer_epochs_than_the_checkpoint_holds_is_refused(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run --resume` of a run stopped in epoch 5 with a profile of 3 epochs trained nothing,
    dropped the epoch under way and said "ok", exit 0. Refused before anything starts."""
    folder = make_run("20261127-160000-tiny", nproc=1, epoch_s=[10.0], sync_s=1.0,
                      status="interrupted")  # fmt: skip
    torch_like_zip(folder / NODE_CHECKPOINT)
    with (folder / "events.jsonl").open("a") as fh:
        fh.write(json.dumps({"type": "checkpoint", "t": 2.0, "epoch": 4, "step": 8}) + "\n")
    epochs = load_profile(folder / "profile.yaml").to_train_config(".", ".").epochs
    assert epochs < 5
    assert main(["run", "--resume", str(folder), "--runs-dir", str(tmp_path / "new")]) == 2
    err = capsys.readouterr().err
    assert f"holds 4 whole epoch(s) and 8 step(s) of epoch 5, more than the {epochs}" in err
    assert not (tmp_path / "new").exists()  # no run folder started


def test_runs_at_80_columns_keeps_ids_and_dollars_whole(
    chain: tuple[Path, Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A "↳ resumes ID (2 runs)" line made the id column 44 wide: every $ read "0.00…"."""
    a, b, c = chain
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["runs", "--runs-dir", str(c.parent)]) == 0
    table = capsys.readouterr().out
    assert max(len(line) for line in table.splitlines()) <= 80
    assert "…" not in table and "0.7000" in table and "Σ 1.5000" in table
    for run in (a, b, c):
        assert run.name in table

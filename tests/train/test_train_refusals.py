"""`sentitop train` refuses, before any rank starts, what would fail late or destroy a run."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import h5py
import pytest

from engine.config import ModelConfig, TrainConfig
from engine.errors import ConfigError, DatasetError
from engine.sentiment.splits import check_dataset
from tests.train.conftest import write_dataset
from tui.cli import main
from tui.cli.commands.train import _Printer


def _train(data: Path, run: Path, *flags: str) -> list[str]:
    return ["train", "--data", str(data), "--run-dir", str(run), "--epochs", "1", *flags]


def _refused(argv: list[str], run: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Exit 2, one message, no traceback, no rank started (no train_config.json written)."""
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err and "launch:" not in err
    assert not (run / "train_config.json").exists()
    return err


@pytest.mark.parametrize("held", ["summary.json", "checkpoints/latest.pt"])
def test_a_run_dir_holding_a_run_is_not_overwritten(
    held: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_dataset(tmp_path / "data")
    run = tmp_path / "run"
    (run / held).parent.mkdir(parents=True)
    (run / held).write_text("{}")
    (run / "model.pt").write_text("paid for")
    err = _refused(_train(data, run), run, capsys)
    assert f"--run-dir {run}" in err
    assert ("--resume" in err) and (run / "model.pt").read_text() == "paid for"


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:3000])


def _not_hdf5(path: Path) -> None:
    path.write_bytes(b"\x00garbage" * 500)


def _format_99(path: Path) -> None:
    with h5py.File(path, "a") as fh:
        fh.attrs["format_version"] = 99


def _no_test_tokens(path: Path) -> None:
    with h5py.File(path, "a") as fh:
        del fh["test/tokens"]


def _label_2(path: Path) -> None:  # trained to a negative loss and an "ok" run
    with h5py.File(path, "a") as fh:
        labels = fh["train/labels"][:]
        labels[7::10] = 2
        fh["train/labels"][:] = labels


def _short_labels(path: Path) -> None:  # trained on the first 100 rows alone
    with h5py.File(path, "a") as fh:
        first = fh["train/labels"][:100]
        del fh["train/labels"]
        fh["train"].create_dataset("labels", data=first)


def _rows_attribute(path: Path) -> None:
    with h5py.File(path, "a") as fh:
        fh["test"].attrs["rows"] = 100_000


def _long_length(path: Path) -> None:
    with h5py.File(path, "a") as fh:
        lengths = fh["test/lengths"][:]
        lengths[3] = 500
        fh["test/lengths"][:] = lengths


BROKEN = {
    "label-2": (_label_2, r"/train/labels holds 51 value\(s\) outside 0..1 \(row 7: 2\)"),
    "short-labels": (_short_labels, r"/train/labels has shape \(100,\) but /train/tokens 512"),
    "rows-attribute": (_rows_attribute, "/test says it holds 100,000 rows"),
    "long-length": (_long_length, r"/test/lengths holds 1 value\(s\) outside 0..12 \(row 3: 500\)"),
    "truncated": (_truncated, "not a readable HDF5 file"),
    "not-hdf5": (_not_hdf5, "not a readable HDF5 file"),
    "format-99": (_format_99, "format_version 99 is not supported"),
    "missing-part": (_no_test_tokens, "/test/tokens is missing"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_dataset_is_refused_before_the_ranks(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_dataset(tmp_path / "data")
    breaks, reason = BROKEN[case]
    breaks(data / "dataset.h5")
    with pytest.raises(DatasetError, match=reason):
        check_dataset(data)
    run = tmp_path / "run"
    err = _refused(_train(data, run), run, capsys)
    assert str(data / "dataset.h5") in err and re.search(reason, err)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"lr": math.inf}, "train.lr"),
        ({"weight_decay": math.inf}, "train.weight_decay"),
        ({"loss_threshold": math.nan}, "train.loss_threshold"),
        ({"pos_weight": math.inf}, "train.pos_weight"),
        ({"clip_grad_norm": -1.0}, "train.clip_grad_norm"),
        ({"warmup_steps": -5}, "train.warmup_steps"),
        ({"lr_reference_batch": 0}, "train.lr_reference_batch"),
        ({"max_train_samples": 0}, "train.max_train_samples"),
        ({"seed": -1}, "train.seed"),  # a numpy ValueError traceback from every rank
        ({"seed": 2**32}, "train.seed"),
    ],
)
def test_train_settings_no_run_can_use_are_refused(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        TrainConfig(data_dir="d", run_dir="r", **fields)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"dropout": 2.0}, "model.dropout"),
        ({"embed_dropout": -0.1}, "model.embed_dropout"),
        ({"ngram_scale": math.nan}, "model.ngram_scale"),
        ({"embedding_dim": 0}, "model.embedding_dim"),
        ({"ngram_buckets": -1}, "model.ngram_buckets"),
    ],
)
def test_model_settings_are_checked_where_they_are_given(
    fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        ModelConfig(**fields)


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--lr", "inf"], "train.lr = inf"),
        (["--lr-reference-batch", "0"], "train.lr_reference_batch = 0"),
        (["--model-dropout", "2"], "model.dropout = 2.0"),
        (["--straggle", "5:2", "--nproc", "2"], "there is no rank 5 with --nproc 2"),
        (  # the last factor won, silently
            ["--straggle", "1:2", "--straggle", "1:3", "--nproc", "2"],
            "--straggle 1:2 and --straggle 1:3: rank 1 is given two factors",
        ),
    ],
)
def test_bad_flags_exit_2_before_any_rank_starts(
    flags: list[str], reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_dataset(tmp_path / "data")
    run = tmp_path / "run"
    assert reason in _refused(_train(data, run, *flags), run, capsys)


def test_an_unwritable_run_dir_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_dataset(tmp_path / "data")
    (tmp_path / "file").write_text("x")
    run = tmp_path / "file" / "run"
    err = _refused(_train(data, run), run, capsys)
    assert f"--run-dir {run}: {tmp_path / 'file'} is a file, not a folder" in err


def test_a_resumed_run_says_where_it_continues(capsys: pytest.CaptureFixture[str]) -> None:
    start = {"type": "train_start", "steps_per_epoch": 71, "world_size": 1}
    printer = _Printer(quiet=False)
    printer(0, "stdout", _line({**start, "resumed_epoch": 0, "resumed_step": 0}))
    assert capsys.readouterr().out == ""  # a fresh run says nothing
    printer(0, "stdout", _line({**start, "resumed_epoch": 0, "resumed_step": 10}))
    out = capsys.readouterr().out
    assert "resumed from checkpoints/latest.pt at epoch 1, step 10 of 71 on 1 rank(s)" in out


def test_a_long_epoch_prints_progress_between_epoch_lines(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An epoch of an 8 M-review dataset took two hours with nothing on the terminal (trial L):
    step events went to events.jsonl alone."""
    from tui.cli.commands import train as train_command

    printer = _Printer(quiet=False)
    start = {"type": "train_start", "epochs": 3, "steps_per_epoch": 28125, "world_size": 2}
    printer(0, "stdout", _line(start))
    step = {"type": "step", "epoch": 0, "step": 250, "global_step": 250, "loss": 0.5,
            "smoothed_loss": 0.4312, "samples_per_s": 1020.4, "read_mb_s": 2.13,
            "rss_mb": [512.0, 530.2]}  # fmt: skip
    printer(0, "stdout", _line(step))
    assert capsys.readouterr().out == ""  # not yet: at most one line per PROGRESS_EVERY_S
    monkeypatch.setattr(train_command, "PROGRESS_EVERY_S", 0.0)
    printer(0, "stdout", _line(step))
    out = capsys.readouterr().out
    assert out == (
        "epoch 1/3  step 250/28,125  1,020 samples/s  loss 0.4312  read 2.1 MB/s  "
        "RSS ≤ 530 MB per rank\n"
    )


def test_a_failed_launch_says_how_to_continue_from_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.errors import LaunchError
    from engine.sentiment import train

    data, run = write_dataset(tmp_path / "data"), tmp_path / "run"

    def dies_after_a_checkpoint(cfg: Any, nproc: int, *, on_line: Any) -> None:
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / "latest.pt").write_bytes(b"")
        on_line(0, "stdout", _line({"type": "checkpoint", "epoch": 0, "step": 10}))
        raise LaunchError("rank 1 (pid 7) failed: killed by SIGKILL")

    monkeypatch.setattr(train, "launch_local", dies_after_a_checkpoint)
    assert main(_train(data, run, "--nproc", "2")) == 1
    err = capsys.readouterr().err
    assert "killed by SIGKILL" in err and "latest.pt (epoch 1, step 10)" in err
    assert f"--run-dir {run} --resume` continues it" in err


def test_a_peers_traceback_after_its_error_event_is_not_shown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    printer = _Printer(quiet=False)
    printer(0, "stderr", "a warning before any failure")
    printer(0, "stdout", _line({"type": "error", "message": "RuntimeError: Connection reset"}))
    printer(0, "stderr", "Traceback (most recent call last):")
    printer(1, "stderr", "rank 1 is still talking")
    err = capsys.readouterr().err
    assert "a warning before any failure" in err and "error: RuntimeError" in err
    assert "Traceback" not in err and "rank 1 is still talking" in err


def _line(event: dict[str, Any]) -> str:
    from engine.events import encode_event

    return encode_event({**event, "t": 0.0, "rank": 0})


def test_resume_without_a_checkpoint_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It started a new run silently; the user asked to continue one."""
    data = write_dataset(tmp_path / "data")
    run = tmp_path / "typo"
    err = _refused(_train(data, run, "--resume"), run, capsys)
    assert "holds no checkpoint" in err and str(run) in err


def test_resume_of_a_folder_with_no_run_says_so_without_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It asked for --data ("--data is required") though there was nothing to continue."""
    run = tmp_path / "empty"
    run.mkdir()
    err = _refused(["train", "--run-dir", str(run), "--resume"], run, capsys)
    assert f"--resume: {run} holds no checkpoint" in err and "--data is required" not in err
    (run / "train").mkdir()
    (run / "train" / "train_config.json").write_text("{}")  # a `sentitop run` folder
    err = " ".join(_refused(["train", "--run-dir", str(run), "--resume"], run, capsys).split())
    assert f"`sentitop run --resume {run}` continues a `sentitop run`" in err


def test_run_resume_of_a_train_folder_points_at_train_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "trained"
    run.mkdir()
    (run / "train_config.json").write_text("{}")
    assert main(["run", "--resume", str(run), "--runs-dir", str(tmp_path / "runs")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{run} is a `sentitop train` run" in err
    assert f"`sentitop train --run-dir {run} --resume` continues it" in err


def test_resume_defaults_to_the_ranks_the_run_last_had(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    from types import SimpleNamespace

    from tui.cli.commands.train import ranks_to_launch

    run = tmp_path / "run"
    run.mkdir()
    starts = [{"type": "train_start", "t": 1.0, "world_size": n} for n in (4, 2)]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in starts))
    resumed = SimpleNamespace(resume=True, run_dir=str(run))
    assert ranks_to_launch(None, resumed) == 2  # the last start: after a shrink to 2
    assert "on 2 rank(s)" in capsys.readouterr().err
    assert ranks_to_launch(3, resumed) == 3
    assert ranks_to_launch(None, SimpleNamespace(resume=False, run_dir=str(run))) == 1
    (run / "events.jsonl").unlink()
    assert ranks_to_launch(None, resumed) == 1


def test_a_fault_every_rank_finds_is_said_once_as_the_ranks_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A token id past the vocabulary (found by the ranks while copying the split) was printed
    by each rank, then again under "launch failed: rank 0 failed: exit code 2" (trial M)."""
    data = write_dataset(tmp_path / "data", n_train=1024)
    with h5py.File(data / "dataset.h5", "a") as fh:
        fh["train/tokens"][700, 1] = 60_000
    run = tmp_path / "run"
    rc = main([*_train(data, run), "--nproc", "2", "--threads", "1"])
    err = capsys.readouterr().err
    assert rc == 2, err
    said = "/train/tokens row 700 holds token id 60,000"
    assert err.count(said) == 2  # one rank's live line, then the refusal itself
    assert "bad dataset: " in err and "launch failed" not in err and "Traceback" not in err


@pytest.mark.parametrize("stderr_first", [False, True])
def test_a_refusal_said_once_whichever_pipe_is_read_first(
    capsys: pytest.CaptureFixture[str], stderr_first: bool
) -> None:
    """A CI run printed the fault of the test above twice live: rank 1's stderr line reached
    the printer before rank 1's `error` event (stdout and stderr are read by two threads), so
    it was not yet known as a failed rank's."""
    message = "/d/dataset.h5: /train/tokens row 700 holds token id 60,000"
    event = {"type": "error", "message": message, "hint": "re-run", "title": "bad dataset"}
    words = [f"bad dataset: {message}", "  hint: re-run"]  # what each rank writes to stderr
    printer = _Printer(quiet=False)
    if stderr_first:  # rank 1's words, then both events, then rank 0's words
        order = [(1, w) for w in words] + [(0, event), (1, event)] + [(0, w) for w in words]
    else:  # rank 0's event, then rank 1's words before its event
        order = [(0, event)] + [(1, w) for w in words] + [(1, event)] + [(0, w) for w in words]
    for rank, item in order:
        if isinstance(item, dict):
            printer(rank, "stdout", _line({**item, "rank": rank}))
        else:
            printer(rank, "stderr", item)
    err = capsys.readouterr().err
    assert err.count("row 700 holds token id 60,000") == 1, err
    assert printer.failed == {0, 1} and printer.refusal is not None
    printer(0, "stderr", "bad dataset: another file")  # other stderr lines still show
    assert "another file" not in capsys.readouterr().err  # (rank 0 failed: its tail is not)
    printer(2, "stderr", "a warning of rank 2")
    assert "[rank 2] a warning of rank 2" in capsys.readouterr().err


def test_a_new_run_keeps_a_killed_runs_events_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run killed before its first checkpoint left events.jsonl; a new run into the folder
    appended to it, and a replay showed two train_starts as one run (trial M)."""
    data = write_dataset(tmp_path / "data")
    run = tmp_path / "run"
    run.mkdir()
    killed = '{"type":"train_start","t":1.0,"rank":0,"epochs":30}\n'
    (run / "events.jsonl").write_text(killed)
    assert main([*_train(data, run), "--model", "seed", "--threads", "1"]) == 0
    assert (run / "events.earlier.jsonl").read_text() == killed
    starts = [
        line for line in (run / "events.jsonl").read_text().splitlines() if "train_start" in line
    ]
    assert len(starts) == 1 and '"epochs":1' in starts[0]

"""A run's or a dataset's files that are broken or belong elsewhere are named (exit 2), never a
traceback, nor a model trained or applied with another dataset's vocabulary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from engine.config import ModelConfig, TrainConfig
from engine.errors import DatasetError, InputError
from engine.sentiment.evaluate import load_run
from engine.sentiment.splits import check_dataset
from engine.sentiment.trainer import DistEnv, Trainer
from engine.synth.dataset import write_synthetic_dataset
from tests.train.conftest import write_dataset
from tui.cli import main


def _synth(folder: Path, vocab_size: int) -> Path:
    write_synthetic_dataset(folder, 240, 80, seq_len=12, vocab_size=vocab_size)
    return folder


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished one-epoch run of a tiny model on a 50-word synthetic dataset."""
    base = tmp_path_factory.mktemp("run-files")
    data, run = _synth(base / "data", 50), base / "run"
    cfg = TrainConfig(
        data_dir=str(data),
        run_dir=str(run),
        epochs=1,
        batch_size=32,
        model=ModelConfig(preset="seed", hidden=8),
        checkpoint_every_min=0,
        events_file=False,
    )
    Trainer(cfg, env=DistEnv()).fit()
    return run


def _predict(run: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """`sentitop predict RUN good`: exit 2, one message, no traceback."""
    rc = main(["predict", str(run), "good"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    return err


def _copy(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / "run"))


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("model.pt", b"hello\n", "model.pt: not readable as model weights"),
        ("model.pt", None, "model.pt: not readable as model weights"),  # truncated
        ("model.json", b"{", "model.json: not a model shape"),
        ("vocab.json", b"[1, 2]", "vocab.json: not a vocabulary"),
    ],
)
def test_a_broken_run_file_is_named_not_a_traceback(
    name: str,
    content: bytes | None,
    said: str,
    trained_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = _copy(trained_run, tmp_path)
    path = run / name
    path.write_bytes(path.read_bytes()[:4000] if content is None else content)
    with pytest.raises(InputError, match=said):
        load_run(run)
    err = _predict(run, capsys)
    assert str(path) in err
    if content is None:  # torch's paragraph was cut at 200 characters: "… checkpoint file is"
        assert err.splitlines()[0].endswith("failed finding central directory. This is an "
                                            "internal miniz error.")  # fmt: skip


@pytest.mark.parametrize(
    ("break_it", "said"),
    [
        ("random", "model.pt: not readable as model weights (truncated, or not a torch save): "),
        ("empty", "model.pt: not readable as model weights (truncated, or not a torch save): "),
        ("folder", "model.pt is not a file (a folder?)"),
        ("no vocab", "vocab.json not found: the run's vocabulary"),
        ("no weights", "has neither model.pt nor a checkpoint (the run finished: its weights"),
    ],
)
def test_a_damaged_run_gets_one_line_that_fits_a_run_folder(
    break_it: str,
    said: str,
    trained_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Random bytes in model.pt printed torch's whole paragraph, which suggests loading the
    file unsafely; a model.pt folder was called missing; a missing vocab.json was told to
    run `sentitop preprocess` (a dataset folder's advice)."""
    import random

    run = _copy(trained_run, tmp_path)
    weights = run / "model.pt"
    if break_it == "random":
        weights.write_bytes(random.Random(0).randbytes(50_000))
    elif break_it == "empty":
        weights.write_bytes(b"")
    elif break_it == "folder":
        weights.unlink()
        weights.mkdir()
    elif break_it == "no weights":  # a trial's finished run was told "wait for the first epoch"
        weights.unlink()
        shutil.rmtree(run / "checkpoints")
    else:
        (run / "vocab.json").unlink()
    err = _predict(run, capsys)
    message, hint = err.rstrip("\n").split("\n")  # one line and its hint
    assert said in message and "hint: restore the file" in hint
    assert "arbitrary code" not in err and "preprocess" not in err


def test_a_garbage_checkpoint_without_model_pt_is_named(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _copy(trained_run, tmp_path)
    (run / "model.pt").unlink()
    (run / "checkpoints" / "latest.pt").write_text("garbage\n")
    assert "checkpoints/latest.pt cannot be read" in _predict(run, capsys)


def test_a_vocabulary_of_another_dataset_is_refused_by_predict(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its ids index past the model's embedding table (an IndexError traceback before)."""
    run = _copy(trained_run, tmp_path)
    other = _synth(tmp_path / "other", 80)
    shutil.copyfile(other / "vocab.json", run / "vocab.json")
    err = _predict(run, capsys)
    assert "holds 82 token ids but the model's embedding table" in err and "52" in err


def _train_argv(data: Path, run: Path, *flags: str) -> list[str]:
    return ["train", "--data", str(data), "--run-dir", str(run), "--epochs", "1", *flags]


def _refused(argv: list[str], run: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Exit 2, one message, no traceback, no rank started (no train_config.json written)."""
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err and "launch:" not in err
    assert not (run / "train_config.json").exists()
    return err


@pytest.mark.parametrize("words", [50, 80])
def test_training_refuses_a_vocabulary_of_another_dataset(
    words: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fewer words (ids past the copied vocabulary) or more (the same ids, other words): the
    run would keep another dataset's vocab.json, and predict would read texts as other words."""
    data = _synth(tmp_path / "data", 60)
    shutil.copyfile(_synth(tmp_path / "other", words) / "vocab.json", data / "vocab.json")
    with pytest.raises(DatasetError, match="is not the vocabulary"):
        check_dataset(data)
    run = tmp_path / "run"
    assert "a vocab.json of another dataset?" in _refused(_train_argv(data, run), run, capsys)


def test_training_refuses_a_dataset_without_its_vocabulary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_dataset(tmp_path / "data")
    (data / "vocab.json").unlink()
    run = tmp_path / "run"
    err = _refused(_train_argv(data, run), run, capsys)
    assert f"{data / 'vocab.json'} not found" in err


def test_a_dataset_without_a_vocabulary_hash_is_checked_by_its_ids(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data", vocab_size=50)
    check_dataset(data)  # its own vocabulary passes
    other = write_dataset(tmp_path / "other", vocab_size=70)
    shutil.copyfile(other / "vocab.json", data / "vocab.json")
    with pytest.raises(DatasetError, match=r"holds 72 ids but .* encoded with 52"):
        check_dataset(data)


def test_a_batch_larger_than_the_training_split_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It trained one whole-split step per epoch at a rate scaled to the batch asked for
    (--batch-size 1000000 at the then default 4e-3: lr 15.6, train loss 12.5)."""
    data, run = write_dataset(tmp_path / "data", n_train=300), tmp_path / "run"
    err = _refused(_train_argv(data, run, "--batch-size", "1000000"), run, capsys)
    defaults = TrainConfig(data_dir="d", run_dir="r")
    scaled = defaults.lr * 1_000_000 / defaults.lr_reference_batch
    assert "larger than the 300 training samples" in err and f"({scaled:.3g} =" in err
    flags = ("--batch-size", "512", "--max-train-samples", "100")
    err = _refused(_train_argv(data, run, *flags), run, capsys)
    assert "larger than the 100 training samples" in err and "batch size of 256 or less" in err


def test_a_small_dataset_trains_at_the_default_batch(tmp_path: Path) -> None:
    """256 > 64 samples: one step an epoch at --lr itself (nothing scaled), so not refused."""
    from engine.sentiment.splits import check_batch_size

    data = write_dataset(tmp_path / "data", n_train=64)
    check_batch_size(data, TrainConfig(data_dir=str(data), run_dir=str(tmp_path / "run")))


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("checkpoints/latest.pt", "garbage\n", "latest.pt is not a checkpoint"),
        ("train_config.json", "{", "train_config.json cannot be read"),
        ("train_config.json", "[]", "train_config.json is not a training configuration"),
    ],
)
def test_resume_names_a_broken_run_file_before_the_ranks(
    name: str, content: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A garbage checkpoint crashed every rank with a traceback, then said `--resume` would
    continue it; a garbage train_config.json was a traceback."""
    data, run = write_dataset(tmp_path / "data"), tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "latest.pt").write_text("garbage\n")
    (run / name).write_text(content)
    rc = main(["train", "--data", str(data), "--run-dir", str(run), "--resume"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and "launch:" not in err, err
    assert said in err and str(run) in err


def test_ctrl_c_during_training_says_how_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C said only `interrupted`, though the checkpoint holds the run's progress."""
    import engine.sentiment.train as train_module

    data, run = write_dataset(tmp_path / "data"), tmp_path / "run"

    def interrupted_after_a_checkpoint(*args: object, **kwargs: object) -> None:
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / "latest.pt").write_bytes(b"")
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "launch_local", interrupted_after_a_checkpoint)
    rc = main(_train_argv(data, run))
    err = capsys.readouterr().err
    assert rc == 130
    assert f"--run-dir {run} --resume` continues it" in err and err.endswith("interrupted\n")


def test_a_vocabulary_pretty_printed_still_matches(tmp_path: Path) -> None:
    """The hash is of the content, not of the file's bytes."""
    data = _synth(tmp_path / "data", 50)
    doc = json.loads((data / "vocab.json").read_text())
    (data / "vocab.json").write_text(json.dumps(doc, indent=4))
    check_dataset(data)


def test_a_run_stopped_after_its_last_epoch_finishes_on_resume(
    trained_run: Path, tmp_path: Path
) -> None:
    """A checkpoint taken after the last epoch belongs to a run stopped before its summary
    (in the blend or companion fit, a spot notice, a lost node): resumed, it trains no epoch
    and finishes what is left, measured on the test split; with more epochs it trains on.
    (A run that did finish is refused earlier: its summary.json, else its run_end event.)"""
    import dataclasses

    from engine.config import config_from_dict

    run = _copy(trained_run, tmp_path)
    (run / "summary.json").unlink()
    (run / "model.pt").unlink()
    saved = json.loads((run / "train_config.json").read_text())
    cfg = dataclasses.replace(config_from_dict(TrainConfig, saved), run_dir=str(run), resume=True)
    finished = Trainer(cfg, env=DistEnv()).fit()
    assert [e["epoch"] for e in finished["per_epoch"]] == [0]  # the epoch it had, no new one
    assert (run / "model.pt").is_file() and (run / "summary.json").is_file()
    summary = Trainer(dataclasses.replace(cfg, epochs=2), env=DistEnv()).fit()
    assert [e["epoch"] for e in summary["per_epoch"]] == [0, 1]


def test_weights_the_user_may_not_read_are_said_so(
    trained_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A chmod 000 model.pt read "not readable as model weights (truncated, or not a torch
    save): PermissionError …", with the hint to train the run again: a permission, not damage
    (refused here as the OS would for a user: root, who runs CI, reads any file)."""
    import errno

    run = _copy(trained_run, tmp_path)
    real = torch.load

    def refused(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path) == str(run / "model.pt"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(torch, "load", refused)
    err = _predict(run, capsys)
    assert f"{run / 'model.pt'}: cannot be read: Permission denied" in err
    assert "truncated" not in err and "train" not in err


def test_a_review_file_given_as_the_dataset_is_named_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train --data reviews.jsonl` said "reviews.jsonl/dataset.h5 not found"."""
    reviews = tmp_path / "reviews.jsonl"
    reviews.write_text('{"reviewText": "good", "overall": 5}\n')
    assert main(["train", "--data", str(reviews), "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"{reviews}: a file, not a dataset folder" in err and "dataset.h5 not found" not in err
    assert "sentitop preprocess --input" in err


def test_a_file_given_as_the_run_folder_is_named_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train --run-dir notes.txt` said "cannot be created (File exists)"."""
    data = tmp_path / "data"
    write_synthetic_dataset(data, 60, 20, seq_len=8, vocab_size=30)
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    for run_dir in (notes, notes / "run"):
        assert main(["train", "--data", str(data), "--run-dir", str(run_dir)]) == 2
        err = capsys.readouterr().err
        assert f"--run-dir {run_dir}: {notes} is a file, not a folder" in err

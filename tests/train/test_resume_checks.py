"""`train --resume` refuses what it cannot continue: a finished run without more epochs, and a
dataset that is not the run's (exit 2, the run left as it was)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.train.conftest import write_dataset
from tui.cli import main


def _train(data: Path, run: Path, *flags: str) -> list[str]:
    return ["train", "--data", str(data), "--run-dir", str(run), "--epochs", "1", *flags]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "launch:" not in err
    for needle in needles:
        assert needle in err, err


def test_resuming_a_finished_run_needs_more_epochs(
    tiny_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "resumed at the start of epoch 2" of a 1-epoch run, trained nothing, refitted
    the blend and overwrote summary.json and model.pt."""
    run = tmp_path / "run"
    assert main(_train(tiny_data, run)) == 0
    before = {name: (run / name).read_bytes() for name in ("summary.json", "model.pt")}
    capsys.readouterr()
    _refused(
        ["train", "--data", str(tiny_data), "--run-dir", str(run), "--resume"],
        capsys,
        "already finished its 1 epoch(s)",
        "--epochs above 1",
    )
    assert {name: (run / name).read_bytes() for name in before} == before
    longer = ["train", "--data", str(tiny_data), "--run-dir", str(run), "--resume"]
    assert main([*longer, "--epochs", "2"]) == 0  # more epochs: it trains on
    assert "resumed from checkpoints/latest.pt at the start of epoch 2" in capsys.readouterr().out


def test_resuming_on_another_dataset_is_refused(
    tiny_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same vocabulary: it went on mid-epoch on other rows without a word; another vocabulary:
    a rank failed late with exit 1 and two model specs."""
    run = tmp_path / "run"
    assert main(_train(tiny_data, run)) == 0
    (run / "summary.json").unlink()  # an unfinished run with its checkpoint
    fewer = write_dataset(tmp_path / "fewer", n_train=256)
    other_words = write_dataset(tmp_path / "other", vocab_size=60)
    capsys.readouterr()
    resume = ["train", "--run-dir", str(run), "--resume", "--data"]
    _refused([*resume, str(fewer)], capsys, "has 256 training samples", "trained on 512")
    _refused([*resume, str(other_words)], capsys, "vocab.json differs from the run's copy")
    moved = tmp_path / "moved"
    (tmp_path / "data").rename(moved)  # the run's own dataset at another path: fine
    assert main([*resume, str(moved)]) == 0


def test_resuming_with_fewer_epochs_than_trained_is_refused(
    tiny_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run stopped in its 5th epoch, resumed with 3 epochs: it trained nothing, dropped the
    steps of the epoch under way and reported "ok" (exit 0) with an empty epoch history. Both
    the launcher (from the run's events) and the trainer (from the checkpoint) refuse it."""
    from engine.errors import ConfigError
    from engine.sentiment.resume_checks import refuse_fewer_epochs

    run = tmp_path / "run"
    assert main(_train(tiny_data, run, "--epochs", "2")) == 0
    (run / "summary.json").unlink()  # stopped during its after-training fits
    capsys.readouterr()
    resume = ["train", "--data", str(tiny_data), "--run-dir", str(run), "--resume"]
    _refused([*resume, "--epochs", "1"], capsys, "holds 2 whole epoch(s), more than the 1",
             "epochs 2 or more")  # fmt: skip
    (run / "events.jsonl").unlink()  # no record for the launcher: the trainer itself refuses
    assert main([*resume, "--epochs", "1"]) != 0
    assert "holds 2 whole epoch(s)" in capsys.readouterr().err
    assert not (run / "summary.json").exists()  # nothing was reported as done
    refuse_fewer_epochs(2, 0, 2)  # the end of the last epoch: resuming finishes the run
    refuse_fewer_epochs(1, 5, 2)  # mid-epoch within the epochs asked for
    with pytest.raises(ConfigError, match="and 8 step\\(s\\) of epoch 5"):
        refuse_fewer_epochs(4, 8, 4)


def test_the_train_folder_of_a_run_is_read_with_the_run_folders_events(tmp_path: Path) -> None:
    """`train --resume` on runs/<id>/train (made by `sentitop run` on 2 ranks) resumed on 1
    rank, and could not tell how far its checkpoint was: the events are the run folder's."""
    from types import SimpleNamespace

    from remote.resume import checkpoint_at
    from tui.cli.commands.train import ranks_to_launch

    run = tmp_path / "20261130-120000-local"
    (run / "train").mkdir(parents=True)
    events = [{"type": "train_start", "t": 1.0, "world_size": 2, "n_train": 512},
              {"type": "checkpoint", "t": 2.0, "epoch": 1, "step": 3}]  # fmt: skip
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    cfg = SimpleNamespace(resume=True, run_dir=str(run / "train"))
    assert ranks_to_launch(None, cfg) == 2
    assert checkpoint_at(run / "train") == (1, 3) == checkpoint_at(run)
    assert ranks_to_launch(3, cfg) == 3  # --nproc still wins


def test_the_trainer_itself_refuses_a_checkpoint_of_another_dataset(
    tiny_data: Path, tmp_path: Path
) -> None:
    """`train --resume` compares datasets before launching, `run --resume` did not: its
    profile's input rewritten between the stop and the resume is preprocessed again, and the
    checkpoint went on over other rows (or other word ids). The checkpoint now records its
    dataset and every launcher's trainer checks it."""
    from dataclasses import replace

    from engine.config import ModelConfig, TrainConfig
    from engine.errors import ConfigError
    from engine.sentiment.trainer import DistEnv, Trainer

    cfg = TrainConfig(
        data_dir=str(tiny_data), run_dir=str(tmp_path / "run"), epochs=1, batch_size=64,
        model=ModelConfig(preset="seed", hidden=8), checkpoint_every_min=0, events_file=False,
    )  # fmt: skip
    Trainer(cfg, env=DistEnv()).fit()
    state = __import__("torch").load(tmp_path / "run" / "checkpoints" / "latest.pt")
    assert state["dataset"]["n_train"] == 512 and state["dataset"]["vocab_sha"]
    longer = replace(cfg, epochs=2, resume=True)
    words = Path(shutil.copytree(tiny_data, tmp_path / "words"))  # same rows, one word other
    vocab = json.loads((words / "vocab.json").read_text())
    vocab["words"][-1] = "zzzother"
    (words / "vocab.json").write_text(json.dumps(vocab))
    for other, said in (
        (write_dataset(tmp_path / "fewer", n_train=256), "training samples differ (512 then"),
        (words, "its vocabulary differ"),
    ):
        with pytest.raises(ConfigError, match="trained on another dataset") as refused:
            Trainer(replace(longer, data_dir=str(other)), env=DistEnv()).fit()
        assert said in refused.value.message
    moved = tmp_path / "moved"
    tiny_data.rename(moved)  # the same dataset at another path: it trains on
    Trainer(replace(longer, data_dir=str(moved)), env=DistEnv()).fit()


def test_a_checkpoint_of_another_model_names_the_fields_that_differ(
    tiny_data: Path, tmp_path: Path
) -> None:
    """The refusal printed both 20-key model specs whole; it now names what differs."""
    from dataclasses import replace

    from engine.config import ModelConfig, TrainConfig
    from engine.errors import TrainError
    from engine.sentiment.trainer import DistEnv, Trainer

    cfg = TrainConfig(
        data_dir=str(tiny_data), run_dir=str(tmp_path / "run"), epochs=1, batch_size=64,
        model=ModelConfig(preset="seed", hidden=8), checkpoint_every_min=0, events_file=False,
    )  # fmt: skip
    Trainer(cfg, env=DistEnv()).fit()
    wider = replace(cfg, epochs=2, resume=True, model=ModelConfig(preset="seed", hidden=16))
    with pytest.raises(TrainError, match=r"is for another model: hidden 8 then, 16 now$"):
        Trainer(wider, env=DistEnv()).fit()


def test_a_rank_that_refuses_the_resume_is_not_told_to_resume_the_same_way(
    tiny_data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the trainer itself refuses a checkpoint (the launcher's check left out here), the
    command exited 1 and its hint said the very command that failed "continues it", with the
    refused --data in it."""
    import tui.cli.commands.train as train_command

    run = tmp_path / "run"
    assert main(_train(tiny_data, run)) == 0
    (run / "summary.json").unlink()
    fewer = write_dataset(tmp_path / "fewer", n_train=256)
    monkeypatch.setattr(train_command, "_check_same_dataset", lambda cfg: None)
    capsys.readouterr()
    argv = ["train", "--run-dir", str(run), "--resume", "--data", str(fewer)]
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "trained on another dataset" in err
    assert f"--data {fewer}" not in err
    assert "once what the rank refused above is fixed" in err
    assert f"sentitop train --data DATA --run-dir {run} --resume" in err


def test_resume_without_data_takes_the_runs_own_dataset(
    tiny_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train --run-dir R --resume` was a usage error (--data required) though the run records
    its dataset; a new run still needs --data."""
    run = tmp_path / "run"
    assert main(_train(tiny_data, run)) == 0
    (run / "summary.json").unlink()
    capsys.readouterr()
    assert main(["train", "--run-dir", str(run), "--resume", "--epochs", "2"]) == 0
    assert "resumed from checkpoints/latest.pt" in capsys.readouterr().out
    assert main(["train", "--run-dir", str(tmp_path / "new")]) == 2
    err = capsys.readouterr().err
    assert "--data is required" in err and "with --resume it is the run's own" in err

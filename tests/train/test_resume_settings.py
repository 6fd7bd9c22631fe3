"""`sentitop train --resume` continues the run as it was started: its own settings, not defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.config import TrainConfig, config_to_dict
from engine.errors import ConfigError
from engine.sentiment.train import config_from_args
from tui.cli import build_parser
from tui.cli.commands.train import resumed_settings


def _args(run: Path, *extra: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["train", "--data", "d", "--run-dir", str(run), *extra])


def _saved(run: Path) -> None:
    run.mkdir()
    cfg = TrainConfig(data_dir="d", run_dir=str(run), epochs=4, batch_size=64, lr=0.02, seed=5)
    (run / "train_config.json").write_text(json.dumps(config_to_dict(cfg)))


def test_resume_alone_keeps_the_runs_settings(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _saved(run)
    args = _args(run, "--resume")
    cfg = config_from_args(args, base=resumed_settings(args))
    assert (cfg.epochs, cfg.batch_size, cfg.lr, cfg.seed, cfg.resume) == (4, 64, 0.02, 5, True)
    longer = _args(run, "--resume", "--epochs", "6")  # more epochs: allowed
    assert config_from_args(longer, base=resumed_settings(longer)).epochs == 6
    fresh = _args(run)  # no --resume: the defaults, as before
    assert resumed_settings(fresh) is None and config_from_args(fresh).batch_size == 256


def test_a_run_from_before_length_buckets_were_the_default_resumes_without_them(
    tmp_path: Path,
) -> None:
    """Its train_config.json says length_buckets false: resumed, it keeps its sample order."""
    run = tmp_path / "run"
    _saved(run)
    saved = json.loads((run / "train_config.json").read_text())
    assert saved["length_buckets"] is True  # today's default
    saved["length_buckets"] = False
    (run / "train_config.json").write_text(json.dumps(saved))
    args = _args(run, "--resume")
    assert config_from_args(args, base=resumed_settings(args)).length_buckets is False
    assert config_from_args(_args(tmp_path / "new")).length_buckets is True


def test_resume_refuses_flags_that_would_change_the_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _saved(run)
    with pytest.raises(ConfigError, match=r"--batch-size 256 \(the run has 64\)"):
        resumed_settings(_args(run, "--resume", "--batch-size", "256"))
    assert resumed_settings(_args(run, "--resume", "--batch-size", "64")) is not None  # same
    with pytest.raises(ConfigError, match=r"--length-buckets False \(the run has True\)"):
        resumed_settings(_args(run, "--resume", "--no-length-buckets"))  # another sample order
    with pytest.raises(ConfigError, match="holds no checkpoint"):  # nothing saved: no run
        resumed_settings(_args(tmp_path / "none", "--resume"))

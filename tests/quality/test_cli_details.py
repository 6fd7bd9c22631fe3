"""Small CLI promises: help text as printed, exit 2 for bad input, messages that say what is wrong,
piped output not cut to 80 columns."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.run.conftest import ROOT
from tui.cli import build_parser, main
from tui.cli.console import PIPE_WIDTH, make_console


def _help(command: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", command, "--help"],
        capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "COLUMNS": "100"},
    ).stdout  # fmt: skip


def test_synth_help_prints_single_percent_signs() -> None:
    text = " ".join(_help("synth").split())
    assert "duplicate rate (85 %)" in text and "(59 % 5-star)" in text and "%%" not in text


def _subparser(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_train_help_says_when_data_is_required_and_explains_every_option() -> None:
    usage = " ".join(_help("train").split())
    assert "sentitop train [-h] [--data DATA_DIR] --run-dir RUN_DIR" in usage
    assert "Required, except with --resume (the run's own dataset)" in usage
    for action in _subparser("train")._actions:
        assert action.help and action.help.strip(), action.option_strings


@pytest.mark.parametrize("command", ["predict", "eval", "replay", "report"])
def test_run_taking_commands_explain_the_forms(command: str) -> None:
    text = " ".join(_help(command).split())
    assert "runs/<id>" in text and "train/" in text and "run id" in text


def test_embed_on_an_empty_file_says_it_is_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    rc = main(["embed", "--input", str(empty), "--run-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and f"{empty} is empty" in err and "--min-count" not in err


def test_embed_on_garbage_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\x00\xff garbage\n{not json\n")
    rc = main(["embed", "--input", str(junk), "--run-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and f"{junk}: no usable review" in err and "--min-count" not in err


def test_piped_console_is_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # not a terminal
    monkeypatch.delenv("COLUMNS", raising=False)
    assert make_console().width == PIPE_WIDTH
    monkeypatch.setenv("COLUMNS", "132")
    assert make_console().width == 132
    assert make_console(min_width=150).width == 150


def test_runs_title_names_the_folder(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = runs / "20261124-000000-x"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"status": "ok", "provider": "local"}))
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", "runs", "--runs-dir", str(runs)],
        capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)},
    ).stdout  # fmt: skip
    title = out.splitlines()[0].strip()
    assert title == f"runs ({runs})"  # not "runs in runs"


def test_train_lines_number_epochs_from_1(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.events import encode_event, make_event
    from tui.cli.commands.train import _Printer

    printer = _Printer(quiet=False)
    epoch = make_event("epoch", epoch=0, train_loss=0.5, accuracy=0.8, f1=0.7, seconds=1.0,
                       samples_per_s=100.0)  # fmt: skip
    printer(0, "stdout", encode_event(epoch))
    printer(0, "stdout", encode_event(make_event("threshold", epoch=1, seconds=3.25)))
    out = capsys.readouterr().out
    assert out.startswith("epoch 1: train loss 0.5000")  # events count from 0, people from 1
    assert "loss threshold reached at 3.2 s (epoch 2)" in out


def test_train_says_what_it_fits_after_training_and_what_became_of_the_companion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from engine.events import encode_event, make_event
    from tui.cli.commands.train import _Printer, summary_lines

    printer = _Printer(quiet=False)
    fits = make_event("after_training", fits=["blend", "companion"], valid_samples=1167,
                      companion_rows=10410)  # fmt: skip
    printer(0, "stdout", encode_event(fits))
    printer(0, "stdout", encode_event(make_event("after_training", fits=[], valid_samples=9)))
    out = capsys.readouterr().out
    assert out == (
        "after training: fitting the paths' blend and the linear companion on 1,167 validation "
        "samples (companion on 10,410 training rows)\n"
    )
    summary = {"accuracy": 0.8895, "f1": 0.9384, "epochs": 2, "wall_s": 62.7,
               "samples_per_s": 373.0, "time_to_threshold_s": None,
               "companion": {"applied": True, "features": 83250, "rows": 10410, "c": 16.0,
                             "valid_accuracy": 0.8877},
               "blend": {"applied": True}}  # fmt: skip
    lines = summary_lines(summary, "run")
    assert lines[0].startswith("accuracy 0.8895  f1 0.9384  epochs 2")
    assert lines[1] == ("linear companion: kept: 83,250 features from 10,410 rows, C 16.0, its "
                        "own validation accuracy 0.8877")  # fmt: skip
    assert lines[2].startswith("(the blend of the model's paths (its weights) was chosen on the "
                               "held-out split this accuracy is measured on")  # fmt: skip
    kept = summary_lines({**summary, "best_epoch": 0}, "run")[2]  # the first of 2 evaluated
    assert kept.startswith("(the epoch kept (1 of 2) and the blend of the model's paths (its "
                           "weights) were chosen on the held-out split")  # fmt: skip
    plain = summary_lines({**summary, "companion": None, "blend": None}, "run")
    assert len(plain) == 1
    one = summary_lines({**summary, "blend": None, "epochs": 1, "best_epoch": 0}, "run")
    assert len(one) == 2  # one epoch evaluated: nothing was chosen on the test split
    counted = summary_lines({**summary, "n_test": 1167}, "run")[0]  # how sure, and on how many
    assert counted.startswith("accuracy 0.8895 (95 % 0.8702-0.9062, 1,167 test reviews)  f1")

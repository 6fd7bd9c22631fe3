"""A profile's relative `data.inputs` are read from the folder `sentitop run` is started in, as
the README says: the check before the run found the file there, then the preprocessing process
(started in the run's node folder) did not ("cannot read input in/r.jsonl: No such file")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.synth import generate
from tui.cli import main


def test_a_relative_input_is_read_from_where_the_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    (work / "in").mkdir(parents=True)
    generate(work / "in" / "r.jsonl", 400_000, seed=3, distinct=0.9)
    profile = work / "rel.yaml"
    profile.write_text(
        "name: rel\nprovider: local\ndata:\n  inputs: [in/r.jsonl]\n"
        "preprocess: {vocab_size: 500, seq_len: 24}\n"
        "train: {nproc: 1, epochs: 1, batch_size: 32, threads: 1, checkpoint_every_min: 0}\n"
    )
    monkeypatch.chdir(work)
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    rc = main(["run", "rel.yaml", "--runs-dir", str(tmp_path / "runs"), "--json"])
    err = capsys.readouterr().err
    assert rc == 0, err
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["n_train"] > 100
    config = json.loads((run / "preprocess_config.json").read_text())
    assert config["inputs"] == [str(work / "in" / "r.jsonl")]  # what the process was given


def test_profiles_says_what_run_does_with_a_missing_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sentitop profiles` warned "a run started here stops at preprocessing"; `run` refuses
    such a profile before a run folder exists."""
    from remote.profile import load_profile

    profile = tmp_path / "p.yaml"
    profile.write_text("name: p\nprovider: local\ndata:\n  inputs: [in/none.jsonl]\n")
    monkeypatch.chdir(tmp_path)
    (said,) = [w for w in load_profile(profile).warnings() if "data.inputs[0]" in w]
    assert "refuses to start" in said and "stops at preprocessing" not in said
    assert str(tmp_path) in said  # where relative paths are read from

"""An embeddings start that knows none of the dataset's words is refused, one that knows few is
warned about, and a --resume needs neither the run folder nor the directory it was named from."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.sentiment.pretrained import coverage_warning, dataset_itos
from tests.run.conftest import sentitop
from tests.train.conftest import write_dataset
from tests.train.test_init_embeddings import write_embed_run


def test_coverage_none_is_refused_few_is_warned_most_is_quiet() -> None:
    with pytest.raises(ConfigError, match="none of the dataset's 50 words"):
        coverage_warning(0, 50, "emb")
    few = coverage_warning(10, 40, "emb")
    assert few is not None and "knows only 10 of the dataset's 50 words (20%)" in few
    assert coverage_warning(30, 20, "emb") is None
    assert coverage_warning(0, 0, "emb") is None  # no words at all: nothing to say
    # "knows only 33%" alarmed a user whose run knew nearly every frequent word (97.6 % of
    # the text): the most frequent words are counted apart
    top = coverage_warning(6_600, 13_187, "emb", (990, 1_000))
    assert top is not None and "of its 1,000 most frequent words it knows 990, 99%" in top


def test_train_refuses_an_embeddings_run_of_other_words(tmp_path: Path) -> None:
    """It trained with an all-random table, exit 0; only an event said found: 0."""
    data = write_dataset(tmp_path / "data", n_train=64, n_test=32)
    write_embed_run(tmp_path / "emb", ["zebra", "quasar"], dim=4)
    run = tmp_path / "run"
    argv = ["train", "--data", str(data), "--run-dir", str(run), "--epochs", "1"]
    proc = sentitop(*argv, "--model-init-embeddings", str(tmp_path / "emb"), env=dict(os.environ))
    assert proc.returncode == 2, proc.stderr
    assert "none of the dataset's 50 words is in that embeddings run" in proc.stderr
    assert "launch" not in proc.stderr and not (run / "train_config.json").exists()


def test_few_known_words_warn_and_are_recorded_and_resume_needs_no_folder(tmp_path: Path) -> None:
    """A resume read the embeddings folder again, by the relative path it was given: from
    another directory, or once the folder was deleted, it failed although the checkpoint
    holds the table."""
    data = write_dataset(tmp_path / "data", n_train=64, n_test=32)
    write_embed_run(tmp_path / "emb", [*dataset_itos(data)[2:12], "zebra"], dim=4)  # 10 of 50
    env = dict(os.environ)
    argv = ["train", "--data", "data", "--run-dir", "run", "--epochs", "1"]
    proc = sentitop(*argv, "--model-init-embeddings", "emb", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING: the embeddings run" in proc.stderr and "(20%)" in proc.stderr
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["init_embeddings"]["found"] == 10
    assert (summary["init_embeddings"]["top_found"], summary["init_embeddings"]["top_total"]) == (
        10,
        50,
    )  # the 10 it knows are the dataset's most frequent (vocab.json lists those first)
    assert "of its 50 most frequent words it knows 10, 20%" in proc.stderr
    assert proc.stderr.count("WARNING: the embeddings run") == 1  # it was printed twice
    assert summary["init_embeddings"]["source"] == str(tmp_path / "emb")
    assert "few_known_words" in [w["code"] for w in summary["warnings"]]
    saved = json.loads((run / "train_config.json").read_text())
    assert saved["model"]["init_embeddings"] == str(tmp_path / "emb")  # absolute
    shutil.rmtree(tmp_path / "emb")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resume = ["train", "--data", str(data), "--run-dir", str(run), "--resume", "--epochs", "2"]
    proc = sentitop(*resume, env=env, cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["epochs"] == 2
    assert summary["init_embeddings"]["found"] == 10  # carried by the checkpoint

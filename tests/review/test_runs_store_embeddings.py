"""Embeddings run folders (`sentitop embed`) in the runs store, beside sentiment runs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from remote.profile import load_profile
from remote.runs_store import list_runs, workload_keys
from tests.review.conftest import TINY
from tui.cli import main

EMBED_RUN = (
    Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "embed-runs" / "20261121-embed"
)
"""A recorded 2-rank sync embeddings run (summary.json + events.jsonl)."""


@pytest.fixture
def runs(make_run: Callable[..., Path], tmp_path: Path) -> Path:
    """A runs folder with one sentiment run and the recorded embeddings run."""
    make_run("sentiment", nproc=1, epoch_s=[5.0, 6.0], sync_s=0.1)
    shutil.copytree(EMBED_RUN, tmp_path / "runs" / EMBED_RUN.name)
    return tmp_path / "runs"


def test_embeddings_runs_are_listed_with_their_own_numbers(runs: Path) -> None:
    summary = json.loads((EMBED_RUN / "summary.json").read_text())
    records = {r.run_id: r for r in list_runs(runs)}
    embed, sentiment = records[EMBED_RUN.name], records["sentiment"]
    assert (embed.task, sentiment.task) == ("embeddings", "sentiment")
    seconds = [e["seconds"] for e in summary["per_epoch"]]
    assert embed.epoch_seconds == seconds and embed.epochs == len(seconds)
    assert embed.epoch_s == pytest.approx(summary["s_per_epoch"])
    assert embed.words_per_s == summary["words_per_s"] > 0
    assert embed.pip_loss == summary["pip_loss"] < summary["pip_loss_initial"]
    assert embed.workers == summary["world_size"] and embed.accuracy is None
    assert sentiment.pip_loss is None and sentiment.words_per_s is None
    assert sentiment.epoch_seconds == [5.0, 6.0]
    # the review's cost model never fits an embeddings run to a sentiment profile
    assert embed.workload != workload_keys(load_profile(TINY).resolved())[0]
    assert embed.workload != sentiment.workload and embed.data_key != sentiment.data_key


def test_sentitop_runs_lists_both(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--runs-dir", str(runs), "--json"]) == 0
    rows = {r["run"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"sentiment", EMBED_RUN.name}
    assert rows[EMBED_RUN.name]["epoch_s"] is not None and rows[EMBED_RUN.name]["epochs"] > 1
    assert main(["runs", "--runs-dir", str(runs)]) == 0
    assert EMBED_RUN.name[:8] in capsys.readouterr().out

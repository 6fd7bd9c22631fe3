"""`sentitop runs` shows each run's workload with its own quality and rate columns."""

from __future__ import annotations

import json
from pathlib import Path

from tui.cli import main

EMBED_RUNS = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "embed-runs"


def test_runs_json_lists_embeddings_run_with_words_per_s_and_pip(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["runs", "--runs-dir", str(EMBED_RUNS), "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["workload"] == "embeddings"
    assert run["words_per_s"] > 0
    assert 0.0 <= run["pip_loss"] <= 2.0


def test_runs_table_shows_pip_loss_and_words_per_s(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["runs", "--runs-dir", str(EMBED_RUNS)]) == 0
    out = capsys.readouterr().out
    assert "embeddings" in out and "PIP " in out and " w/s" in out

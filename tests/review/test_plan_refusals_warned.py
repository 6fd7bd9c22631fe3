"""`plan` warns about what `sentitop run` would refuse at its start (and still plans)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_embeddings_run_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`profiles` said ok and `plan` said nothing; `run` then refused it with exit 2."""
    text = (ROOT / "profiles" / "local.yaml").read_text()
    profile = tmp_path / "init.yaml"
    missing = tmp_path / "no-such-embed-run"
    profile.write_text(text.replace("  model:\n", f"  model:\n    init_embeddings: {missing}\n", 1))
    runs = tmp_path / "runs"
    runs.mkdir()
    assert main(["plan", str(profile), "--runs-dir", str(runs)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "warning: " in err and str(missing) in err
    assert main(["run", str(profile), "--runs-dir", str(runs)]) == 2  # what it warned of
    assert str(missing) in capsys.readouterr().err and not list(runs.iterdir())

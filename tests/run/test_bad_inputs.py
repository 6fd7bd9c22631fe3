"""`sentitop run` on a profile whose data.inputs no result can come from: exit 2, no "ok"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bad_inputs import BAD_INPUTS
from tests.run.conftest import sentitop

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", sorted(BAD_INPUTS))
def test_run_refuses_unusable_input(kind: str, tmp_path: Path, run_env: dict[str, str]) -> None:
    path = BAD_INPUTS[kind](tmp_path)
    profile = tmp_path / "bad.yaml"
    profile.write_text(
        f"name: bad\nprovider: local\ndata:\n  inputs: [{path}]\ntrain:\n  nproc: 1\n  epochs: 1\n"
    )
    result = sentitop("run", str(profile), env=run_env, timeout=180)
    assert result.returncode == 2, result.stderr
    assert str(path) in result.stderr and "Traceback" not in result.stderr
    assert " ok" not in result.stdout and "— failed" in result.stdout
    assert '{"type"' not in result.stdout + result.stderr  # no raw event lines in the summary
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and str(path) in summary["reason"]
    reason = summary["reason"].removeprefix("preprocessing rejected its input: ")
    said = [line.removeprefix("error: ") for line in reason.splitlines()]
    assert len(said) == len(set(said))  # said once, not its error event's copy too
    assert summary["train"] == {}  # training never started

    as_json = sentitop("run", str(profile), "--json", env=run_env, timeout=180)
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["status"] == "failed"

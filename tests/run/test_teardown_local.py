"""`sentitop teardown` of a run that never used the cloud says so, without asking AWS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui.cli import main


@pytest.mark.parametrize("provider", ["local", "ssh"])
def test_a_run_without_cloud_machines_has_nothing_to_tear_down(
    provider: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import remote.teardown

    def no_aws(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("AWS was asked")

    monkeypatch.setattr("tui.cli.commands.teardown.teardown_run", no_aws)
    assert remote.teardown.teardown_run is not no_aws  # only the command's name is replaced
    run = tmp_path / "runs" / "20261127-000000-x"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"status": "ok", "provider": provider}))
    assert main(["teardown", str(run)]) == 0
    assert f"ran on {provider} machines: nothing in the cloud" in capsys.readouterr().out
    monkeypatch.setenv("SENTITOP_RUNS_DIR", str(tmp_path / "runs"))
    assert main(["teardown", run.name, "--json"]) == 0  # by id, from the runs folder
    assert json.loads(capsys.readouterr().out) == {"run_id": run.name, "provider": provider}

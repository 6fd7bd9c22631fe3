"""One run folder everywhere: predict, eval, report, replay (and teardown) take the folder that
`sentitop run` prints (runs/<id>), its train/ subfolder, or the bare run id."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.errors import InputError
from remote.run_folder import resolve_run_dir, run_id_of
from tests.run.conftest import ROOT, TINY_PROFILE
from tui.cli import main

RUN_ID = "20261124-000000-tiny"


def _fake_run(root: Path) -> Path:
    run = root / "runs" / RUN_ID
    (run / "train").mkdir(parents=True)
    for name in ("events.jsonl", "summary.json"):
        (run / name).write_text("{}")
    for name in ("model.json", "summary.json"):
        (run / "train" / name).write_text("{}")
    return run


@pytest.mark.parametrize("form", ["runs/{id}", "runs/{id}/", "runs/{id}/train", "{id}"])
def test_every_form_resolves_to_the_same_folders(
    form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _fake_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SENTITOP_RUNS_DIR", str(tmp_path / "runs"))
    ref = form.format(id=RUN_ID)

    def found(**kwargs: Any) -> Path:
        return resolve_run_dir(ref, **kwargs).resolve()

    assert found(want="events.jsonl") == run
    assert found(want="summary.json") == run  # not train/summary.json
    assert found(want="model.json", part="train") == run / "train"
    assert run_id_of(ref) == RUN_ID


def test_a_missing_run_lists_what_was_tried(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        resolve_run_dir("nosuch", want="model.json", part="train", root=tmp_path)
    message = info.value.message
    assert f"tried nosuch, nosuch/train, {tmp_path}/nosuch, {tmp_path}/nosuch/train" in message
    assert "runs/<id>" in (info.value.hint or "")


def test_a_model_fetched_one_folder_too_deep_is_still_found(tmp_path: Path) -> None:
    """Runs trained on SSH nodes before the fetch was fixed have their model in train/train/."""
    deep = tmp_path / "20261130-214930-ssh" / "train" / "train"
    deep.mkdir(parents=True)
    (deep / "model.json").write_text("{}")
    for ref in ("20261130-214930-ssh", str(tmp_path / "20261130-214930-ssh" / "train")):
        assert resolve_run_dir(ref, want="model.json", part="train", root=tmp_path) == deep


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A real 1-epoch `sentitop run` of the tiny profile: (its working directory, environment)."""
    work = tmp_path_factory.mktemp("work")
    env = dict(os.environ, SENTITOP_CACHE_DIR=str(work / "cache"), PYTHONPATH=str(ROOT))
    env.pop("SENTITOP_RUNS_DIR", None)
    profile = work / "tiny.yaml"
    profile.write_text(
        TINY_PROFILE.format(name="tiny", instance_type="m5.large", nproc=1, epochs=1, max_usd=1)
    )
    result = subprocess.run(
        [sys.executable, "-m", "tui.cli", "run", str(profile)],
        env=env, cwd=work, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (run,) = (work / "runs").iterdir()
    assert f"run folder: {run}" in " ".join(result.stdout.split())
    return work, env


def _forms(work: Path) -> list[str]:
    (run,) = (work / "runs").iterdir()
    return [f"runs/{run.name}", f"runs/{run.name}/train", run.name]


@pytest.fixture()
def in_work(finished_run: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> Path:
    work, _ = finished_run
    monkeypatch.chdir(work)
    monkeypatch.delenv("SENTITOP_RUNS_DIR", raising=False)
    return work


@pytest.mark.slow
def test_predict_takes_every_form(in_work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for ref in _forms(in_work):
        assert main(["predict", ref, "great sound, love it"]) == 0, ref
        assert "great sound, love it" in capsys.readouterr().out


@pytest.mark.slow
def test_eval_takes_every_form(in_work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (reviews,) = (in_work / "cache" / "synthetic").glob("*.jsonl")
    for ref in _forms(in_work):
        assert main(["eval", ref, "--input", str(reviews), "--json"]) == 0, ref
        assert '"accuracy"' in capsys.readouterr().out


@pytest.mark.slow
def test_report_takes_every_form(in_work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i, ref in enumerate(_forms(in_work)):
        out = in_work / f"report{i}"
        assert main(["report", ref, "--output", str(out)]) == 0, ref
        assert (out / "report.md").is_file()
        assert ref.split("/")[1 if "/" in ref else 0] in (out / "report.md").read_text()
    capsys.readouterr()


@pytest.mark.slow
def test_replay_takes_every_form(in_work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.app

    opened: list[dict[str, Any]] = []
    monkeypatch.setattr(tui.app, "run_dashboard", lambda **kw: opened.append(kw) or 0)
    (run,) = (in_work / "runs").iterdir()
    for ref in _forms(in_work):
        assert main(["replay", ref]) == 0, ref
    assert [Path(kw["replay"]).resolve() for kw in opened] == [run.resolve()] * 3


@pytest.mark.slow
def test_the_runs_dir_setting_finds_a_bare_id(
    finished_run: tuple[Path, dict[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    work, _ = finished_run
    monkeypatch.chdir(tmp_path)  # elsewhere: only $SENTITOP_RUNS_DIR can find the id
    (run,) = (work / "runs").iterdir()
    assert main(["predict", run.name, "fine"]) == 2
    assert f"tried {run.name}, {run.name}/train" in " ".join(capsys.readouterr().err.split())
    monkeypatch.setenv("SENTITOP_RUNS_DIR", str(work / "runs"))
    assert main(["predict", run.name, "fine"]) == 0

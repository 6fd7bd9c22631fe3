"""A resumed run keeps its sample order and learning rate unless its profile chooses them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remote.profile import load_profile
from remote.resume import keep_run_settings

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def _run(folder: Path, *starts: dict[str, object]) -> Path:
    """A run folder whose events.jsonl holds these train_start events (and a step)."""
    folder.mkdir()
    lines = [{"type": "train_start", "t": 1.0, "epochs": 3, **s} for s in starts]
    lines.append({"type": "step", "t": 2.0, "step": 1})
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    return folder


@pytest.mark.parametrize(
    ("starts", "kept"),
    [
        ([{}], False),  # recorded before the setting existed or was the default: random batches
        ([{"length_buckets": False}], False),
        ([{"length_buckets": True}], True),
        ([{"length_buckets": True}, {"length_buckets": False}], False),  # the newest session
    ],
)
def test_the_runs_own_order_is_kept_when_the_profile_leaves_it_out(
    tmp_path: Path, starts: list[dict[str, object]], kept: bool
) -> None:
    profile = load_profile(PROFILES / "local.yaml")
    assert profile.train.length_buckets is None
    cfg = profile.to_train_config("d", "r")
    assert cfg.length_buckets is True  # today's default for a new run
    resumed = keep_run_settings(cfg, profile, _run(tmp_path / "run", *starts))
    assert resumed.length_buckets is kept
    assert (resumed.epochs, resumed.batch_size, resumed.seed) == (cfg.epochs, cfg.batch_size, 0)


def test_a_profile_that_chooses_an_order_wins(tmp_path: Path) -> None:
    text = (
        (PROFILES / "local.yaml")
        .read_text()
        .replace("  nproc: 2\n", "  nproc: 2\n  length_buckets: true\n")
    )
    path = tmp_path / "chosen.yaml"
    path.write_text(text)
    profile = load_profile(path)
    old = _run(tmp_path / "run", {"length_buckets": False})
    assert keep_run_settings(profile.to_train_config("d", "r"), profile, old).length_buckets


def _without_lr(tmp_path: Path) -> Path:
    """profiles/local.yaml with its own learning rate left out (the engine's default then)."""
    text = (PROFILES / "local.yaml").read_text()
    kept = "".join(line for line in text.splitlines(True) if not line.startswith("  lr:"))
    assert kept != text
    path = tmp_path / "no_lr.yaml"
    path.write_text(kept)
    return path


@pytest.mark.parametrize(
    ("start", "kept"),
    [
        ({"reference_lr": 0.004, "lr": 0.002, "global_batch": 128}, 0.004),
        ({"lr": 0.002, "global_batch": 128}, 0.004),  # before reference_lr: scaled back to 256
        ({"lr": 0.008, "global_batch": 512}, 0.004),
    ],
)
def test_the_runs_own_learning_rate_is_kept_when_the_profile_leaves_it_out(
    tmp_path: Path, start: dict[str, object], kept: float
) -> None:
    profile = load_profile(_without_lr(tmp_path))
    assert profile.train.lr is None
    cfg = profile.to_train_config("d", "r")
    assert cfg.lr != pytest.approx(kept)  # today's default differs from the run's
    resumed = keep_run_settings(cfg, profile, _run(tmp_path / "run", start))
    assert resumed.lr == pytest.approx(kept)
    assert (resumed.epochs, resumed.batch_size) == (cfg.epochs, cfg.batch_size)


@pytest.mark.parametrize("start", [{}, {"lr": "fast", "global_batch": 128}, {"lr": 0.0}])
def test_a_run_that_does_not_say_its_rate_resumes_at_the_default(
    tmp_path: Path, start: dict[str, object]
) -> None:
    profile = load_profile(_without_lr(tmp_path))
    cfg = profile.to_train_config("d", "r")
    assert keep_run_settings(cfg, profile, _run(tmp_path / "run", start)).lr == cfg.lr


def test_a_profile_that_chooses_a_rate_wins(tmp_path: Path) -> None:
    profile = load_profile(PROFILES / "local.yaml")
    assert profile.train.lr == pytest.approx(0.012)
    old = _run(tmp_path / "run", {"reference_lr": 0.004, "lr": 0.002, "global_batch": 128})
    assert keep_run_settings(profile.to_train_config("d", "r"), profile, old).lr == 0.012

"""A resumed run keeps the sample order it trained with unless its profile chooses one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remote.profile import load_profile
from remote.resume import keep_sample_order

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
    resumed = keep_sample_order(cfg, profile, _run(tmp_path / "run", *starts))
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
    assert keep_sample_order(profile.to_train_config("d", "r"), profile, old).length_buckets

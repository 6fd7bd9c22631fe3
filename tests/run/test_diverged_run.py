"""`sentitop run` of a run that diverges: the failure says to lower the learning rate, and the
run is not offered (nor taken) for --resume, whose checkpoint would diverge the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import sentitop

PROFILE = """\
name: diverging
provider: local
instance_type: m5.large
data:
  synthetic: {size: 400KB, seed: 1}
preprocess: {vocab_size: 500, seq_len: 32}
train:
  nproc: 1
  epochs: 2
  batch_size: 64
  lr: 1.0e+30
  optimizer: sgd
  warmup_steps: 0
  checkpoint_every_min: 0
  checkpoint_every_steps: 1
  threads: 1
"""


@pytest.mark.slow
def test_a_diverged_run_says_so_and_is_not_resumed(tmp_path: Path, run_env: dict[str, str]) -> None:
    profile = tmp_path / "diverging.yaml"
    profile.write_text(PROFILE)
    proc = sentitop("run", str(profile), env=run_env)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout + proc.stderr
    assert "training diverged" in out and "lower train.lr" in out, out
    assert "continue with: sentitop run --resume" not in out
    assert "Traceback" not in out
    runs = sorted(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    assert len(runs) == 1
    again = sentitop("run", "--resume", str(runs[0]), env=run_env)
    assert again.returncode == 2, again.stderr
    assert "training diverged" in again.stderr and "would diverge the same way" in again.stderr

"""`--resume` over the real loopback sshd: the kept checkpoint is pushed to the new nodes."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.events import read_events
from remote import runner
from remote.clusters.local import free_port
from remote.profile import load_profile
from tests.remote.conftest import LoopbackSSHD

PROFILE = """\
name: resume-ssh
provider: ssh
python: {python}
workdir: {workdir}
shared_fs: true
known_hosts: {known_hosts}
nodes:
  - {{name: a, host: {host_a}, port: {port}, user: {user}, key: {key}, nproc: 1}}
  - {{name: b, host: {host_b}, port: {port}, user: {user}, key: {key}, nproc: 1}}
data:
  synthetic: {{size: 2MB, seed: 1}}
preprocess: {{vocab_size: 500, seq_len: 32}}
train:
  epochs: 2
  batch_size: 64
  log_every: 2
  checkpoint_every_min: 0
  checkpoint_every_steps: 4
  threads: 1
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_a_stopped_ssh_run_resumes_on_its_nodes_from_the_kept_checkpoint(
    sshd: LoopbackSSHD, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "resume-ssh.yaml"
    path.write_text(
        PROFILE.format(
            python=sys.executable, workdir=tmp_path / "workdir", known_hosts=sshd.known_hosts,
            user=sshd.user, key=sshd.key, host_a=sshd.hosts[0], host_b=sshd.hosts[1],
            port=sshd.port,
        )
    )  # fmt: skip
    make = runner.make_cluster

    def make_cluster(profile: Any, **options: Any) -> Any:
        cluster = make(profile, **options)
        cluster.rdzv_port = free_port(sshd.hosts[0])  # not 29400: tests may run side by side
        return cluster

    monkeypatch.setattr(runner, "make_cluster", make_cluster)
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    runs = tmp_path / "runs"
    stop = asyncio.Event()
    stored: list[dict[str, Any]] = []

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "checkpoint_stored":  # fetched here from rank 0's node
            stored.append(event)
            stop.set()  # more may come while the run stops: the newest is resumed from

    first = await runner.execute_run(
        load_profile(path), runs_dir=runs, on_event=on_event, stop=stop
    )
    assert first.status == "interrupted" and stored
    second = await runner.execute_run(load_profile(path), runs_dir=runs, resume_from=first.run_dir)
    assert second.status == "ok", second.summary.get("reason")
    events = list(read_events(second.run_dir / "events.jsonl"))
    starts = [e for e in events if e["type"] == "train_start"]
    assert starts and starts[0]["resumed_step"] == stored[-1]["step"]
    assert starts[0]["resumed_epoch"] == stored[-1]["epoch"]
    assert second.summary["epochs"] == 2 and second.summary["resumed_from"] == str(first.run_dir)
    # the model came home where eval and predict look for it (it landed in train/train/)
    assert (second.run_dir / "train" / "model.json").is_file()
    assert not (second.run_dir / "train" / "train").exists()

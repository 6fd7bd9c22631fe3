"""Instances that ran but never became nodes (SSH never answered) are still billed."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from engine.errors import LaunchError
from engine.events import Emitter
from remote.clusters.ec2 import EC2Cluster, InstanceGroupSpec
from remote.cost import CostMeter
from remote.datasets import PreparedData
from remote.pricing import PriceBook, load_catalog
from remote.profile import load_profile
from remote.recovery import RecoveryLedger
from remote.train_stage import TrainContext, run_training
from tests.remote.aws.conftest import REGION, running_tagged

pytestmark = pytest.mark.aws

PROFILE = """\
name: bill-ec2
provider: ec2
region: us-east-1
nodes:
  - {{instance_type: g5.xlarge, count: 2, ami: {ami}}}
data: {{synthetic: {{size: 1MB}}}}
"""


class ListSink:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def write(self, event: dict) -> None:
        self.events.append(dict(event))

    def close(self) -> None:
        pass


async def test_instances_whose_ssh_never_answers_are_billed_from_launch(
    ec2, ami, run_id, dead_port, tmp_path: Path
) -> None:
    profile_path = tmp_path / "bill.yaml"
    profile_path.write_text(PROFILE.format(ami=ami))
    profile = load_profile(profile_path)
    run_dir = tmp_path / run_id
    run_dir.mkdir()
    sink = ListSink()
    meter = CostMeter()
    book = PriceBook.from_catalog(load_catalog(), REGION)
    ctx = TrainContext(
        profile=profile, train=profile.to_train_config("", run_dir / "train"), run_dir=run_dir,
        emitter=Emitter(sink, run=run_id), sink=sink, meter=meter, book=book,
        on_line=None, ledger=RecoveryLedger(profile.recovery, run_started=time.time()),
    )  # fmt: skip
    cluster = EC2Cluster(
        [InstanceGroupSpec(instance_type="g5.xlarge", ami=ami, count=2)],
        users=["nobody"], keys=[None], nproc=[1], address_for=lambda inst: dead_port,
        known_hosts=str(tmp_path / "known_hosts"), python=sys.executable,
        workdir=str(tmp_path / "nodes"), probe_torch=False, poll_s=0.05, ready_timeout_s=1.0,
    )  # fmt: skip
    with pytest.raises(LaunchError, match="did not answer SSH"):
        async with cluster:
            await run_training(ctx, cluster, PreparedData(tmp_path, cached=False, stats={}))
    meter.stop_all()
    assert running_tagged(ec2, run_id) == []
    cost = meter.summary()
    ran = {i.id for i in cluster.fleet.running}
    assert len(ran) == 2
    assert {line["name"] for line in cost["lines"]} == {f"instance {i} (unused)" for i in ran}
    rate = book.on_demand_price("g5.xlarge").usd_per_hour
    assert all(line["billed_s"] >= 60 for line in cost["lines"])
    assert cost["usd"] == pytest.approx(2 * rate * 60 / 3600, abs=1e-5)  # the 1-minute minimum


RUN_PROFILE = """\
name: {name}
provider: ec2
region: us-east-1
ready_timeout: 2m
nodes:
  - {{instance_type: g5.xlarge, count: 2, ami: {ami}}}
data: {{synthetic: {{size: 1MB}}}}
{budget}"""


def _silent_run(monkeypatch, tmp_path: Path, dead_port, **cluster_options) -> None:
    """Point runner.execute_run at a ready dataset and at EC2 instances whose SSH never
    answers (the port is closed), leaving the rest of the run as it is."""
    from remote import runner
    from remote.cluster_factory import make_cluster
    from tests.train.conftest import write_dataset

    async def prepared(profile, run_dir, emitter, sink) -> PreparedData:
        folder = write_dataset(tmp_path / "dataset", n_train=256, n_test=64)
        return PreparedData(dataset_dir=folder, cached=False, stats={})

    def cluster(profile):
        return make_cluster(
            profile, address_for=lambda inst: dead_port, poll_s=0.05, python=sys.executable,
            known_hosts=str(tmp_path / "known_hosts"), workdir=str(tmp_path / "nodes"),
            probe_torch=False, **cluster_options,
        )  # fmt: skip

    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))  # no cached live prices
    monkeypatch.setattr(runner, "prepare_dataset", prepared)
    monkeypatch.setattr(runner, "make_cluster", cluster)


async def test_budget_stops_a_run_still_waiting_for_ssh_and_terminates_its_instances(
    ec2, ami, run_id, dead_port, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The instances bill from running, not from SSH answering: a budget too small for the
    boot stops the run during the SSH wait (it waited the whole ready_timeout, billing $0)."""
    import functools

    from engine.events import read_events
    from remote import runner
    from remote.clusters.ec2_fleet import describe_tagged
    from remote.cost import CostTicker

    _silent_run(monkeypatch, tmp_path, dead_port)
    path = tmp_path / "budget.yaml"
    path.write_text(RUN_PROFILE.format(name=run_id, ami=ami, budget=""))
    rate = load_profile(path).check_launch_budget(PriceBook.from_catalog(load_catalog(), REGION))
    max_usd = rate * 61 / 3600  # just above the one billed minute the launch check asks for
    path.write_text(
        RUN_PROFILE.format(name=run_id, ami=ami, budget=f"budget: {{max_usd: {max_usd}}}\n")
    )
    # a 2-minute teardown allowance: the first tick that sees the running instances knows the
    # budget would be exceeded (a real one: minutes into a 15-minute wait)
    monkeypatch.setattr(
        runner, "CostTicker", functools.partial(CostTicker, interval_s=0.1, teardown_s=120.0)
    )
    outcome = await asyncio.wait_for(
        runner.execute_run(load_profile(path), runs_dir=tmp_path / "runs"), 100
    )
    summary = outcome.summary
    assert outcome.status == "budget", summary["reason"]
    assert summary["reason"].startswith(f"budget max_usd ${max_usd:.2f} would be exceeded")
    run = outcome.run_dir.name
    assert describe_tagged(ec2, run, ("pending", "running")) == []  # torn down
    ids = sorted(i["InstanceId"] for i in describe_tagged(ec2, run, ("terminated",)))
    assert len(ids) == 2
    events = list(read_events(outcome.run_dir / "events.jsonl"))
    assert not [e for e in events if e["type"] == "node" and e.get("status") == "ready"]
    assert max(e["usd"] for e in events if e["type"] == "cost") > 0
    assert max(e["usd_per_hour"] for e in events if e["type"] == "cost") == pytest.approx(rate)
    assert events[-1]["type"] == "run_end" and events[-1]["status"] == "budget"
    # counted once: one line per instance, from its launch, and the total is their sum
    lines = summary["cost"]["lines"]
    assert sorted(line["name"] for line in lines) == [f"instance {i} (unused)" for i in ids]
    assert summary["usd"] > 0
    assert summary["usd"] == pytest.approx(sum(line["usd"] for line in lines), abs=1e-5)
    assert all(line["billed_s"] >= 60 for line in lines)


def test_headless_run_names_the_instances_that_never_answered_ssh(
    ec2, ami, run_id, dead_port, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from remote.clusters.ec2_fleet import describe_tagged
    from tui.cli import main

    _silent_run(monkeypatch, tmp_path, dead_port, ready_timeout_s=0.5)
    path = tmp_path / "silent.yaml"
    path.write_text(RUN_PROFILE.format(name=run_id, ami=ami, budget=""))
    assert main(["run", str(path), "--runs-dir", str(tmp_path / "runs")]) == 1
    err = capsys.readouterr().err
    assert "launch failed: 2 of 2 instance(s) did not answer SSH within 0.5 s of their launch" in (
        err
    )
    assert f"(g5.xlarge, nodes[0]) at {dead_port[0]}:{dead_port[1]}" in err
    assert "hint: check that the security group lets this machine reach TCP port 22" in err
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert describe_tagged(ec2, run_dir.name, ("pending", "running")) == []
    assert len(describe_tagged(ec2, run_dir.name, ("terminated",))) == 2


def test_a_missing_ssh_key_file_is_refused_before_any_instance_bills(
    ec2, ami, run_id, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The key was checked only at the first SSH connection: after the launch (60 s billed per
    instance at least) and the boot."""
    from tui.cli import main

    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "cache"))
    missing = tmp_path / "no-such.pem"
    path = tmp_path / "nokey.yaml"
    profile = RUN_PROFILE.format(name=run_id, ami=ami, budget="")
    path.write_text(profile.replace("ami: ", f"key: {missing}, ami: "))
    assert main(["run", str(path), "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert f"nodes[0].key: {missing} is not a file" in err and "Traceback" not in err
    # refused before anything started, a run folder included: each try had left a "failed"
    # run in `sentitop runs`
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_run_whose_instances_could_not_be_terminated_says_why_it_failed_and_that_they_bill(
    ec2, ami, run_id, dead_port, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """AWS stopped answering after the launch: the user read only "could not terminate …", not
    why the run failed, and `sentitop runs` then listed a plain failed run."""
    from remote.clusters.ec2_fleet import describe_tagged
    from tests.remote.aws.test_ec2 import _AWSGoesAway
    from tui.cli import main

    _silent_run(monkeypatch, tmp_path, dead_port, ready_timeout_s=0.5, ec2=_AWSGoesAway(ec2))
    path = tmp_path / "silent.yaml"
    path.write_text(RUN_PROFILE.format(name=run_id, ami=ami, budget=""))
    runs = tmp_path / "runs"
    try:
        assert main(["run", str(path), "--runs-dir", str(runs)]) == 1
    finally:
        (run_dir,) = runs.iterdir()
        left = [i["InstanceId"] for i in describe_tagged(ec2, run_dir.name, ("running",))]
        ec2.terminate_instances(InstanceIds=left)
    err = capsys.readouterr().err
    assert len(left) == 2 and "could not terminate the instances of run" in err
    assert "; it was tearing down after: 2 of 2 instance(s) did not answer SSH" in err
    assert json.loads((run_dir / "summary.json").read_text())["leftovers"] is True
    assert main(["runs", "--runs-dir", str(runs)]) == 0
    assert "its cloud machines could not be terminated" in capsys.readouterr().err

"""`sentitop teardown RUN_ID` against moto's server: a run's tagged EC2 and EMR go, others stay."""

from __future__ import annotations

import json
import uuid

import pytest

from remote import aws
from remote.clusters.ec2_fleet import InstanceGroupSpec, describe_tagged, launch_params
from tests.remote.aws.conftest import REGION, live_clusters
from tui.cli import main

pytestmark = pytest.mark.aws


def launch(ec2, ami: str, run_id: str, count: int, instance_type: str = "g5.xlarge") -> list[str]:
    """Start ``count`` instances tagged the way a run tags them; their ids."""
    spec = InstanceGroupSpec(instance_type=instance_type, ami=ami, count=count)
    reply = ec2.run_instances(**launch_params(spec, run_id, 0, uuid.uuid4().hex[:8]))
    return [i["InstanceId"] for i in reply["Instances"]]


def start_cluster(run_id: str) -> str:
    """An EMR cluster tagged with ``run_id``, kept alive (WAITING) like a stuck run's."""
    emr = aws.client("emr", REGION)
    return emr.run_job_flow(
        Name=f"sentitop-{run_id}",
        ReleaseLabel="emr-7.2.0",
        Instances={
            "MasterInstanceType": "m5.xlarge",
            "SlaveInstanceType": "m5.xlarge",
            "InstanceCount": 2,
            "KeepJobFlowAliveWhenNoSteps": True,
        },
        JobFlowRole="EMR_EC2_DefaultRole",
        ServiceRole="EMR_DefaultRole",
        Tags=[{"Key": aws.RUN_ID_TAG, "Value": run_id}],
    )["JobFlowId"]


def live_instances(ec2, run_id: str) -> set[str]:
    """Ids of the run's instances that still cost money (pending/running/stopping/stopped)."""
    return {i["InstanceId"] for i in describe_tagged(ec2, run_id)}


@pytest.fixture
def other_run(ec2, ami):
    """Another run's instance and cluster, torn down after the test."""
    other = f"other-{uuid.uuid4().hex[:10]}"
    instances, cluster = launch(ec2, ami, other, 1), start_cluster(other)
    yield other, set(instances), cluster
    from remote.teardown import teardown_run

    teardown_run(other)


@pytest.mark.slow
def test_teardown_terminates_only_the_runs_instances_and_clusters(
    ec2, ami, run_id, other_run, capsys
) -> None:
    other, other_instances, other_cluster = other_run
    running = launch(ec2, ami, run_id, 2)
    stopped = launch(ec2, ami, run_id, 1, "g4dn.xlarge")
    ec2.stop_instances(InstanceIds=stopped)
    cluster = start_cluster(run_id)
    mine = set(running + stopped)
    assert live_instances(ec2, run_id) == mine and live_clusters(run_id) == [cluster]

    # --dry-run lists everything of the run and terminates nothing
    assert main(["teardown", run_id, "--dry-run", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["dry_run"] is True and listed["region"] == REGION
    assert {i["id"] for i in listed["instances"]} == mine
    assert {i["id"]: i["state"] for i in listed["instances"]}[stopped[0]] == "stopped"
    assert [(c["id"], c["state"]) for c in listed["clusters"]] == [(cluster, "WAITING")]
    assert live_instances(ec2, run_id) == mine and live_clusters(run_id) == [cluster]

    assert main(["teardown", run_id, "--region", REGION]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sorted(out) == sorted(
        [f"terminated EMR cluster {cluster} (sentitop-{run_id}, was WAITING)"]
        + [f"terminated EC2 instance {i} (g5.xlarge, was running)" for i in running]
        + [f"terminated EC2 instance {stopped[0]} (g4dn.xlarge, was stopped)"]
    )
    assert live_instances(ec2, run_id) == set() and live_clusters(run_id) == []
    state = aws.client("emr", REGION).describe_cluster(ClusterId=cluster)["Cluster"]["Status"]
    assert state["State"] in ("TERMINATING", "TERMINATED")

    # the other run is untouched
    assert live_instances(ec2, other) == other_instances
    assert live_clusters(other) == [other_cluster]

    # a second teardown finds nothing and says so
    assert main(["teardown", run_id]) == 0
    assert capsys.readouterr().out.startswith(f"nothing of run {run_id} is running in {REGION}")


def test_teardown_json_reports_what_it_terminated(ec2, ami, run_id, capsys) -> None:
    (instance,) = launch(ec2, ami, run_id, 1)
    cluster = start_cluster(run_id)
    assert main(["teardown", run_id, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["run_id"] == run_id and report["dry_run"] is False
    assert report["instances"] == [
        {"kind": "ec2", "id": instance, "detail": "g5.xlarge", "state": "running"}
    ]
    assert [c["id"] for c in report["clusters"]] == [cluster]
    assert live_instances(ec2, run_id) == set() and live_clusters(run_id) == []


def test_teardown_without_credentials_is_one_cloud_error(
    aws_env, monkeypatch: pytest.MonkeyPatch, run_id, capsys
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    for name in ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    assert main(["teardown", run_id]) == 1
    captured = capsys.readouterr()
    first = captured.err.splitlines()[0]
    assert first.startswith("cloud error: ") and run_id in first
    assert "no AWS credentials found" in first
    assert "Traceback" not in captured.err and captured.out == ""
    # no folder of that id here: said too (it only named AWS's credentials before)
    assert f"{run_id}: no run folder with profile.yaml (tried " in first
    assert "AWS was searched for the run's tag instead and that failed" in first


def test_teardown_with_the_endpoint_unreachable_is_one_cloud_error(
    aws_env, monkeypatch: pytest.MonkeyPatch, dead_port, run_id, capsys
) -> None:
    host, port = dead_port
    monkeypatch.setenv("SENTITOP_AWS_ENDPOINT_URL", f"http://{host}:{port}")
    assert main(["teardown", run_id]) == 1
    captured = capsys.readouterr()
    first = captured.err.splitlines()[0]
    assert first.startswith("cloud error: ") and "endpoint unreachable" in first
    assert "Traceback" not in captured.err and captured.out == ""


def test_the_dashboards_teardown_of_a_recorded_run_reads_its_region_from_the_profile(
    ec2, ami, run_id, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remote.teardown import teardown_recorded_run

    run_dir = tmp_path / run_id
    run_dir.mkdir()
    (run_dir / "profile.yaml").write_text(f"name: g5\nprovider: ec2\nregion: {REGION}\n")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # the profile's region wins
    instances = set(launch(ec2, ami, run_id, 2))
    cluster = start_cluster(run_id)
    assert teardown_recorded_run(run_dir) == (
        f"terminated 2 EC2 instance(s) and 1 EMR cluster(s) of run {run_id} in {REGION}"
    )
    assert live_instances(ec2, run_id) == set() and live_clusters(run_id) == []
    assert instances and cluster
    assert teardown_recorded_run(run_dir) == f"nothing of run {run_id} is running in {REGION}"
    # a local run whose preprocessing ran on EMR is searched too
    (run_dir / "profile.yaml").write_text(
        f"name: l\nprovider: local\nregion: {REGION}\npreprocess:\n  runner: emr\n"
    )
    start_cluster(run_id)
    assert teardown_recorded_run(run_dir).startswith("terminated 0 EC2 instance(s) and 1 EMR")


def test_teardown_by_id_searches_the_region_the_runs_profile_launched_in(
    ec2, ami, run_id, tmp_path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A crashed run (profile.yaml, no summary) in the profile's region: the command looked in
    the AWS configuration's region, said 'nothing is running' and left the instance billing."""
    run_dir = tmp_path / "runs" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "profile.yaml").write_text(f"name: g5\nprovider: ec2\nregion: {REGION}\n")
    monkeypatch.setenv("SENTITOP_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    (instance,) = launch(ec2, ami, run_id, 1)
    assert main(["teardown", run_id]) == 0
    assert capsys.readouterr().out == (
        f"terminated EC2 instance {instance} (g5.xlarge, was running)\n"
    )
    assert live_instances(ec2, run_id) == set()
    # a local run whose preprocessing ran on EMR may have a cluster whatever its summary says
    (run_dir / "profile.yaml").write_text(
        f"name: l\nprovider: local\nregion: {REGION}\npreprocess:\n  runner: emr\n"
    )
    (run_dir / "summary.json").write_text(json.dumps({"status": "failed", "provider": "local"}))
    cluster = start_cluster(run_id)
    assert main(["teardown", run_id]) == 0
    assert cluster in capsys.readouterr().out and live_clusters(run_id) == []
    # --region elsewhere: "nothing is running in eu-west-1", not where the run ran
    assert main(["teardown", run_id, "--region", "eu-west-1"]) == 0
    said = capsys.readouterr().out
    assert "nothing of run" in said and f"its profile ran it in {REGION}" in said


@pytest.mark.parametrize("ref", ["", "   ", "\t", "/"])
def test_an_empty_run_id_is_a_usage_error(ref: str, tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """`sentitop teardown ''` searched AWS for a run named after the current folder."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["teardown", ref, "--dry-run"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument RUN_ID: " in err and tmp_path.name not in err
    assert "Traceback" not in err and "cloud error" not in err


def test_a_folder_that_is_no_run_is_refused_without_asking_aws(
    tmp_path, monkeypatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    """`sentitop teardown ../../etc` searched AWS for a run named "etc"; a run folder that is
    gone is still searched for by its name (the last resort), and so is a bare run id."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))  # no AWS here
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "notes" / "sub").mkdir(parents=True)
    for ref in ("notes", str(tmp_path / "notes" / "sub")):
        assert main(["teardown", ref, "--dry-run"]) == 2
        err = capsys.readouterr().err
        assert f"{ref} is a folder but no run's" in err and "cloud error" not in err
    kept = tmp_path / "runs" / "20261130-101010-local"
    (kept / "train").mkdir(parents=True)
    (kept / "events.jsonl").write_text("")
    for ref in (str(kept / "train"), str(tmp_path / "runs" / "20261130-111111-gone"), "etc"):
        assert main(["teardown", ref, "--dry-run"]) == 1  # searched AWS: no credentials here
        assert "no AWS credentials" in capsys.readouterr().err
    assert main(["teardown", "bad id!", "--dry-run"]) == 2  # no run of sentitop has that name
    err = capsys.readouterr().err
    assert "run id = 'bad id!' is not allowed" in err and "AWS" not in err


def test_a_resume_first_terminates_what_the_killed_run_left(ec2, ami, run_id, tmp_path) -> None:
    """The launcher of an EC2 run SIGKILLed: its instances kept running, and `run --resume`
    started two more beside them (four billed, no word)."""
    from remote.teardown import tear_down_leftovers

    run_dir = tmp_path / run_id
    run_dir.mkdir()
    (run_dir / "profile.yaml").write_text(f"name: g5\nprovider: ec2\nregion: {REGION}\n")
    launch(ec2, ami, run_id, 2)
    said = tear_down_leftovers(run_dir)
    assert said is not None and "had left 2 EC2 instance(s)" in said and REGION in said
    assert live_instances(ec2, run_id) == set()
    assert json.loads((run_dir / "torn_down.json").read_text())["instances"] == 2  # for `runs`
    assert tear_down_leftovers(run_dir) is None  # nothing left
    (run_dir / "profile.yaml").write_text("name: l\nprovider: local\n")
    assert tear_down_leftovers(run_dir) is None  # no cloud, no AWS call


def test_a_refused_resume_terminates_what_the_killed_run_left(
    ec2, ami, run_id, tmp_path, capsys
) -> None:  # type: ignore[no-untyped-def]
    """An EC2 run SIGKILLed before its first checkpoint: `run --resume` refused it ("nothing to
    resume from; start it again") and left its two instances running, although `sentitop runs`
    says a resume terminates them first; the hint, followed, launched two more beside them."""
    run_dir = tmp_path / run_id
    run_dir.mkdir()
    (run_dir / "profile.yaml").write_text(f"name: g5\nprovider: ec2\nregion: {REGION}\n")
    (run_dir / "events.jsonl").write_text('{"type": "stage_start", "t": 1.0, "stage": "train"}\n')
    launch(ec2, ami, run_id, 2)
    assert main(["run", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "before its first checkpoint" in err  # the refusal itself, as before
    assert f"run {run_id} had left 2 EC2 instance(s)" in err and "terminated them" in err
    assert live_instances(ec2, run_id) == set()


def test_a_refused_resume_leaves_the_machines_of_a_run_that_ended_alone(
    ec2, ami, run_id, tmp_path, capsys
) -> None:  # type: ignore[no-untyped-def]
    """A run whose launcher ended it (summary.json written) tore its machines down itself; a
    refusal to resume it asks AWS nothing (here the instances are another owner's to stop)."""
    from remote.teardown import teardown_run

    run_dir = tmp_path / run_id
    run_dir.mkdir()
    (run_dir / "profile.yaml").write_text(f"name: g5\nprovider: ec2\nregion: {REGION}\n")
    (run_dir / "summary.json").write_text('{"status": "failed", "reason": "no checkpoint"}')
    launched = set(launch(ec2, ami, run_id, 1))
    try:
        assert main(["run", "--resume", str(run_dir)]) == 2
        assert "had left" not in capsys.readouterr().err
        assert live_instances(ec2, run_id) == launched
    finally:
        teardown_run(run_id)


def test_teardown_notes_itself_in_the_run_folder(ec2, ami, run_id, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """So `sentitop runs` stops warning that the killed run's machines may still bill; a dry
    run terminates nothing and notes nothing."""
    run_dir = tmp_path / run_id
    run_dir.mkdir()
    (run_dir / "profile.yaml").write_text(f"name: g5\nprovider: ec2\nregion: {REGION}\n")
    launch(ec2, ami, run_id, 1)
    assert main(["teardown", str(run_dir), "--dry-run"]) == 0
    assert not (run_dir / "torn_down.json").exists()
    assert main(["teardown", str(run_dir)]) == 0
    assert json.loads((run_dir / "torn_down.json").read_text())["instances"] == 1
    assert live_instances(ec2, run_id) == set()

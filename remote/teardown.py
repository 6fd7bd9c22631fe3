"""Terminate what a run left in the cloud: every EC2 instance and EMR cluster tagged with its id.

Runs tear down what they start on every exit path; this is the last resort after a crash (the
`sentitop teardown RUN_ID` command and the dashboard's `t` on the Runs screen).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

EMR_INSTANCE_TAG = "aws:elasticmapreduce:job-flow-id"
"""Tag EMR puts on its nodes; they go with their cluster and are not listed on their own."""


@dataclass(frozen=True, slots=True)
class Resource:
    """One tagged, money-costing thing: an EC2 instance or an EMR cluster."""

    kind: str
    """``ec2`` or ``emr``."""
    id: str
    """Instance id (i-…) or cluster id (j-…)."""
    detail: str
    """Instance type, or the cluster's name."""
    state: str
    """State when it was found (before termination)."""

    def line(self, dry_run: bool) -> str:
        """One line for the terminal."""
        verb = "would terminate" if dry_run else "terminated"
        what = "EC2 instance" if self.kind == "ec2" else "EMR cluster"
        return f"{verb} {what} {self.id} ({self.detail}, was {self.state})"


@dataclass(slots=True)
class TeardownReport:
    """What :func:`teardown_run` found and terminated (or, with ``dry_run``, would have)."""

    run_id: str
    """The run whose tag was searched."""
    region: str
    """The region searched."""
    dry_run: bool
    """True when nothing was terminated."""
    clusters: list[Resource] = field(default_factory=list)
    """EMR clusters of the run."""
    instances: list[Resource] = field(default_factory=list)
    """EC2 instances of the run (EMR's own nodes excluded)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def teardown_run(
    run_id: str,
    *,
    region: str | None = None,
    endpoint: str | None = None,
    dry_run: bool = False,
    on_resource: Callable[[Resource], None] | None = None,
) -> TeardownReport:
    """Terminate the EMR clusters, then the EC2 instances, tagged with ``run_id`` in ``region``.

    ``on_resource`` is called for each as it is terminated (or found, with ``dry_run``), so a
    caller can show progress and a later failure still leaves a record. Raises CloudError.
    Also what the dashboard calls to tear a run down.
    """
    from remote import aws
    from remote.clusters.ec2_fleet import describe_tagged, terminate
    from remote.emr import live_clusters, terminate_clusters

    region = aws.region_of(aws.session(region), region)
    report = TeardownReport(run_id=run_id, region=region, dry_run=dry_run)
    note = on_resource or (lambda resource: None)

    emr = aws.client("emr", region, endpoint=endpoint)
    found = {cid: _cluster(emr, cid) for cid in live_clusters(emr, run_id)}
    ids = found.keys() if dry_run else terminate_clusters(run_id, emr=emr)
    for cid in ids:
        resource = found.get(cid) or _cluster(emr, cid)
        report.clusters.append(resource)
        note(resource)

    ec2 = aws.client("ec2", region, endpoint=endpoint)
    cluster_ids = {c.id for c in report.clusters}
    instances = [
        Resource(
            kind="ec2",
            id=inst["InstanceId"],
            detail=inst.get("InstanceType", "?"),
            state=inst["State"]["Name"],
        )
        for inst in describe_tagged(ec2, run_id)
        if _tag(inst, EMR_INSTANCE_TAG) not in cluster_ids
    ]
    if not dry_run:
        terminate(ec2, [i.id for i in instances])
    for resource in instances:
        report.instances.append(resource)
        note(resource)
    return report


def _tag(raw: dict[str, Any], key: str) -> str | None:
    return next((t["Value"] for t in raw.get("Tags", []) if t["Key"] == key), None)


def _cluster(emr: Any, cluster_id: str) -> Resource:
    from remote import aws

    with aws.cloud_errors(f"describe EMR cluster {cluster_id}"):
        raw = emr.describe_cluster(ClusterId=cluster_id)["Cluster"]
    return Resource(
        kind="emr", id=cluster_id, detail=raw.get("Name", "?"), state=raw["Status"]["State"]
    )


def cloud_region(run_dir: Path) -> tuple[bool, str | None, str]:
    """(may have cloud resources, region, provider) from RUN_DIR/profile.yaml.

    EC2 nodes or an EMR preprocess step mean cloud resources; with no readable profile the
    run is searched for anyway (region None: the AWS configuration's).
    """
    try:
        profile: Any = yaml.safe_load((run_dir / "profile.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return True, None, "unknown"
    if not isinstance(profile, dict):
        return True, None, "unknown"
    provider = str(profile.get("provider") or "unknown")
    preprocess = profile.get("preprocess")
    emr = isinstance(preprocess, dict) and preprocess.get("runner") == "emr"
    region = profile.get("region")
    return provider == "ec2" or emr, str(region) if region else None, provider


TORN_DOWN_FILE = "torn_down.json"
"""Written into a run folder once what the run left in the cloud was terminated (teardown, or
the resume that did it): `sentitop runs` stops warning that its machines may still bill."""


def record_teardown(run_dir: Path, report: TeardownReport) -> None:
    """Note in ``run_dir`` that its cloud resources were looked for and terminated (a folder
    that cannot be written keeps the warning: no harm but a repeated hint)."""
    import contextlib
    import json
    import time

    record = {"t": time.time(), "region": report.region, "instances": len(report.instances),
              "clusters": len(report.clusters)}  # fmt: skip
    with contextlib.suppress(OSError):
        (run_dir / TORN_DOWN_FILE).write_text(json.dumps(record) + "\n", encoding="utf-8")


def torn_down(run_dir: Path) -> bool:
    """Whether what ``run_dir`` left in the cloud was terminated since (record_teardown)."""
    return (run_dir / TORN_DOWN_FILE).is_file()


def tear_down_leftovers(
    run_dir: Path,
    then: str = "terminated before this run starts its own",
    where: str = ", resumed here,",
) -> str | None:
    """Before ``run_dir`` is resumed: terminate what it left tagged in the cloud (its launcher
    was killed, so nothing tore its nodes down, and a resume started new ones beside them);
    what went, or None when nothing was left (or it used no cloud machines)."""
    cloud, region, _ = cloud_region(run_dir)
    if not cloud:
        return None
    report = teardown_run(run_dir.name, region=region)
    record_teardown(run_dir, report)
    if not (report.instances or report.clusters):
        return None
    return (
        f"run {run_dir.name}{where} had left {len(report.instances)} EC2 instance(s) "
        f"and {len(report.clusters)} EMR cluster(s) running in {report.region} (its launcher "
        f"was killed); {then}"
    )


def tear_down_refused(run_dir: Path) -> str | None:
    """A resume of ``run_dir`` was refused (no checkpoint, diverged, ...): when its launcher was
    killed on cloud machines, nothing else will ever stop them, and the refusal's hint (start it
    again) would launch more beside them; terminate them too. What went, why it could not be
    checked, or None (nothing left, no cloud, or a launcher still running that owns them)."""
    from engine.errors import SentitopError
    from engine.events import has_live_writer
    from remote.run_folder import EVENTS_FILE

    if has_live_writer(run_dir / EVENTS_FILE):
        return None
    try:
        return tear_down_leftovers(run_dir, "terminated them", "")
    except SentitopError as exc:  # no credentials, no network: say what to run
        return (
            f"could not check whether run {run_dir.name} left cloud machines running "
            f"({exc.message}); `sentitop teardown {run_dir.name}` terminates what it left"
        )


def no_cloud(run_dir: Path) -> str | None:
    """Why there is nothing to tear down for a run that used no cloud machines (else None)."""
    cloud, _, provider = cloud_region(run_dir)
    if cloud:
        return None
    return f"run {run_dir.name} used no cloud machines (provider {provider}): nothing to tear down"


def teardown_recorded_run(run_dir: Path) -> str:
    """Terminate the EC2 instances and EMR clusters still tagged with the run; say what went.

    Raises :class:`engine.errors.CloudError` when AWS cannot be asked (no credentials, no
    network): the dashboard shows it in its error dialog.
    """
    run_id = run_dir.name
    said = no_cloud(run_dir)
    if said is not None:
        return said
    report = teardown_run(run_id, region=cloud_region(run_dir)[1])
    if not (report.instances or report.clusters):
        return f"nothing of run {run_id} is running in {report.region}"
    return (
        f"terminated {len(report.instances)} EC2 instance(s) and {len(report.clusters)} "
        f"EMR cluster(s) of run {run_id} in {report.region}"
    )

"""`sentitop teardown RUN_ID`: terminate every EC2 instance and EMR cluster tagged with a run id."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

DESCRIPTION = """\
Terminate every EC2 instance (pending, running, stopping or stopped) and every EMR cluster
(starting, bootstrapping, running or waiting) tagged sentitop:run-id=RUN_ID, and say what was
terminated. A last resort after a crash: runs already tear down what they start on every exit
path. Looks in one region: --region, else the AWS configuration's region (us-east-1 if none);
another run's machines are never touched. Credentials come from the standard AWS chain."""

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


def register(subparsers: Any) -> None:
    """Add the `teardown` subcommand."""
    parser = subparsers.add_parser(
        "teardown",
        help="terminate every EC2 instance and EMR cluster of a run",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_id", metavar="RUN_ID", help="run id (the run folder's name)")
    parser.add_argument(
        "--region", default=None, help="AWS region (default: the AWS configuration's)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list what would be terminated; terminate nothing"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Tear the run down and print what was terminated (exit 0, also when nothing was found)."""
    show = None if args.json else (lambda r: print(r.line(args.dry_run), flush=True))
    report = teardown_run(args.run_id, region=args.region, dry_run=args.dry_run, on_resource=show)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    elif not (report.clusters or report.instances):
        print(
            f"nothing of run {args.run_id} is running in {report.region} "
            "(no EC2 instance or EMR cluster with its tag)"
        )
    return 0

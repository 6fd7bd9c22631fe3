"""Plays the part of EMR's nodes for moto, whose steps never run on their own.

moto's server keeps its state in this process, so a thread can advance the steps of the
clusters a run tagged: PENDING → RUNNING → COMPLETED. For the step that writes to S3 it first
runs the job's own script with the step's own arguments (mrjob's inline runner, in a
subprocess, over the same input files) and uploads the output where the step would have.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moto.core import DEFAULT_ACCOUNT_ID
from moto.emr.models import emr_backends

from remote import aws

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class Seen:
    """What the cluster looked like while its first step ran."""

    cluster: dict[str, Any] = field(default_factory=dict)
    instance_groups: list[dict[str, Any]] = field(default_factory=list)
    bootstrap_actions: list[dict[str, Any]] = field(default_factory=list)
    bootstrap_script: str = ""
    step_args: list[list[str]] = field(default_factory=list)


class FakeEMR:
    """Background thread advancing the steps of clusters tagged with ``run_id``."""

    def __init__(self, run_id: str, region: str, *, mode: str = "run", every_s: float = 0.1):
        self.run_id, self.region, self.mode, self.every_s = run_id, region, mode, every_s
        self.seen = Seen()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> FakeEMR:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _clusters(self) -> list[Any]:
        backend = emr_backends[DEFAULT_ACCOUNT_ID][self.region]
        tag = {"Key": aws.RUN_ID_TAG, "Value": self.run_id}
        return [c for c in list(backend.clusters.values()) if tag in c.tags]

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.every_s):
                for cluster in self._clusters():
                    if cluster.state not in ("TERMINATING", "TERMINATED"):
                        self._advance(cluster)
        except BaseException as exc:  # surfaced by the test through .error
            self.error = exc

    def _advance(self, cluster: Any) -> None:
        for step in cluster.steps:
            if step.state == "COMPLETED":
                continue
            if step.state == "PENDING":
                step.state = "RUNNING"
            elif step.state == "RUNNING" and self.mode != "hang":
                if not self.seen.cluster:
                    self._look(cluster.id)
                self.seen.step_args.append(list(step.args))
                if self.mode == "fail":
                    step.state = "FAILED"
                    return
                self._run_step(list(step.args))
                step.state = "COMPLETED"
            return

    def _look(self, cluster_id: str) -> None:
        emr = aws.client("emr", self.region)
        s3 = aws.client("s3", self.region)
        self.seen.cluster = emr.describe_cluster(ClusterId=cluster_id)["Cluster"]
        self.seen.instance_groups = emr.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"]
        actions = emr.list_bootstrap_actions(ClusterId=cluster_id)["BootstrapActions"]
        self.seen.bootstrap_actions = actions
        for action in actions:
            bucket, _, key = action["ScriptPath"].removeprefix("s3://").partition("/")
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
            self.seen.bootstrap_script += body

    def _run_step(self, args: list[str]) -> None:
        output = args[args.index("-output") + 1]
        if not output.startswith("s3://"):
            return  # an intermediate step writing to HDFS: its work is redone by the last one
        mapper = shlex.split(args[args.index("-mapper") + 1])
        settings = mapper[mapper.index("--settings") + 1]
        inputs = __import__("json").loads(settings)["inputs"]
        job = subprocess.run(
            [sys.executable, "-m", "engine.preprocess.run_mrjob", "-r", "inline",
             "--no-conf", "--settings", settings, *inputs],
            cwd=ROOT, capture_output=True, check=True,
        )  # fmt: skip
        bucket, _, prefix = output.removeprefix("s3://").partition("/")
        s3 = aws.client("s3", self.region)
        s3.put_object(Bucket=bucket, Key=prefix.rstrip("/") + "/part-00000", Body=job.stdout)
        s3.put_object(Bucket=bucket, Key=prefix.rstrip("/") + "/_SUCCESS", Body=b"")

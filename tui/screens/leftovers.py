"""Tear down what a recorded run may have left in the cloud (the Runs screen's `t`).

Runs terminate what they start on every exit path; this is the last resort after a crash of
the dashboard or the machine it ran on, the dashboard's form of `sentitop teardown RUN_ID`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


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


def teardown_recorded_run(run_dir: Path) -> str:
    """Terminate the EC2 instances and EMR clusters still tagged with the run; say what went.

    Raises :class:`engine.errors.CloudError` when AWS cannot be asked (no credentials, no
    network): the dashboard shows it in its error dialog.
    """
    from tui.commands.teardown import teardown_run

    run_id = run_dir.name
    cloud, region, provider = cloud_region(run_dir)
    if not cloud:
        return f"run {run_id} used no cloud machines (provider {provider}): nothing to tear down"
    report = teardown_run(run_id, region=region)
    if not (report.instances or report.clusters):
        return f"nothing of run {run_id} is running in {report.region}"
    return (
        f"terminated {len(report.instances)} EC2 instance(s) and {len(report.clusters)} "
        f"EMR cluster(s) of run {run_id} in {report.region}"
    )

"""EMR preprocessing through mrjob's EMR runner: tagged cluster, progress, parts, teardown.

One call runs the preprocessing MRJob on a fresh EMR cluster (instance groups, spot bid,
release label, a bootstrap that installs the project), streams step progress as events,
downloads the job's HDF5 parts from S3 and combines them into the local dataset folder. The
cluster is tagged ``sentitop:run-id`` at creation and terminated on every exit path: mrjob's
own cleanup, then a sweep of every cluster carrying the tag (also after SIGINT, exceptions and
asyncio cancellation).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import PreprocessConfig
from engine.errors import CloudError, ConfigError
from engine.events import Emitter
from remote import aws
from remote.teardown_await import finish_despite_cancel

log = logging.getLogger(__name__)

LIVE_CLUSTER_STATES = ("STARTING", "BOOTSTRAPPING", "RUNNING", "WAITING")
"""EMR cluster states that cost money."""

NODE_REQUIREMENTS = ("numpy>=1.26", "h5py>=3.10", "orjson>=3.9", "nltk>=3.8")
"""Third-party packages the preprocessing job needs on the EMR nodes (mrjob bootstraps itself)."""

CHECK_EVERY_ENV = "SENTITOP_EMR_CHECK_EVERY_S"
"""Environment variable overriding the seconds between EMR step polls (default 30)."""

PROJECT_ROOT = Path(__file__).resolve().parents[1]
"""Source tree the node bootstrap installs (built into a wheel)."""


@dataclass(kw_only=True, slots=True)
class EMRSettings:
    """Where and how the EMR preprocessing cluster runs (from the profile's ``preprocess``)."""

    s3: str
    """Writable s3://bucket/prefix; the run keeps inputs, temp files and parts under it."""
    region: str | None = None
    """AWS region; None = the AWS configuration's region (resolved on creation, so mrjob, the
    teardown sweep and `sentitop teardown` all look in the same one)."""
    master_instance_type: str = "m5.xlarge"
    """Instance type of the master node."""
    core_instance_type: str = "m5.xlarge"
    """Instance type of the core (worker) nodes."""
    core_count: int = 2
    """Number of core nodes."""
    spot: bool = False
    """Run the core nodes on spot capacity (implied by ``spot_bid``)."""
    spot_bid: float | None = None
    """Highest spot price in USD/hour for a core node; None = up to the on-demand price."""
    release_label: str = "emr-7.2.0"
    """EMR release (7.x runs Amazon Linux 2023, where python3.11 is a package)."""
    python: str = "python3.11"
    """Interpreter on the nodes (the project needs Python >= 3.11)."""
    bootstrap: list[str] = field(default_factory=list)
    """Extra shell commands run on every node after the project is installed."""
    applications: list[str] = field(default_factory=lambda: ["Hadoop"])
    """EMR applications to install."""
    key_name: str | None = None
    """EC2 key pair for SSH to the master (lets mrjob show map/reduce percentages)."""
    subnet: str | None = None
    """Subnet id; None = the default VPC."""
    check_every_s: float = field(
        default_factory=lambda: float(os.environ.get(CHECK_EVERY_ENV) or 30.0)
    )
    """Seconds between step status polls (default 30, or $SENTITOP_EMR_CHECK_EVERY_S)."""
    read_logs: bool = True
    """Let mrjob read the cluster's logs to explain a failed step."""
    endpoint: str | None = None
    """Endpoint URL override for every service (a moto server in tests)."""
    install_project: bool = False
    """Also pip-install a wheel of this source tree on the nodes (the job already ships the
    ``engine`` package with ``--py-files``; this makes ``python -m engine…`` work there too)."""

    def __post_init__(self) -> None:
        if self.region is None:
            self.region = aws.region_of(aws.session())
        if not re.fullmatch(r"s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?", self.s3):
            raise ConfigError(
                f"preprocess.emr.s3 = {self.s3!r} is not allowed; expected "
                "s3://bucket/prefix in a bucket you can write"
            )
        if self.core_count < 1:
            raise ConfigError(f"preprocess.emr.core_count = {self.core_count}; expected >= 1")
        if self.spot_bid is not None and self.spot_bid <= 0:
            raise ConfigError(f"preprocess.emr.spot_bid = {self.spot_bid}; expected > 0 or null")
        if self.check_every_s <= 0:
            raise ConfigError(f"preprocess.emr.check_every_s = {self.check_every_s}; expected > 0")

    @property
    def prefix(self) -> str:
        """``s3`` without a trailing slash."""
        return self.s3.rstrip("/")

    def instance_groups(self) -> list[dict[str, Any]]:
        """EMR ``InstanceGroups``: an on-demand master, core nodes on spot when bid."""
        core: dict[str, Any] = {
            "Name": "core",
            "InstanceRole": "CORE",
            "InstanceType": self.core_instance_type,
            "InstanceCount": self.core_count,
            "Market": "ON_DEMAND",
        }
        if self.spot or self.spot_bid is not None:
            core["Market"] = "SPOT"
        if self.spot_bid is not None:
            core["BidPrice"] = f"{self.spot_bid:.3f}"
        master = {
            "Name": "master",
            "InstanceRole": "MASTER",
            "InstanceType": self.master_instance_type,
            "InstanceCount": 1,
            "Market": "ON_DEMAND",
        }
        return [master, core]


def bootstrap_commands(settings: EMRSettings, wheel: Path | None) -> list[str]:
    """Shell commands every node runs: Python, the project wheel, its preprocessing deps.

    ``path#`` is mrjob's syntax for "upload this file and use its path on the node".
    """
    py = shlex.quote(settings.python)  # a profile value: quoted for the node's shell
    pkgs = " ".join(shlex.quote(p) for p in (Path(settings.python).name,
                                              f"{Path(settings.python).name}-pip"))  # fmt: skip
    cmds = [f"sudo dnf install -y {pkgs} || sudo yum install -y {pkgs}"]
    reqs = " ".join(shlex.quote(r) for r in NODE_REQUIREMENTS)
    cmds.append(f"sudo {py} -m pip install --quiet {reqs}")
    if wheel is not None:
        cmds.append(f"sudo {py} -m pip install --quiet --no-deps {wheel}#")
    return cmds + list(settings.bootstrap)


def mrjob_switches(
    settings: EMRSettings,
    *,
    run_id: str,
    wheel: Path | None = None,
    output_dir: str | None = None,
) -> list[str]:
    """mrjob switches that configure the EMR runner (the caller adds ``-r emr``).

    Without ``output_dir`` the job's output stays in the run's temporary S3 folder, which is
    read before mrjob's cleanup removes it.
    """
    endpoint = aws.endpoint_url(settings.endpoint)
    tag = [{"Key": aws.RUN_ID_TAG, "Value": run_id}]
    args = [
        "--cloud-tmp-dir", f"{settings.prefix}/{run_id}/tmp/",
        "--release-label", settings.release_label,
        "--instance-groups", json.dumps(settings.instance_groups()),
        "--python-bin", settings.python,
        "--check-cluster-every", str(settings.check_every_s),
        "--tag", f"{aws.RUN_ID_TAG}={run_id}",
        # tag at creation too, so a cluster is findable even if we stop right after run_job_flow
        "--extra-cluster-param", f"Tags={json.dumps(tag)}",
        "--no-pool-clusters",
        "--cleanup", "ALL",
        "--cleanup-on-failure", "ALL",
    ]  # fmt: skip
    if output_dir:
        args += ["--output-dir", output_dir]
    if settings.region:
        args += ["--region", settings.region]
    for app in settings.applications:
        args += ["--application", app]
    for cmd in bootstrap_commands(settings, wheel):
        args += ["--bootstrap", cmd]
    if settings.key_name:
        args += ["--ec2-key-pair", settings.key_name]
    if settings.subnet:
        args += ["--subnet", settings.subnet]
    if not settings.read_logs:
        args.append("--no-read-logs")
    if endpoint:
        for service in ("emr", "s3", "ec2", "iam"):
            args += [f"--{service}-endpoint", endpoint]
        args += ["--cloud-fs-sync-secs", "0"]
    return args


def live_clusters(emr: Any, run_id: str) -> list[str]:
    """Ids of clusters tagged with ``run_id`` that are not terminated or terminating."""
    found = []
    with aws.cloud_errors(f"list the EMR clusters of run {run_id}"):
        for page in emr.get_paginator("list_clusters").paginate(
            ClusterStates=list(LIVE_CLUSTER_STATES)
        ):
            for summary in page["Clusters"]:
                tags = emr.describe_cluster(ClusterId=summary["Id"])["Cluster"].get("Tags", [])
                if {"Key": aws.RUN_ID_TAG, "Value": run_id} in tags:
                    found.append(summary["Id"])
    return found


def terminate_clusters(
    run_id: str, *, region: str | None = None, endpoint: str | None = None, emr: Any = None
) -> list[str]:
    """Terminate every live EMR cluster tagged with ``run_id``; their ids."""
    emr = emr or aws.client("emr", region, endpoint=endpoint)
    ids = live_clusters(emr, run_id)
    if ids:
        log.warning("terminating EMR cluster(s) of run %s: %s", run_id, ", ".join(ids))
        with aws.cloud_errors(f"terminate EMR clusters {', '.join(ids)}"):
            emr.set_termination_protection(JobFlowIds=ids, TerminationProtected=False)
            emr.terminate_job_flows(JobFlowIds=ids)
    return ids


class EMRCancelled(BaseException):
    """Raised inside mrjob's polling thread to stop it after the run was cancelled."""


_STEP_RE = re.compile(r"Waiting for Step (\d+) of (\d+) \((s-[A-Z0-9]+)\)")
_STATE_RE = re.compile(r"^\s+(PENDING|RUNNING|COMPLETED|FAILED|CANCELLED|INTERRUPTED)\b(.*)")
_CLUSTER_RE = re.compile(r"Created new cluster (j-[A-Z0-9]+)")
_PCT_RE = re.compile(r"map\s+(\d+)%\s+reduce\s+(\d+)%")


class ProgressHandler(logging.Handler):
    """Turns mrjob's log lines into ``progress``/``node`` events and forwarded log lines."""

    def __init__(
        self,
        emitter: Emitter,
        on_line: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        super().__init__(logging.INFO)
        self.emitter = emitter
        self.on_line = on_line
        self.cancel = cancel
        self.cluster_id: str | None = None
        self.step = (0, 0)
        self.started = time.monotonic()
        self.cancelled = False
        self._last: tuple[float, str] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        """Forward the line (credentials masked) and emit events it implies."""
        if self.cancel is not None and self.cancel.is_set() and not self.cancelled:
            self.cancelled = True  # once: mrjob's own cleanup logs too and must run
            raise EMRCancelled
        line = aws.redact(record.getMessage())
        if self.on_line is not None:
            self.on_line(line)
        if m := _CLUSTER_RE.search(line):
            self.cluster_id = m.group(1)
            self.emitter.emit(
                "node",
                node=f"emr:{self.cluster_id}",
                status="starting",
                detail="EMR cluster created",
            )
        elif m := _STEP_RE.search(line):
            self.step = (int(m.group(1)), int(m.group(2)))
            self._progress(self.step[0] - 1, f"step {self.step[0]} of {self.step[1]}: waiting")
        elif m := _STATE_RE.match(line):
            state = m.group(1)
            done = self.step[0] if state == "COMPLETED" else self.step[0] - 1
            self._progress(done, f"step {self.step[0]} of {self.step[1]}: {state}{m.group(2)}")
        elif (m := _PCT_RE.search(line)) and self.step[1]:
            frac = (int(m.group(1)) + int(m.group(2))) / 200
            self._progress(self.step[0] - 1 + frac, f"step {self.step[0]}: {line.strip()}")

    def _progress(self, done: float, detail: str) -> None:
        if self._last == (done, detail):
            return  # a status poll that changed nothing
        self._last = (done, detail)
        elapsed = time.monotonic() - self.started
        self.emitter.emit(
            "progress",
            stage="preprocess",
            done=done,
            total=self.step[1],
            unit="steps",
            rate=done / elapsed if elapsed > 0 else 0.0,
            detail=detail,
            cluster=self.cluster_id,
        )


@contextlib.contextmanager
def _mrjob_logging(handler: logging.Handler) -> Iterator[None]:
    logger = logging.getLogger("mrjob")
    old_level = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """While tearing down in the main thread, a further Ctrl-C only says to wait."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _say_wait(signum: int, frame: Any) -> None:
        print("sentitop: still terminating EMR clusters, please wait", file=sys.stderr)

    previous = signal.signal(signal.SIGINT, _say_wait)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def build_wheel(dest: Path, source: Path = PROJECT_ROOT) -> Path:
    """Build this project's wheel (no dependencies) into ``dest``; its path."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--quiet",
        "-w",
        str(dest),
        str(source),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(dest.glob("sentitop-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise CloudError(
            f"could not build the project wheel for the EMR bootstrap from {source}: "
            f"{proc.stderr.strip()[-500:]}",
            hint="run `pip wheel --no-deps .` in the project to see the error",
        )
    return wheels[-1]


def settings_from_profile(profile: Any, **overrides: Any) -> EMRSettings:
    """EMRSettings from a profile's ``preprocess.emr`` section and region."""
    spec = profile.preprocess.emr
    if spec is None or getattr(spec, "s3", None) is None:
        raise ConfigError(
            "preprocess.runner is emr but preprocess.emr.s3 is not set",
            hint="add preprocess: {emr: {s3: s3://your-bucket/sentitop}} to the profile",
        )
    kwargs = dict(spec.settings_kwargs(profile.region))
    kwargs.setdefault("spot", bool(getattr(spec, "spot", False)))
    kwargs.update(overrides)
    return EMRSettings(**kwargs)


def _log_writer(run_dir: Path | None) -> tuple[Callable[[str], None] | None, Callable[[], None]]:
    """A line writer to ``RUN_DIR/logs/emr.log`` (user-only) and its closer."""
    if run_dir is None:
        return None, lambda: None
    path = Path(run_dir) / "logs" / "emr.log"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    fh = os.fdopen(fd, "a", encoding="utf-8", buffering=1)
    lock = threading.Lock()

    def write(line: str) -> None:
        with lock:
            if not fh.closed:
                fh.write(line.rstrip("\n") + "\n")

    def close() -> None:
        with lock:
            fh.close()

    return write, close


def preprocess_on_emr(
    cfg: PreprocessConfig,
    settings: EMRSettings,
    *,
    run_id: str,
    emitter: Emitter | None = None,
    run_dir: str | Path | None = None,
    cancel: threading.Event | None = None,
    mrjob_args: Sequence[str] = (),
    rating_max: int | None = None,
    negative_max: int | None = None,
) -> dict[str, Any]:
    """Preprocess on a fresh EMR cluster (blocking); the stats written to stats.json.

    The engine's pipeline runs the MRJob through mrjob's EMR runner and encodes and combines
    its output into ``cfg.output``. Every EMR cluster tagged with ``run_id`` is terminated
    before this returns or raises, KeyboardInterrupt included.
    """
    from mrjob.step import StepFailedException

    from engine.preprocess.pipeline import run_preprocess

    if cfg.runner != "emr":
        cfg = dataclasses.replace(cfg, runner="emr")
    # before any cluster can exist: without credentials mrjob failed on a cluster id of None
    # and the teardown's own "could not list the clusters" buried that cause
    aws.require_credentials("start an EMR cluster", settings.region)
    emitter = emitter or Emitter()
    on_line, close_log = _log_writer(Path(run_dir) if run_dir is not None else None)
    handler = ProgressHandler(emitter, on_line, cancel)
    failure: BaseException | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="sentitop-emr-") as tmp:
            wheel = build_wheel(Path(tmp)) if settings.install_project else None
            args = [*mrjob_switches(settings, run_id=run_id, wheel=wheel), *mrjob_args]
            with _mrjob_logging(handler):
                try:
                    return run_preprocess(
                        cfg,
                        emitter,
                        mrjob_args=args,
                        rating_max=rating_max,
                        negative_max=negative_max,
                    )
                except StepFailedException as exc:
                    raise CloudError(
                        f"EMR cluster {handler.cluster_id or '?'}: {exc}",
                        hint="the step's logs are in the cluster's S3 log folder; set "
                        "read_logs to let mrjob summarise the cause",
                    ) from exc
    except BaseException as exc:
        failure = exc
        raise
    finally:
        try:
            with _sigint_deferred():
                _teardown(run_id, settings, emitter, handler.cluster_id, failure)
        finally:
            close_log()


def _teardown(
    run_id: str,
    settings: EMRSettings,
    emitter: Emitter,
    known: str | None,
    failure: BaseException | None,
) -> None:
    try:
        swept = terminate_clusters(run_id, region=settings.region, endpoint=settings.endpoint)
    except CloudError as exc:
        during = f" (after: {failure})" if failure is not None else ""
        raise CloudError(
            f"could not terminate the EMR cluster(s) of run {run_id}: {exc.message}{during}",
            hint=f"terminate clusters tagged {aws.RUN_ID_TAG}={run_id} in the EMR console",
        ) from exc
    for cluster_id in dict.fromkeys([*([known] if known else []), *swept]):
        emitter.emit("node", node=f"emr:{cluster_id}", status="terminated", detail="terminated")


async def run_emr_preprocess(
    profile: Any,
    cfg: PreprocessConfig,
    *,
    run_dir: str | Path,
    emitter: Emitter | None = None,
    settings: EMRSettings | None = None,
    mrjob_args: Sequence[str] = (),
) -> dict[str, Any]:
    """Async :func:`preprocess_on_emr` for the run's profile; the run id is the folder name.

    On cancellation (Ctrl-C) the run's clusters are terminated at once, then the mrjob thread
    is stopped at its next status poll; the cancellation is re-raised after both.
    """
    settings = settings or settings_from_profile(profile)
    run_id = Path(run_dir).name
    cancel = threading.Event()
    work = asyncio.ensure_future(
        asyncio.to_thread(
            preprocess_on_emr, cfg, settings, run_id=run_id, emitter=emitter,
            run_dir=run_dir, cancel=cancel, mrjob_args=mrjob_args,
        )
    )  # fmt: skip
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        cancel.set()
        sweep = asyncio.to_thread(
            terminate_clusters, run_id, region=settings.region, endpoint=settings.endpoint
        )
        await finish_despite_cancel(sweep, "terminating EMR clusters")
        # the thread ends at mrjob's next poll (EMRCancelled) and sweeps once more
        stopped = asyncio.wait({work}, timeout=settings.check_every_s + 60)
        await finish_despite_cancel(stopped, "terminating EMR clusters")
        if work.done() and not work.cancelled():
            error = work.exception()  # retrieved here: the cancellation is what we report
            if error is not None and not isinstance(error, EMRCancelled):
                log.warning("EMR preprocessing ended with %r after the cancellation", error)
        raise

"""The run's EC2 instances: tagged on-demand/spot launch, wait for running and SSH, terminate.

Every instance is created with the tag ``sentitop:run-id = <run id>`` in the same API call that
creates it, so a run's machines can always be found again: :func:`sweep_orphans` terminates
whatever carries the tag, and the cluster's teardown runs it on every exit path (normal exit,
exceptions, task cancellation and SIGINT, which ``asyncio.run`` turns into cancellation), also
for an in-flight ``run_instances`` call that returns after the cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.errors import CloudError, LaunchError
from engine.events import Emitter
from remote import aws
from remote.teardown_await import finish_despite_cancel

log = logging.getLogger(__name__)


LIVE_STATES = ("pending", "running", "stopping", "stopped")
"""Instance states that still cost money (or will once started) and must be terminated."""
READY_TIMEOUT_S = 900.0
"""Default longest wait from launch until every instance runs and answers SSH (a profile's
``ready_timeout`` overrides it)."""
SSH_CHECKS = (
    "check that the security group lets this machine reach TCP port 22 (and the subnet gives "
    "the instance a public IP), that the AMI starts sshd, and the instance's console output "
    "(aws ec2 get-console-output --instance-id ID); once it answers, login needs the key pair "
    "of key_name (nodes[].key) and the AMI's user (nodes[].user: ubuntu for Ubuntu and Deep "
    "Learning AMIs, ec2-user for Amazon Linux); a slow AMI may need a longer ready_timeout"
)
"""What to check when instances never answer SSH (the hint of that error)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceGroupSpec:
    """One group of identical instances of a profile (an ``ec2`` node entry)."""

    instance_type: str
    """EC2 instance type, e.g. g5.xlarge."""
    ami: str
    """Image id (ami-…) with Python and the project's dependencies."""
    count: int = 1
    """Number of instances in the group."""
    spot: bool = False
    """Ask for spot capacity (one-time, terminated on interruption) instead of on-demand."""
    spot_max_price: float | None = None
    """Highest spot price in USD/hour; None = up to the on-demand price."""
    key_name: str | None = None
    """EC2 key pair name whose private key the SSH user holds."""
    subnet: str | None = None
    """Subnet id (subnet-…); None = the default VPC's default subnet."""
    security_group: str | None = None
    """Security group id (sg-…) that must allow SSH from here and all traffic in the group."""
    name: str | None = None
    """Label prefix of the group's node names (default: the instance type)."""

    def __post_init__(self) -> None:
        if self.count < 1:
            raise CloudError(f"nodes[].count = {self.count} is not allowed; expected >= 1")
        if self.spot_max_price is not None and self.spot_max_price <= 0:
            raise CloudError(
                f"nodes[].spot = {self.spot_max_price} is not allowed; expected true, false "
                "or a maximum price in USD/hour > 0"
            )

    @classmethod
    def from_node(cls, node: Any, *, ami: str | None = None) -> InstanceGroupSpec:
        """Read a profile ec2 node (instance_type, count, spot, spot_max_usd, ami, …)."""
        spot = getattr(node, "spot", False)
        max_price = getattr(node, "spot_max_usd", None)
        if isinstance(spot, int | float) and not isinstance(spot, bool):
            spot, max_price = True, float(spot)
        return cls(
            instance_type=node.instance_type,
            ami=ami or node.ami,
            count=int(getattr(node, "count", 1) or 1),
            spot=bool(spot),
            spot_max_price=max_price,
            key_name=getattr(node, "key_name", None),
            subnet=getattr(node, "subnet", None),
            security_group=getattr(node, "security_group", None),
            name=getattr(node, "name", None),
        )


@dataclass(frozen=True, slots=True)
class LaunchedInstance:
    """An instance of the run that reached ``running``."""

    id: str
    """Instance id (i-…)."""
    instance_type: str
    """EC2 instance type."""
    host: str
    """Address SSH uses: the public IP, or the private IP inside a VPC without one."""
    private_ip: str | None
    """Private IP (used for rendezvous between nodes)."""
    spot: bool
    """Whether it runs on spot capacity."""
    group: int
    """Index of its group in the profile's node list."""
    launched_at: float = field(default_factory=time.time)
    """Unix time EC2 reports it was launched (billing starts about here)."""
    zone: str | None = None
    """Availability zone it runs in (spot prices differ by zone)."""


def run_tags(run_id: str, group: int) -> list[dict[str, str]]:
    """Tags put on the instances and volumes of ``group`` of run ``run_id``."""
    return [
        {"Key": aws.RUN_ID_TAG, "Value": run_id},
        {"Key": "Name", "Value": f"sentitop-{run_id}-g{group}"},
    ]


def launch_params(spec: InstanceGroupSpec, run_id: str, group: int, token: str) -> dict[str, Any]:
    """Keyword arguments of ``ec2.run_instances`` for one group (all or nothing, tagged)."""
    tags = run_tags(run_id, group)
    params: dict[str, Any] = {
        "ImageId": spec.ami,
        "InstanceType": spec.instance_type,
        "MinCount": spec.count,
        "MaxCount": spec.count,
        "ClientToken": f"{run_id[:40]}-g{group}-{token}"[:64],
        "InstanceInitiatedShutdownBehavior": "terminate",
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tags},
            {"ResourceType": "volume", "Tags": tags},
        ],
    }
    if spec.key_name:
        params["KeyName"] = spec.key_name
    if spec.subnet:
        params["SubnetId"] = spec.subnet
    if spec.security_group:
        params["SecurityGroupIds"] = [spec.security_group]
    if spec.spot:
        options: dict[str, Any] = {
            "SpotInstanceType": "one-time",
            "InstanceInterruptionBehavior": "terminate",
        }
        if spec.spot_max_price is not None:
            options["MaxPrice"] = f"{spec.spot_max_price:.4f}"
        params["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": options}
    return params


def describe_tagged(
    ec2: Any, run_id: str, states: Iterable[str] = LIVE_STATES
) -> list[dict[str, Any]]:
    """Instances tagged with ``run_id`` in one of ``states`` (raw describe_instances dicts)."""
    filters = [
        {"Name": f"tag:{aws.RUN_ID_TAG}", "Values": [run_id]},
        {"Name": "instance-state-name", "Values": list(states)},
    ]
    found: list[dict[str, Any]] = []
    with aws.cloud_errors(f"list the instances of run {run_id}"):
        for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page["Reservations"]:
                found.extend(reservation["Instances"])
    return found


def terminate(ec2: Any, ids: Sequence[str]) -> None:
    """Terminate ``ids`` (in chunks of 500, the API's limit); a no-op for an empty list."""
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        with aws.cloud_errors(f"terminate instances {', '.join(chunk)}"):
            ec2.terminate_instances(InstanceIds=chunk)


def sweep_orphans(
    run_id: str,
    *,
    region: str | None = None,
    endpoint: str | None = None,
    ec2: Any = None,
) -> list[str]:
    """Terminate every instance tagged with ``run_id`` that is not yet terminated; their ids."""
    ec2 = ec2 or aws.client("ec2", region, endpoint=endpoint)
    ids = [inst["InstanceId"] for inst in describe_tagged(ec2, run_id)]
    if ids:
        log.warning("terminating %d instance(s) of run %s: %s", len(ids), run_id, ", ".join(ids))
        terminate(ec2, ids)
    return ids


def _launched(raw: dict[str, Any], group: int) -> LaunchedInstance | None:
    host = raw.get("PublicIpAddress") or raw.get("PrivateIpAddress")
    if raw["State"]["Name"] != "running" or not host:
        return None
    launch = raw.get("LaunchTime")
    return LaunchedInstance(
        id=raw["InstanceId"],
        instance_type=raw["InstanceType"],
        host=host,
        private_ip=raw.get("PrivateIpAddress"),
        spot=raw.get("InstanceLifecycle") == "spot",
        group=group,
        launched_at=launch.timestamp() if isinstance(launch, datetime) else time.time(),
        zone=(raw.get("Placement") or {}).get("AvailabilityZone"),
    )


async def ssh_silence(host: str, port: int, *, timeout: float, poll_s: float) -> str | None:
    """None once ``host:port`` answers with an SSH banner; after ``timeout`` without one, the
    last failure (e.g. ``ConnectionRefusedError: …``)."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while True:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), poll_s)
            try:
                banner = await asyncio.wait_for(reader.readline(), poll_s)
            finally:
                writer.close()
            if banner.startswith(b"SSH-"):
                return None
            last = f"unexpected banner {banner[:40]!r}"
        except (OSError, TimeoutError) as exc:
            last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if time.monotonic() >= deadline:
            return last
        await asyncio.sleep(poll_s)


async def wait_for_ssh(
    host: str, port: int = 22, *, timeout: float = 600.0, poll_s: float = 3.0
) -> None:
    """Return once ``host:port`` answers with an SSH banner; LaunchError after ``timeout``."""
    last = await ssh_silence(host, port, timeout=timeout, poll_s=poll_s)
    if last is not None:
        raise LaunchError(
            f"{host}:{port} did not answer SSH within {timeout:.0f} s ({last})",
            hint="check that the security group allows port 22 from here and the AMI runs sshd",
        )


def _created_nothing(cause: BaseException | None) -> bool:
    """True when a failed ``run_instances`` surely started nothing: it was never sent (no
    credentials or region) or AWS refused it (a 4xx error; a retry of a request that did start
    instances returns them, as the client token is the same). A lost connection is not sure: an
    earlier attempt may have got through."""
    from botocore.exceptions import (
        ClientError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
    )

    if isinstance(cause, ClientError):
        status = cause.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 500
        return int(status) < 500
    return isinstance(cause, NoCredentialsError | PartialCredentialsError | NoRegionError)


AddressFor = Callable[[LaunchedInstance], tuple[str, int]]
"""Maps a launched instance to the (host, port) SSH uses; a seam for tests."""
OnRunning = Callable[[LaunchedInstance], Awaitable[None]]
"""Called once per instance as it reaches running (EC2 bills it from then): the cost meter's
cue to start its line, before SSH answers."""


class EC2Fleet:
    """The run's EC2 instances: launch per group, wait until running and SSH-reachable, terminate.

    Blocking boto3 calls run in worker threads; calls still in flight when the task is cancelled
    are awaited by :meth:`terminate_all` so instances they create are terminated too.
    """

    def __init__(
        self,
        groups: Sequence[InstanceGroupSpec],
        *,
        run_id: str,
        region: str | None = None,
        endpoint: str | None = None,
        emitter: Emitter | None = None,
        ssh_port: int = 22,
        address_for: AddressFor | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
        poll_s: float = 5.0,
        ec2: Any = None,
        on_running: OnRunning | None = None,
    ) -> None:
        if not groups:
            raise CloudError("an ec2 profile needs at least one entry under nodes")
        self.groups = list(groups)
        self.run_id = run_id
        self.region = region
        self.endpoint = endpoint
        self.emitter = emitter or Emitter()
        self.address_for: AddressFor = address_for or (lambda inst: (inst.host, ssh_port))
        self.ready_timeout_s = ready_timeout_s
        self.poll_s = poll_s
        self.on_running = on_running
        """Awaited for each instance as it reaches running (and before its SSH is probed)."""
        self._ec2 = ec2
        self._token = secrets.token_hex(4)
        self._launches = 0
        self._launched: dict[str, int] = {}  # instance id -> group index
        self._unsure = False  # a run_instances call failed in a way that may have created some
        self._in_flight: set[asyncio.Future[Any]] = set()
        self.deadline = time.monotonic() + ready_timeout_s
        """time.monotonic() by which the latest launch must run, answer SSH and show its host
        keys (``ready_timeout_s`` after it started)."""
        self.instances: list[LaunchedInstance] = []
        """Instances that reached running, in profile order (filled by :meth:`launch`)."""
        self.terminated: list[str] = []
        """Ids terminated by :meth:`terminate_all`."""
        self.running: list[LaunchedInstance] = []
        """Every instance that reached running (EC2 bills it from then), also one whose SSH
        never answered and replacements."""

    @property
    def ec2(self) -> Any:
        """The EC2 client (created on first use)."""
        if self._ec2 is None:
            self._ec2 = aws.client("ec2", self.region, endpoint=self.endpoint)
        return self._ec2

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        future = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
        self._in_flight.add(future)
        future.add_done_callback(self._in_flight.discard)
        # shielded: cancelling the caller must not forget the thread, whose result we still need
        return await asyncio.shield(future)

    def _run_group(self, group: int, count: int | None = None) -> list[str]:
        spec = self.groups[group]
        if count is not None:
            spec = dataclasses.replace(spec, count=count)
        self._launches += 1  # a fresh idempotency token for each call
        params = launch_params(spec, self.run_id, group, f"{self._token}{self._launches}")
        market = "spot" if spec.spot else "on-demand"
        try:
            with aws.cloud_errors(
                f"start {spec.count} {market} {spec.instance_type} instance(s) (nodes[{group}])",
                region=self.region,
            ):
                reply = self.ec2.run_instances(**params)
        except BaseException as exc:
            if not (isinstance(exc, CloudError) and _created_nothing(exc.__cause__)):
                self._unsure = True  # the call may have started instances whose ids we lack
            raise
        ids = [inst["InstanceId"] for inst in reply["Instances"]]
        for instance_id in ids:
            self._launched[instance_id] = group
        return ids

    async def launch(self) -> list[LaunchedInstance]:
        """Start every group, wait for running and an SSH banner; the instances."""
        self.instances = await self._launch_groups(list(range(len(self.groups))))
        return self.instances

    async def launch_replacement(self, group: int) -> LaunchedInstance:
        """Start one more instance of ``group`` (tagged like the others), wait for SSH."""
        (inst,) = await self._launch_groups([group], count=1)
        self.instances.append(inst)
        return inst

    async def _launch_groups(
        self, groups: list[int], count: int | None = None
    ) -> list[LaunchedInstance]:
        self.deadline = time.monotonic() + self.ready_timeout_s
        new: list[str] = []
        for group in groups:
            spec = self.groups[group]
            ids = await self._call(self._run_group, group, count)
            new += ids
            for instance_id in ids:
                self.emitter.emit(
                    "node",
                    node=instance_id,
                    status="launching",
                    detail=f"{spec.instance_type} {'spot' if spec.spot else 'on-demand'}",
                    instance_type=spec.instance_type,
                    spot=spec.spot,
                )
        instances = await self._wait_running(new)
        await self._wait_ssh(instances)
        for inst in instances:
            self.emitter.emit("node", node=inst.id, status="ready", detail="SSH answers")
        return instances

    async def _reached_running(self, inst: LaunchedInstance) -> None:
        """Record, announce and report (``on_running``) an instance that reached running."""
        self.running.append(inst)
        self.emitter.emit(
            "node",
            node=inst.id,
            status="running",
            detail=inst.host,
            instance_type=inst.instance_type,
            spot=inst.spot,
            launched_at=inst.launched_at,
        )
        if self.on_running is not None:
            await self.on_running(inst)

    async def _wait_ssh(self, instances: list[LaunchedInstance]) -> None:
        """Wait until every instance answers SSH; LaunchError naming each one that did not
        answer by the deadline, with what to check."""
        remaining = max(1.0, self.deadline - time.monotonic())
        poll_s = min(self.poll_s, 3.0)
        probes = [
            asyncio.ensure_future(
                ssh_silence(*self.address_for(inst), timeout=remaining, poll_s=poll_s)
            )
            for inst in instances
        ]
        try:
            answers = await asyncio.gather(*probes)
        finally:  # a failure or cancellation stops every probe
            for probe in probes:
                probe.cancel()
            await asyncio.gather(*probes, return_exceptions=True)
        silent = []
        for inst, last in zip(instances, answers, strict=True):
            if last is not None:
                host, port = self.address_for(inst)
                where = f"{inst.id} ({inst.instance_type}, nodes[{inst.group}]) at {host}:{port}"
                silent.append(f"{where}: {last}")
        if silent:
            raise LaunchError(
                f"{len(silent)} of {len(instances)} instance(s) did not answer SSH within "
                f"{self.ready_timeout_s:g} s of their launch (ready_timeout); they will "
                f"be terminated: {'; '.join(silent)}",
                hint=SSH_CHECKS,
            )

    async def terminate(self, instance_id: str) -> None:
        """Terminate one instance of the run now (a lost or given-up node)."""
        await self._call(terminate, self.ec2, [instance_id])
        self.terminated.append(instance_id)
        self.emitter.emit("node", node=instance_id, status="terminated", detail="given up")

    async def gone(self, instance_id: str) -> str | None:
        """The state and reason when ``instance_id`` is shutting down or terminated, else None."""
        raw = await self._call(self._describe, [instance_id])
        for r in raw:
            state = r["State"]["Name"]
            if state in ("shutting-down", "terminated", "stopping", "stopped"):
                reason = (r.get("StateReason") or {}).get("Message") or ""
                return f"instance {instance_id} {state}" + (f" ({reason})" if reason else "")
        return None

    def _describe(self, ids: list[str]) -> list[dict[str, Any]]:
        from botocore.exceptions import ClientError

        try:
            with aws.cloud_errors("check the state of the run's instances", region=self.region):
                pages = self.ec2.get_paginator("describe_instances").paginate(InstanceIds=ids)
                return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]
        except CloudError as exc:
            cause = exc.__cause__
            if (
                isinstance(cause, ClientError)
                and aws.error_code(cause) == "InvalidInstanceID.NotFound"
            ):
                return []  # not visible yet (eventual consistency): poll again
            raise

    async def _wait_running(self, ids: list[str]) -> list[LaunchedInstance]:
        """Poll until every instance of ``ids`` runs, reporting each as it gets there."""
        deadline = self.deadline
        reached: dict[str, LaunchedInstance] = {}
        while True:
            raw = await self._call(self._describe, ids)
            by_id = {r["InstanceId"]: r for r in raw}
            for r in raw:
                state = r["State"]["Name"]
                if state in ("shutting-down", "terminated", "stopping", "stopped"):
                    reason = r.get("StateReason", {}).get("Message") or state
                    raise LaunchError(
                        f"instance {r['InstanceId']} ({r['InstanceType']}, nodes"
                        f"[{self._launched.get(r['InstanceId'], '?')}]) went {state}: {reason}",
                        hint="spot capacity may be gone; try on-demand, another type or zone",
                    )
            for i in ids:
                inst = _launched(by_id[i], self._launched[i]) if i in by_id else None
                if inst is not None and i not in reached:
                    reached[i] = inst
                    await self._reached_running(inst)
            if len(reached) == len(ids):
                return [reached[i] for i in ids]
            if time.monotonic() >= deadline:
                waiting = [i for i in ids if i not in reached]
                raise LaunchError(
                    f"instances {', '.join(waiting)} not running after "
                    f"{self.ready_timeout_s:g} s (ready_timeout)",
                    hint="check the EC2 console for the reason; they will be terminated",
                )
            await asyncio.sleep(self.poll_s)

    async def terminate_all(self) -> list[str]:
        """Terminate every instance of the run, also ones from calls still in flight.

        Runs to the end even if the calling task is cancelled meanwhile (re-raised after).
        """
        return await finish_despite_cancel(self._terminate_all(), "terminating instances")

    def _terminate_sync(self, known: list[str]) -> list[str]:
        terminate(self.ec2, known)
        return sweep_orphans(self.run_id, ec2=self.ec2)

    async def _terminate_all(self) -> list[str]:
        for future in list(self._in_flight):
            with contextlib.suppress(
                BaseException
            ):  # its outcome no longer matters; its instances do
                await future
        known = [i for i in self._launched if i not in self.terminated]
        if not self._launched and not self._unsure:
            return []  # every run_instances call was refused: nothing to look for (or to fail on)
        try:
            # one thread for both calls: once started it finishes even if the loop is torn down
            swept = await asyncio.to_thread(self._terminate_sync, known)
        except CloudError as exc:
            left = ", ".join(self._launched) or "unknown ids"
            error = LaunchError(
                f"could not terminate the instances of run {self.run_id} ({left}): {exc.message}",
                hint=f"`sentitop teardown {self.run_id}` once AWS answers again, or terminate "
                f"them by hand: instances tagged {aws.RUN_ID_TAG}={self.run_id}",
            )
            error.leftovers = True
            raise error from exc
        done = sorted(set(known) | set(swept))
        self.terminated.extend(i for i in done if i not in self.terminated)
        for instance_id in done:
            self.emitter.emit("node", node=instance_id, status="terminated", detail="terminated")
        return done

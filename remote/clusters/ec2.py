"""EC2Cluster: instances started for the run (see :mod:`remote.clusters.ec2_fleet`), used as
an SSHCluster once they answer SSH, and terminated on every exit path.

Host keys of fresh instances are taken from the console output cloud-init writes at boot and
kept in ``RUN_DIR/known_hosts``, unless the profile gives a known_hosts file or explicitly opts
out of host-key checks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncssh

from engine.errors import CloudError, LaunchError
from engine.events import Emitter
from remote import aws
from remote.clusters.dead_man import SHUTDOWN_ARGV, DeadMan
from remote.clusters.ec2_fleet import (
    LIVE_STATES,
    READY_TIMEOUT_S,
    AddressFor,
    EC2Fleet,
    InstanceGroupSpec,
    LaunchedInstance,
    OnRunning,
    describe_tagged,
    launch_params,
    sweep_orphans,
    wait_for_ssh,
)
from remote.clusters.naming import node_names
from remote.clusters.node_runtime import DLAMI_PYTHONS
from remote.clusters.ssh import SSHCluster, SSHNode

__all__ = [
    "LIVE_STATES",
    "EC2Cluster",
    "EC2Fleet",
    "InstanceGroupSpec",
    "LaunchedInstance",
    "default_ami",
    "describe_tagged",
    "host_keys_from_console",
    "known_hosts_lines",
    "launch_params",
    "sweep_orphans",
    "wait_for_ssh",
]

log = logging.getLogger(__name__)


HOST_KEYS_BEGIN = "-----BEGIN SSH HOST KEY KEYS-----"
HOST_KEYS_END = "-----END SSH HOST KEY KEYS-----"
_KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
              "ssh-rsa")  # fmt: skip

DEEP_LEARNING_AMI_PARAMETER = (
    "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.3-ubuntu-22.04/"
    "latest/ami-id"
)
"""Public SSM parameter naming the region's PyTorch Deep Learning AMI (used without ``ami``)."""


def host_keys_from_console(output: str) -> list[str]:
    """``keytype base64`` pairs cloud-init printed to the console (empty when not yet there)."""
    if HOST_KEYS_BEGIN not in output:
        return []
    block = output.split(HOST_KEYS_BEGIN, 1)[1].split(HOST_KEYS_END, 1)[0]
    keys = []
    for line in block.splitlines():
        parts = line.strip().split()
        if len(parts) >= 2 and parts[0] in _KEY_TYPES:
            keys.append(f"{parts[0]} {parts[1]}")
    return keys


def _loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def known_hosts_lines(host: str, port: int, keys: Sequence[str]) -> list[str]:
    """known_hosts entries for ``host:port``."""
    name = host if port == 22 else f"[{host}]:{port}"
    return [f"{name} {key}" for key in keys]


def default_ami(region: str | None, endpoint: str | None = None) -> str:
    """The region's PyTorch Deep Learning AMI id, from its public SSM parameter."""
    ssm = aws.client("ssm", region, endpoint=endpoint)
    try:
        with aws.cloud_errors("look up the default Deep Learning AMI", region=region):
            value = ssm.get_parameter(Name=DEEP_LEARNING_AMI_PARAMETER)["Parameter"]["Value"]
    except CloudError as exc:
        # without credentials or a region, cloud_errors' own hint says what to do
        if not any(word in exc.message for word in ("credentials", "no AWS region")):
            exc.hint = "set nodes[].ami in the profile to an AMI with Python and PyTorch"
        raise
    return str(value)


class EC2Cluster(SSHCluster):
    """EC2 instances started for the run (tagged with its id), then used as an SSHCluster.

    Node names are known up front (``<name or type>-<k>``); hosts are filled in by
    :meth:`start` once the instances run and answer SSH. :meth:`stop` — run by ``async with``
    on every exit path — terminates every instance tagged with the run id, and a failure or
    cancellation inside :meth:`start` terminates them before it propagates.
    """

    kind = "ec2"

    def __init__(
        self,
        groups: Sequence[InstanceGroupSpec],
        *,
        users: Sequence[str | None],
        keys: Sequence[str | None],
        nproc: Sequence[int],
        names: Sequence[Sequence[str]] | None = None,
        region: str | None = None,
        endpoint: str | None = None,
        ssh_port: int = 22,
        address_for: AddressFor | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
        poll_s: float = 5.0,
        known_hosts: str | Path | None = None,
        check_host_keys: bool = True,
        ec2: Any = None,
        metadata_url: str | None = None,
        dead_man: DeadMan | None = None,
        **ssh_options: Any,
    ) -> None:
        names = names or node_names(groups)
        self._groups = list(groups)
        self._group_nodes = [list(n) for n in names]
        placeholders = [
            SSHNode(name=name, host="0.0.0.0", port=ssh_port, user=users[gi], key=keys[gi],
                    nproc=nproc[gi])
            for gi, group_names in enumerate(self._group_nodes)
            for name in group_names
        ]  # fmt: skip
        self._console_host_keys = known_hosts is None and check_host_keys
        super().__init__(placeholders, known_hosts=known_hosts, check_host_keys=check_host_keys,
                         **ssh_options)  # fmt: skip
        self._fleet_options = dict(region=region, endpoint=endpoint, ssh_port=ssh_port,
                                   address_for=address_for, ready_timeout_s=ready_timeout_s,
                                   poll_s=poll_s, ec2=ec2)  # fmt: skip
        self._teardown_error: LaunchError | None = None
        self._instance_of: dict[str, LaunchedInstance] = {}
        self.fleet: EC2Fleet | None = None
        """The run's instances (created by :meth:`start`, once the run id is known)."""
        self.on_instance_running: OnRunning | None = None
        """Awaited for each instance (replacements too) as it reaches running, before its SSH
        answers: where billing starts (set it before :meth:`start`)."""
        self.metadata_url = metadata_url
        """Instance metadata base URL the spot watchers poll (None: the real one)."""
        self.dead_man = dead_man
        """Each instance shuts itself down when the launcher goes silent (None: off)."""
        self._renewals: asyncio.Task[None] | None = None

    @classmethod
    def from_profile(cls, profile: Any, **options: Any) -> EC2Cluster:
        """The cluster an ``ec2`` profile describes; ``options`` override constructor keywords."""
        endpoint = options.pop("endpoint", None)
        groups = []
        fallback: str | None = None
        for i, node in enumerate(profile.nodes):
            if not node.ami and fallback is None:
                fallback = default_ami(profile.region, endpoint)
                log.info("nodes[%d]: no ami given; using the Deep Learning AMI %s", i, fallback)
            groups.append(InstanceGroupSpec.from_node(node, ami=node.ami or fallback))
        kwargs: dict[str, Any] = dict(
            users=[n.user for n in profile.nodes],
            keys=[n.key for n in profile.nodes],
            nproc=[n.nproc or max(1, profile.gpus_per_instance(n)) for n in profile.nodes],
            region=profile.region,
            endpoint=endpoint,
            python=profile.python or "python3",
            python_candidates=() if profile.python or "python" in options else DLAMI_PYTHONS,
            workdir=profile.workdir,
            shared_fs=profile.shared_fs,
            known_hosts=profile.known_hosts,
            check_host_keys=not profile.insecure_ignore_host_keys,
        )
        if profile.ready_timeout is not None:
            kwargs["ready_timeout_s"] = profile.ready_timeout
        if profile.shutdown_unwatched_after is not None and options.get("address_for") is None:
            # real instances only: the tests' loopback "instances" are this very machine
            kwargs["dead_man"] = DeadMan(profile.shutdown_unwatched_after)
        kwargs.update(options)
        return cls(groups, **kwargs)

    def describe(self, node: str) -> str:
        """``user@host:port (instance id, type)``."""
        where = super().describe(node)
        inst = self._instance_of.get(node)
        return f"{where} ({inst.id}, {inst.instance_type})" if inst else where

    def node_facts(self, node: str) -> dict[str, Any]:
        """``instance``: the node's instance id (its launch, running and terminated events are
        named by it)."""
        inst = self._instance_of.get(node)
        return {"instance": inst.id} if inst else {}

    async def _prepare(self) -> None:
        assert self.run_dir is not None and self.streams is not None
        streams = self.streams
        self.fleet = EC2Fleet(self._groups, run_id=self.run_dir.name,
                              emitter=_StreamsEmitter(streams), on_running=self._reached_running,
                              **self._fleet_options)  # fmt: skip
        try:
            instances = await self.fleet.launch()
            self._adopt(instances)
            if self._console_host_keys:
                await self._trust_console_host_keys()
            await super()._prepare()
            await self._arm_dead_man(self.nodes)
        except BaseException as first:
            try:
                await self.fleet.terminate_all()
            except LaunchError as failed:  # both said: what failed, and what may still bill
                raise failed.after(first) from first
            raise

    async def _reached_running(self, inst: LaunchedInstance) -> None:
        """Pass an instance that reached running to :attr:`on_instance_running`."""
        if self.on_instance_running is not None:
            await self.on_instance_running(inst)

    def _adopt(self, instances: Sequence[LaunchedInstance]) -> None:
        """Point each node name at its instance's address."""
        assert self.fleet is not None
        by_group: dict[int, list[LaunchedInstance]] = {}
        for inst in instances:
            by_group.setdefault(inst.group, []).append(inst)
        seam = self._fleet_options["address_for"] is not None
        self._instance_of.clear()
        for gi, names in enumerate(self._group_nodes):
            for name, inst in zip(names, by_group.get(gi, []), strict=True):
                host, port = self.fleet.address_for(inst)
                spec = self._nodes[name]
                address = host if seam else (inst.private_ip or host)
                self._nodes[name] = dataclasses.replace(spec, host=host, port=port, address=address)
                self._instance_of[name] = inst

    async def _trust_console_host_keys(self) -> None:
        """Write ``RUN_DIR/known_hosts`` from the host keys the instances printed at boot."""
        assert self.fleet is not None and self.run_dir is not None
        fleet = self.fleet
        deadline = fleet.deadline  # one ready_timeout from launch covers SSH and the keys
        lines: list[str] = []
        for name, inst in self._instance_of.items():
            spec = self._nodes[name]
            while True:
                output = await asyncio.to_thread(_console_output, fleet.ec2, inst.id)
                keys = host_keys_from_console(output)
                if keys:
                    lines += known_hosts_lines(spec.host, spec.port, keys)
                    break
                if time.monotonic() >= deadline:
                    raise LaunchError(
                        f"node {name} ({inst.id}): no SSH host keys in its console output "
                        f"within {fleet.ready_timeout_s:g} s of its launch (ready_timeout), so "
                        "its identity cannot be checked",
                        hint="use an AMI with cloud-init, give a known_hosts file, or set "
                        "insecure_ignore_host_keys: true (unsafe) in the profile",
                    )
                await asyncio.sleep(fleet.poll_s)
        path = self.run_dir / "known_hosts"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write("".join(line + "\n" for line in lines))
        self.known_hosts = path

    def instance_of(self, node: str) -> LaunchedInstance | None:
        """The instance behind ``node`` (None before start)."""
        return self._instance_of.get(node)

    def is_spot(self, node: str) -> bool:
        """True when ``node`` runs on spot capacity."""
        inst = self._instance_of.get(node)
        return bool(inst and inst.spot) or self._groups[self._group_of(node)].spot

    def _group_of(self, node: str) -> int:
        for gi, names in enumerate(self._group_nodes):
            if node in names:
                return gi
        raise LaunchError(f"no such node: {node}")

    async def node_gone(self, node: str) -> str | None:
        """Why ``node``'s instance is gone (shutting down, terminated, stopped), else None."""
        inst = self._instance_of.get(node)
        if inst is None or self.fleet is None:
            return None
        return await self.fleet.gone(inst.id)

    async def _give_up(self, node: str) -> None:
        """Forget ``node`` and terminate its instance (it may still bill while unreachable)."""
        inst = self._instance_of.pop(node, None)
        gi = self._group_of(node)
        self._group_nodes[gi].remove(node)
        del self._nodes[node]
        conn = self._conns.pop(node, None)
        if conn is not None:
            conn.close()
        if inst is not None and self.fleet is not None and inst.id not in self.fleet.terminated:
            await self.fleet.terminate(inst.id)

    async def drop_node(self, node: str) -> None:
        """Continue without ``node``; its instance is terminated."""
        if len(self._nodes) == 1:
            raise LaunchError(f"node {node} was the last node; nothing is left to continue on")
        await self._give_up(node)

    async def replace_node(self, node: str) -> str:
        """Terminate ``node``'s instance, start one of its group (tagged with the run id), wait
        for SSH, set it up; the new node's name (``<node>-r<k>``)."""
        assert self.fleet is not None and self.run_dir is not None
        gi = self._group_of(node)
        spec = self._nodes[node]
        await self._give_up(node)
        base = node.split("-r", 1)[0]
        taken = set(self._nodes) | set(self.lost)
        name = next(f"{base}-r{k}" for k in range(1, 1000) if f"{base}-r{k}" not in taken)
        inst = await self.fleet.launch_replacement(gi)
        host, port = self.fleet.address_for(inst)
        address = host if self._fleet_options["address_for"] is not None else inst.private_ip
        self._nodes[name] = dataclasses.replace(
            spec, name=name, host=host, port=port, address=address or host
        )
        self._group_nodes[gi].append(name)
        self._instance_of[name] = inst
        if self._console_host_keys:
            await self._trust_console_host_keys()
        await self._prepare_nodes([name])
        await self._arm_dead_man([name])
        return name

    # -- the dead man's switch (remote.clusters.dead_man) -------------------------------------
    def _lease(self, node: str) -> str:
        return f"{self.node_dir(node)}/dead-man.lease"

    async def _arm_dead_man(self, nodes: Sequence[str]) -> None:
        """Start each node's shutdown loop, and the renewals (once)."""
        if self.dead_man is None:
            return
        for node in nodes:
            if self.dead_man.shutdown_argv == SHUTDOWN_ARGV and _loopback(self._nodes[node].host):
                continue  # a test's loopback "instance" is this machine: never power it off
            lacks = await self._check(node, self.dead_man.probe_command(),
                                      "checking the tools of the unwatched shutdown")  # fmt: skip
            if lacks.split():
                missing = ", ".join(lacks.split())
                self._require_started().emit(
                    "warning",
                    stage="start",
                    code="dead_man_unarmed",
                    node=node,
                    message=f"node {node} ({self.describe(node)}) lacks {missing}: its dead man's "
                    "switch is not armed, so if sentitop is killed (SIGKILL, the OOM killer, a "
                    "closed laptop) this instance keeps billing until `sentitop teardown RUN` or "
                    "the console terminates it; use an AMI that has them",
                )
                continue
            await self._check(node, self.dead_man.arm_command(self._lease(node)),
                              "arming the shutdown of an unwatched instance")  # fmt: skip
        if self._renewals is None:
            self._renewals = asyncio.create_task(self._renew_leases(self.dead_man))

    async def _renew_leases(self, dead_man: DeadMan) -> None:
        while True:
            await asyncio.sleep(dead_man.renew_s)
            for node, conn in list(self._conns.items()):
                try:
                    await asyncio.wait_for(
                        conn.run(dead_man.renew_command(self._lease(node))), dead_man.renew_s * 2
                    )
                except (asyncssh.Error, OSError, TimeoutError) as exc:  # a lost node is seen
                    log.warning("lease of %s not renewed: %s", node, exc)  # by the node watch

    async def _disarm_dead_man(self) -> None:
        """A normal stop: end the renewals and each node's loop (best effort, briefly)."""
        task, self._renewals = self._renewals, None
        if task is None or self.dead_man is None:
            return
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

        async def disarm(node: str, conn: Any) -> None:
            await asyncio.wait_for(conn.run(DeadMan.disarm_command(self._lease(node))), 5.0)

        done = [disarm(n, c) for n, c in list(self._conns.items())]
        await asyncio.gather(*done, return_exceptions=True)

    async def _disconnect(self) -> None:
        """Close connections, then terminate the instances (while the run's streams are open)."""
        await self._disarm_dead_man()
        await super()._disconnect()
        if self.fleet is not None:
            try:
                await self.fleet.terminate_all()
            except LaunchError as exc:  # reported by stop(), after the streams are closed
                self._teardown_error = exc

    async def stop(self) -> None:
        """Stop node processes, disconnect and terminate every instance of the run.

        Raises LaunchError (naming the instances) only when termination itself failed.
        """
        self._teardown_error = None
        await super().stop()
        if self._teardown_error is not None:
            raise self._teardown_error


def _console_output(ec2: Any, instance_id: str) -> str:
    with aws.cloud_errors(f"read the console output of {instance_id}"):
        reply = ec2.get_console_output(InstanceId=instance_id, Latest=True)
    return str(reply.get("Output") or "")


class _StreamsEmitter(Emitter):
    """An Emitter writing through a cluster's RunStreams (events.jsonl and the caller's sink)."""

    def __init__(self, streams: Any) -> None:
        super().__init__()
        self._streams = streams

    def emit(self, type_: str, /, **fields: Any) -> dict[str, Any]:
        """Write one event through the streams."""
        event: dict[str, Any] = self._streams.emit(type_, **fields)
        return event

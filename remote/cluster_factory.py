"""Build the training cluster a profile names (local processes, SSH nodes or EC2 instances)."""

from __future__ import annotations

from typing import Any

from engine.errors import ProfileError
from remote.clusters import Cluster, LocalCluster
from remote.profile import EC2Profile, LocalProfile, Profile, SSHProfile


def make_cluster(profile: Profile, **ec2_options: Any) -> Cluster:
    """The cluster for ``profile``; nothing is started until ``cluster.start``."""
    if isinstance(profile, LocalProfile):
        return LocalCluster(["local"], nproc=profile.world_size(), python=profile.python or None)
    if isinstance(profile, SSHProfile):
        from remote.clusters.ssh import SSHCluster, SSHNode

        nodes = [
            SSHNode(
                name=n.label,
                host=n.host,
                port=n.port,
                user=n.user,
                key=n.key,
                nproc=n.nproc or max(1, n.gpus),
            )
            for n in profile.nodes
        ]
        return SSHCluster(
            nodes,
            python=profile.python or "python3",
            workdir=profile.workdir,
            shared_fs=profile.shared_fs,
            known_hosts=profile.known_hosts,
            check_host_keys=not profile.insecure_ignore_host_keys,
        )
    if isinstance(profile, EC2Profile):
        from remote.clusters.ec2 import EC2Cluster

        return EC2Cluster.from_profile(profile, **ec2_options)
    raise ProfileError(f"provider {profile.provider!r} has no cluster; expected local, ssh or ec2")

"""Clusters behind one interface: LocalCluster, SSHCluster (and EC2Cluster on top of SSH).

``SSHCluster``/``SSHNode`` are imported lazily so that importing this package does not load
asyncssh.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from remote.clusters.base import (
    LOST,
    Cluster,
    Command,
    NodeFailedError,
    NodeProcess,
    NodeResult,
)
from remote.clusters.local import LocalCluster
from remote.streams import LineCallback

if TYPE_CHECKING:
    from remote.clusters.ssh import SSHCluster, SSHNode

__all__ = [
    "LOST",
    "Cluster",
    "Command",
    "LineCallback",
    "LocalCluster",
    "NodeFailedError",
    "NodeProcess",
    "NodeResult",
    "SSHCluster",
    "SSHNode",
]


def __getattr__(name: str) -> Any:
    if name in ("SSHCluster", "SSHNode"):
        from remote.clusters import ssh

        return getattr(ssh, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

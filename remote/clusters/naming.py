"""Node names of EC2 groups, shared by the cluster that starts them and the cost advice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def node_names(groups: Sequence[Any]) -> list[list[str]]:
    """Per group, its nodes' names: ``<name or instance type>-<k>`` (``-g<i>`` added when two
    groups share a label)."""
    labels = [getattr(g, "name", None) or g.instance_type for g in groups]
    repeated = {label for label in labels if labels.count(label) > 1}
    return [
        [f"{label}-g{gi}-{k}" if label in repeated else f"{label}-{k}" for k in range(g.count)]
        for gi, (label, g) in enumerate(zip(labels, groups, strict=True))
    ]

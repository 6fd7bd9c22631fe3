"""Row records of a run's state: stages, nodes, epochs and log lines."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class StageInfo:
    """One stage of a run (preprocess, train, review)."""

    name: str
    """Stage name."""
    status: str = "pending"
    """pending | running | ok | failed | ..."""
    started_t: float | None = None
    """Wall time the stage began."""
    seconds: float | None = None
    """Duration once ended."""
    done: float = 0.0
    """Units done (from `progress`)."""
    total: float | None = None
    """Units in the stage, when known."""
    unit: str = ""
    """What is counted (records, samples, steps...)."""
    rate: float | None = None
    """Units per second."""


@dataclass(slots=True)
class NodeInfo:
    """One node of the cluster."""

    name: str
    """Node name."""
    status: str = "?"
    """Status from the latest `node` event."""
    gpu: str = ""
    """Device of the node's ranks ("CPU", "2× A10G"), or the GPU a `node` event named."""
    detail: str = ""
    """Detail of the latest `node` event."""
    last_line: str = ""
    """Newest log line seen from this node."""
    ranks: list[int] = field(default_factory=list)
    """Training ranks running on this node (from their `rank_start` events), ascending."""
    devices: dict[int, str] = field(default_factory=dict)
    """Rank -> its device name (`rank_start`'s device_name, or device for older runs)."""


def node_row(
    nodes: dict[str, NodeInfo], aliases: dict[str, str], name: str, instance: Any
) -> NodeInfo:
    """The row of ``nodes`` a `node` event of ``name`` updates. An EC2 machine is one row: its
    instance's own events are named by the instance id, its node's events by the node name with
    ``instance`` set; from then on (``aliases``: instance id -> node name) both go to the node's
    row, which takes over what the instance's row had."""
    if isinstance(instance, str) and instance and instance != name:
        aliases[instance] = name
        early = nodes.pop(instance, None)
        row = nodes.get(name)
        if row is None:
            row = nodes[name] = NodeInfo(name)
        if early is not None and not row.gpu:
            row.gpu = early.gpu
        return row
    name = aliases.get(name, name)
    row = nodes.get(name)
    if row is None:
        row = nodes[name] = NodeInfo(name)
    return row


def device_label(devices: Iterable[str]) -> str:
    """What a node trains on, for people: "CPU", "A10G", "2× A10G", "A10G + T4"."""
    names = Counter(_device_name(d) for d in devices)
    return " + ".join(
        f"{n}× {name}" if n > 1 and name != "CPU" else name for name, n in names.items()
    )


def _device_name(device: str) -> str:
    if device == "cpu" or device.upper() == "CPU":
        return "CPU"
    if device.startswith("cuda"):
        return "GPU"  # a run recorded before rank_start carried device_name
    # "NVIDIA A100-SXM4-40GB" -> "A100", "Tesla T4" -> "T4"
    return device.removeprefix("NVIDIA ").removeprefix("Tesla ").split("-")[0].strip() or "?"


@dataclass(slots=True)
class EpochRow:
    """Numbers of one finished epoch."""

    epoch: int
    train_loss: float | None = None
    test_loss: float | None = None
    accuracy: float | None = None
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    seconds: float | None = None
    samples_per_s: float | None = None
    pip_loss: float | None = None
    """Embeddings runs: PIP loss against the SPPMI reference."""
    words_per_s: float | None = None
    """Embeddings runs: corpus words per second over the epoch."""


EPOCH_NUMBERS = ("train_loss", "test_loss", "accuracy", "precision", "recall", "f1", "seconds",
                 "samples_per_s", "pip_loss", "words_per_s")  # fmt: skip
"""The numbers an `epoch` event carries into its row."""


def epoch_row(ev: Mapping[str, Any]) -> EpochRow | None:
    """The row of an `epoch` event; None when it has no epoch number (a damaged line)."""
    epoch = ev.get("epoch")
    if epoch.__class__ is not int or epoch < 0:
        return None
    numbers = {k: float(v) for k in EPOCH_NUMBERS if (v := ev.get(k)).__class__ in (int, float)}
    return EpochRow(epoch=epoch, **numbers)


@dataclass(slots=True)
class LogLine:
    """One line of the log pane."""

    t: float
    """Seconds since the run began."""
    source: str
    """Node, rank or 'run'."""
    text: str
    """The message."""
    level: str = "info"
    """info | warn | error."""

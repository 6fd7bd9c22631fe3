"""The planner's bundled hardware tables: GPU datasheet figures, instance links, measured rates."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache
from importlib import resources

from engine.errors import InputError

DATA = "remote.review.data"


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU model's datasheet figures (per GPU as EC2 counts them)."""

    model: str
    architecture: str
    fp32_tflops: float
    bf16_tflops: float | None
    """Dense bf16 tensor peak; None when the GPU has no bf16."""
    fp16_tflops: float
    mem_bw_gbs: float
    """Peak memory bandwidth, GB/s: what the planner scales by."""
    mem_gb: float
    source: str


@dataclass(frozen=True, slots=True)
class InstanceLinks:
    """How the GPUs of an instance type talk: to each other and over the network."""

    instance_type: str
    vcpus: int
    gpu_link: str
    gpu_link_gbs: float | None
    network_gbps: float | None
    up_to: bool
    """True when AWS gives the network as 'Up to N Gigabit' (burstable)."""
    source: str

    def describe(self) -> str:
        """E.g. 'NVLink 2 300 GB/s, 25 Gbit/s network'."""
        link = "" if self.gpu_link == "none" else f"{self.gpu_link} {self.gpu_link_gbs:g} GB/s, "
        net = (
            "network 'High'"
            if self.network_gbps is None
            else f"{'up to ' if self.up_to else ''}{self.network_gbps:g} Gbit/s network"
        )
        return link + net


@dataclass(frozen=True, slots=True)
class DeviceRate:
    """A measured training rate of one workload on one device (bundled, with its source)."""

    device: str
    """A GPU model of the table, or a measured host ('host-1core')."""
    preset: str
    seq_len: int
    batch: int
    samples_per_s: float
    mem_bw_gbs: float
    """The device's bandwidth (datasheet for GPUs, measured for the host)."""
    fp32_tflops: float
    date: str
    source: str


def _rows(name: str) -> list[tuple[int, dict[str, str]]]:
    text = resources.files(DATA).joinpath(name).read_text(encoding="utf-8")
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln and not ln.startswith("#")]
    reader = csv.DictReader(io.StringIO("\n".join(ln for _, ln in lines)))
    return [(lines[i + 1][0], row) for i, row in enumerate(reader)]


def _opt(text: str | None) -> float | None:
    return float(text) if text and text.strip() else None


def _bad(name: str, line: int, exc: Exception) -> InputError:
    return InputError(f"remote/review/data/{name}:{line}: bad row ({exc!r})")


@cache
def gpu_table() -> dict[str, GpuSpec]:
    """GPU model -> datasheet figures (remote/review/data/gpus.csv)."""
    out: dict[str, GpuSpec] = {}
    for line, r in _rows("gpus.csv"):
        try:
            spec = GpuSpec(
                r["gpu_model"],
                r["architecture"],
                float(r["fp32_tflops"]),
                _opt(r["bf16_tflops"]),
                float(r["fp16_tflops"]),
                float(r["mem_bw_gbs"]),
                float(r["mem_gb"]),
                r["source"],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _bad("gpus.csv", line, exc) from None
        out[spec.model] = spec
    return out


@cache
def instance_links() -> dict[str, InstanceLinks]:
    """Instance type -> GPU link and network (remote/review/data/instances.csv)."""
    out: dict[str, InstanceLinks] = {}
    for line, r in _rows("instances.csv"):
        try:
            links = InstanceLinks(
                r["instance_type"],
                int(r["vcpus"]),
                r["gpu_link"],
                _opt(r["gpu_link_gbs"]),
                _opt(r["network_gbps"]),
                r["up_to"] == "yes",
                r["source"],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _bad("instances.csv", line, exc) from None
        out[links.instance_type] = links
    return out


@cache
def device_rates() -> tuple[DeviceRate, ...]:
    """Bundled measured rates (remote/review/data/device_rates.csv)."""
    out: list[DeviceRate] = []
    for line, r in _rows("device_rates.csv"):
        try:
            rate = DeviceRate(
                r["device"],
                r["preset"],
                int(r["seq_len"]),
                int(r["batch"]),
                float(r["samples_per_s"]),
                float(r["mem_bw_gbs"]),
                float(r["fp32_tflops"]),
                r["date"],
                r["source"],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _bad("device_rates.csv", line, exc) from None
        out.append(rate)
    return tuple(out)

"""The Python and PyTorch versions each node reports at setup: checked before any rank starts."""

from __future__ import annotations

import importlib.metadata
import re

from engine.errors import LaunchError
from remote.shell import quote

DLAMI_PYTHONS = ("/opt/pytorch/bin/python", "/opt/conda/envs/pytorch/bin/python", "python3")
"""Where AWS's Deep Learning AMIs keep the Python that has PyTorch (newer AMIs, older ones), then
the PATH's: tried in this order on an EC2 node whose profile gives no python."""


def oldest_python() -> tuple[int, ...]:
    """The oldest Python the engine's code runs on (pyproject's requires-python, as installed);
    () when sentitop runs from a source tree that is not installed."""
    try:
        spec = importlib.metadata.metadata("sentitop")["Requires-Python"] or ""
    except importlib.metadata.PackageNotFoundError:
        return ()
    found = re.search(r">=\s*(\d+\.\d+)", spec)
    return release(found.group(1)) if found else ()


PYTHON_HINT = (
    "set the profile's python: to an interpreter on the nodes that has the project's "
    "dependencies (torch, numpy, h5py), e.g. a virtualenv's bin/python"
)


def find_python_command(candidates: tuple[str, ...]) -> str:
    """A shell line printing (between RS marks) the first of ``candidates`` that imports torch;
    exit 1 when none does."""
    tries = " ".join(quote(c) for c in candidates)
    return (
        f'for p in {tries}; do command -v "$p" >/dev/null 2>&1 && "$p" -c "import torch" '
        ">/dev/null 2>&1 && { printf '\\036%s\\036' \"$p\"; exit 0; }; done; exit 1"
    )


def probe_command(python: str, with_torch: bool) -> str:
    """A shell line printing the Python version of ``python`` (and its torch version)."""
    probe = "import sys; print(sys.version.split()[0])"
    if with_torch:
        probe = "import sys, torch; print(sys.version.split()[0], torch.__version__)"
    return f"{quote(python)} -c {quote(probe)}"


def parse_probe(out: str) -> tuple[str, str | None]:
    """(python version, torch version or None) from the probe's last line (login scripts may
    print before it)."""
    lines = [line for line in out.splitlines() if line.strip()]
    words = lines[-1].split() if lines else []
    if not words:
        return "", None
    return words[0], (words[1] if len(words) > 1 else None)


def release(version: str) -> tuple[int, ...]:
    """(major, minor) of a version such as "2.13.0+cpu" or "3.11.9"; () when unreadable."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else ()


def check_python(node: str, where: str, version: str) -> None:
    """Refuse a node whose Python is older than the engine's code needs."""
    found, oldest = release(version), oldest_python()
    if found and oldest and found < oldest:
        need = ".".join(map(str, oldest))
        raise LaunchError(
            f"node {node} ({where}): the profile's python is Python {version}; sentitop's "
            f"code needs Python {need} or newer",
            hint=PYTHON_HINT,
        )


def check_same_torch(torch_by_node: dict[str, str]) -> None:
    """Refuse nodes that run different PyTorch releases: DDP needs one on every node."""
    releases = {release(version) for version in torch_by_node.values()}
    if len(releases) > 1:
        listed = ", ".join(f"{node} {version}" for node, version in torch_by_node.items())
        raise LaunchError(
            f"the nodes run different PyTorch releases ({listed}): distributed training needs "
            "the same release on every node",
            hint="point the profile's python: at the same torch on every node (for EC2, one "
            "AMI for every node)",
        )


def local_torch() -> str | None:
    """The torch version installed beside sentitop on this machine (without importing it)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_differs(torch_by_node: dict[str, str], here: str | None) -> str | None:
    """A one-line warning when the nodes' PyTorch release is not this machine's (the one
    sentitop is tested with and that reads the run's checkpoints for eval and predict)."""
    if here is None or not torch_by_node:
        return None
    others = {n: v for n, v in torch_by_node.items() if release(v) != release(here)}
    if not others:
        return None
    listed = ", ".join(f"{node} {version}" for node, version in others.items())
    return (
        f"node PyTorch differs from this machine's {here} ({listed}): sentitop is tested with "
        f"{here}, and eval/predict here load the model the nodes write; if a rank fails at "
        "import or in DDP, give the nodes the same torch (the profile's python:, or nodes[].ami)"
    )

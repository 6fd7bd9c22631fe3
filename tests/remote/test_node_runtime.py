"""The nodes' Python and PyTorch versions, checked at setup on a real OpenSSH server (loopback)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine.errors import LaunchError
from engine.events import read_events
from remote.clusters.node_runtime import (
    check_same_torch,
    local_torch,
    parse_probe,
    release,
    torch_differs,
)
from tests.remote.conftest import LoopbackSSHD
from tests.remote.test_cluster_ssh import make_cluster


def fake_python(tmp: Path, by_host: dict[str, str]) -> str:
    """An interpreter that answers the setup probe with the line given for the node's address
    (the server address in $SSH_CONNECTION), as a node with that Python and torch would."""
    script = tmp / "python"
    cases = "".join(f'  {host}) echo "{line}" ;;\n' for host, line in by_host.items())
    script.write_text(
        "#!/bin/sh\necho 'login banner 9.9 9.9'\nset -- $SSH_CONNECTION\n"
        f'case "$3" in\n{cases}esac\n'
    )
    script.chmod(0o755)
    return str(script)


def test_probe_line_is_read_after_login_noise() -> None:
    assert parse_probe("Welcome\n\n3.11.9 2.3.1+cu121\n") == ("3.11.9", "2.3.1+cu121")
    assert parse_probe("3.12.1\n") == ("3.12.1", None)
    assert parse_probe("") == ("", None)
    assert release("2.13.0+cpu") == (2, 13) and release("banana") == ()


def test_only_another_release_is_named() -> None:
    assert torch_differs({"a": "2.13.0+cu128", "b": "2.13.1"}, "2.13.0+cpu") is None
    text = torch_differs({"a": "2.13.0", "b": "2.3.1"}, "2.13.0")
    assert text is not None and "b 2.3.1" in text and "a 2.13.0" not in text
    assert torch_differs({"a": "2.3.1"}, None) is None  # no torch here: nothing to compare
    check_same_torch({"a": "2.13.0+cpu", "b": "2.13.1"})  # patch releases may differ


async def test_nodes_with_different_torch_are_refused_before_any_rank(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    a, b = sshd.hosts
    python = fake_python(tmp_path, {a: "3.11.9 2.13.0", b: "3.11.9 2.3.1+cu121"})
    cluster = make_cluster(sshd, tmp_path, python=python)
    with pytest.raises(LaunchError) as caught:
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")
    assert "different PyTorch releases (a 2.13.0, b 2.3.1+cu121)" in caught.value.message
    assert caught.value.hint and "python:" in caught.value.hint


async def test_nodes_on_another_torch_than_this_machine_are_warned_about(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    here = local_torch()
    if here is None:
        pytest.skip("torch is not installed here")
    a, b = sshd.hosts
    python = fake_python(tmp_path, {a: "3.11.9 2.3.1", b: "3.11.9 2.3.1"})
    run_dir = tmp_path / "runs" / "r"
    cluster = make_cluster(sshd, tmp_path, python=python)
    async with cluster:
        await cluster.start(run_dir)
    warnings = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "warning"]
    assert [w["code"] for w in warnings] == ["torch_version"]
    assert f"this machine's {here} (a 2.3.1, b 2.3.1)" in warnings[0]["message"]


async def test_a_node_python_too_old_for_the_code_is_refused(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    a, b = sshd.hosts
    python = fake_python(tmp_path, {a: "3.11.9", b: "3.8.10"})
    cluster = make_cluster(sshd, tmp_path, python=python, probe_torch=False)
    with pytest.raises(LaunchError) as caught:
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")
    assert caught.value.message.startswith("node b (")
    assert "Python 3.8.10; sentitop's code needs Python 3.11 or newer" in caught.value.message


async def test_the_first_candidate_python_with_torch_is_used_on_each_node(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    """An EC2 node on a Deep Learning AMI has torch in /opt/pytorch/bin/python (older AMIs:
    a conda env), not in the PATH's python3, which the default tried alone."""
    candidates = (str(tmp_path / "none" / "python"), "/bin/false", sys.executable)
    cluster = make_cluster(sshd, tmp_path, python="python3", python_candidates=candidates)
    async with cluster:
        await cluster.start(tmp_path / "runs" / "r")
        assert [cluster.python(n) for n in cluster.nodes] == [sys.executable] * 2


async def test_no_candidate_with_torch_names_those_tried(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    candidates = (str(tmp_path / "none" / "python"), "/bin/false")
    cluster = make_cluster(sshd, tmp_path, python_candidates=candidates)
    with pytest.raises(LaunchError) as caught:
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")
    assert f"finding a python with torch (tried {candidates[0]}, /bin/false)" in (
        caught.value.message
    )
    assert caught.value.hint and "python:" in caught.value.hint

"""Every value that reaches a shell is quoted: hostile values run nothing (a canary proves it)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ConfigError, LaunchError
from engine.launch import free_port
from remote.clusters import Command
from remote.clusters.ssh import SSHCluster, SSHNode
from remote.shell import (
    check_name,
    env_args,
    join,
    kill_command,
    launch_argv,
    remote_dir,
    remote_node_command,
)
from tests.remote.conftest import LoopbackSSHD


def hostile(canary: Path) -> list[str]:
    """Values that run ``touch CANARY`` (or delete its folder) if a shell ever interprets them.

    The destructive ones only ever target the test's own folder, so that a quoting regression
    fails the test instead of deleting anybody's home folder.
    """
    c = str(canary)
    return [
        f"; rm -rf {canary.parent}",
        f"; touch {c}",
        f"$(touch {c})",
        f"`touch {c}`",
        f"x\ntouch {c}",
        f"x\rtouch {c}",
        f"' ; touch {c}; '",
        f'" ; touch {c}; "',
        f"&& touch {c}",
        f"| touch {c}",
        f"> {c}",
        f"${{IFS}}touch${{IFS}}{c}",
        "$HOME",
        "*",
        "-n",
        "\\",
        "",
        "ünïcødé ✓",
    ]


PART = "w; touch CANARY $(touch CANARY)\n`touch CANARY` && touch CANARY"
"""A hostile file-name component (no slash): creates ``CANARY`` in the cwd if interpreted."""


def canaries(*roots: Path) -> list[Path]:
    """Every CANARY file under ``roots``, the home folder and this process's cwd."""
    found = [p for root in roots for p in root.rglob("CANARY")]
    return found + [p for p in (Path.home() / "CANARY", Path.cwd() / "CANARY") if p.exists()]


def bash(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a command line the way sshd does: ``$SHELL -c LINE`` (bash here), stdin held open.

    (The node wrapper's watchdog treats end-of-file on stdin as "the launcher is gone".)
    """
    proc = subprocess.Popen(
        ["bash", "-c", line], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
        proc.wait(30)
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(), err.decode())


def test_join_round_trips_hostile_values(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    values = [*hostile(canary), "; rm -rf ~"]  # never run: only split by shlex
    assert shlex.split(join(values)) == values
    values = hostile(canary)
    result = bash(f"printf '%s\\0' {join(values)}", tmp_path)
    assert result.stdout.split("\0")[:-1] == values
    assert not canary.exists()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\0"), max_size=20),
        min_size=1,
    )
)
def test_any_text_reaches_the_program_unchanged(values: list[str]) -> None:
    result = subprocess.run(
        ["sh", "-c", f"printf '%s\\0' {join(values)}"], capture_output=True, timeout=30
    )
    assert result.stdout.decode().split("\0")[:-1] == values


def test_node_command_with_hostile_argv_env_cwd_and_pidfile_runs_nothing(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    values = hostile(canary)
    workdir = tmp_path / PART
    workdir.mkdir()
    pidfile = str(workdir / f"p {PART}.pid")
    line = remote_node_command(
        ("printf", "%s\\0", *values),
        cwd=str(workdir),
        pidfile=pidfile,
        env={"HOSTILE": values[1], "OTHER": values[3]},
    )
    result = bash(line, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\0")[:-1] == values
    assert Path(pidfile).read_text().strip().isdigit()
    assert not canary.exists()
    env_line = remote_node_command(
        ("sh", "-c", 'printf "%s|%s" "$HOSTILE" "$(pwd)"'),
        cwd=str(workdir),
        pidfile="",
        env={"HOSTILE": values[1]},
    )
    assert bash(env_line, tmp_path).stdout == f"{values[1]}|{workdir}"
    assert canaries(tmp_path) == []


def test_kill_command_quotes_the_pidfile(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    for value in hostile(canary):
        assert bash(kill_command(str(tmp_path / value)), tmp_path).returncode == 0
    assert not canary.exists()


def test_home_relative_workdir_expands_home_only(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    words = remote_dir(f"~/sentitop $(touch {canary})")
    assert words.startswith('"$HOME"/')
    result = bash(f"printf %s {words}", tmp_path)
    assert result.stdout == str(Path.home() / f"sentitop $(touch {canary})")
    assert bash(f"printf %s {remote_dir('~')}", tmp_path).stdout == str(Path.home())
    assert bash(f"printf %s {remote_dir('~root/x')}", tmp_path).stdout == "~root/x"
    assert not canary.exists()


@pytest.mark.parametrize("name", ["a;b", "$(x)", "a b", "../up", "", "-rf", "a\nb", "x" * 65])
def test_unsafe_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="is not allowed"):
        check_name(name, "node name")


@pytest.mark.parametrize("name", ["A=B", "1X", "X;Y", "$X", ""])
def test_unsafe_environment_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="environment variable name"):
        env_args({name: "v"})


def test_launch_argv_keeps_values_as_single_arguments() -> None:
    argv = launch_argv(
        "/opt/py $(x)/python",
        "engine.sentiment.train",
        ["--config", "/d/`x`.json"],
        nproc=2,
        node_rank=1,
        rank_offset=2,
        world_size=4,
        master="10.0.0.1:29400",
    )
    assert argv[0] == "/opt/py $(x)/python"
    assert argv[argv.index("--rank-offset") + 1] == "2"
    assert argv[argv.index("--master") + 1] == "10.0.0.1:29400"
    assert argv[-3:] == ["engine.sentiment.train", "--config", "/d/`x`.json"]
    assert shlex.split(join(argv)) == argv


# -- through a real sshd ---------------------------------------------------------------------


def _nodes(sshd: LoopbackSSHD, name: str = "a") -> list[SSHNode]:
    return [SSHNode(name=name, host=sshd.hosts[0], port=sshd.port, user=sshd.user,
                    key=str(sshd.key))]  # fmt: skip


async def test_hostile_values_over_ssh_run_nothing(sshd: LoopbackSSHD, tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    values = hostile(canary)
    workdir = f"{tmp_path}/{PART}"
    data = tmp_path / f"data {PART}"
    data.mkdir()
    (data / f"f {PART}.txt").write_text("payload")
    cluster = SSHCluster(
        _nodes(sshd),
        python=sys.executable,
        workdir=workdir,
        known_hosts=sshd.known_hosts,
        probe_torch=False,
        rdzv_port=free_port(),
    )
    lines: list[str] = []
    async with cluster:
        await cluster.start(tmp_path / "runs" / "hostile")
        paths = await cluster.put_data(data)
        assert Path(paths["a"], f"f {PART}.txt").read_text() == "payload"
        await cluster.run(
            {
                "a": Command(
                    argv=("printf", "%s\\n", *[v for v in values if "\n" not in v]),
                    env={"HOSTILE": values[1]},
                )
            },
            on_line=lambda _node, line, _event: lines.append(line),
            stage="hostile",
        )
        assert Path(cluster.workdir("a")) == Path(workdir)
    assert lines == [v for v in values if "\n" not in v]
    assert not canary.exists()
    assert canaries(tmp_path) == []


async def test_hostile_python_is_a_clear_error_not_a_command(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    canary = tmp_path / "CANARY"
    cluster = SSHCluster(
        _nodes(sshd),
        python=f"{sys.executable}; touch {canary}",
        workdir=str(tmp_path / "wd"),
        known_hosts=sshd.known_hosts,
    )
    with pytest.raises(LaunchError) as caught:
        async with cluster:
            await cluster.start(tmp_path / "runs" / "badpy")
    assert "node a" in caught.value.message and "checking python" in caught.value.message
    assert not canary.exists()


def test_hostile_node_name_is_refused_before_connecting(sshd: LoopbackSSHD) -> None:
    with pytest.raises(ConfigError, match="node name"):
        SSHCluster(_nodes(sshd, name="a; touch /tmp/x"), known_hosts=sshd.known_hosts)

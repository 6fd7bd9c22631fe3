"""A real OpenSSH server on loopback (127.0.0.2 and 127.0.0.3) for the SSH cluster tests.

Debian's ``/usr/sbin/sshd`` is started by the test session with a temporary config, host key,
user key, authorized_keys and known_hosts, all in a temporary folder; options are chosen so that
it also runs as a non-root user (``UsePAM no``, ``StrictModes no``, its pid file in the folder).
Tests that need it are skipped with the reason when sshd or ssh-keygen is not installed.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
HOSTS = ("127.0.0.2", "127.0.0.3")


@dataclass(frozen=True)
class LoopbackSSHD:
    """The running server and the files a client needs."""

    hosts: tuple[str, ...]
    """Addresses sshd listens on (one per test node)."""
    port: int
    """Port on every address."""
    user: str
    """The user the tests log in as (the one running the tests)."""
    key: Path
    """Private key accepted by the server."""
    known_hosts: Path
    """known_hosts with the server's host key for every address."""
    folder: Path
    """Temporary folder holding config, keys and the server log."""
    log: Path
    """sshd's log (``-E``), useful when a test fails."""


def _keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sentitop-test", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip()


def _free_port(hosts: tuple[str, ...]) -> int:
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind((hosts[0], 0))
            port: int = sock.getsockname()[1]
        try:
            for host in hosts[1:]:
                with socket.socket() as other:
                    other.bind((host, port))
        except OSError:
            continue
        return port
    raise RuntimeError("no port free on every loopback address")


def _banner(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            return sock.recv(8).startswith(b"SSH-")
    except OSError:
        return False


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackSSHD]:
    """An sshd on 127.0.0.2 and 127.0.0.3 accepting the test key for the current user."""
    if not os.access(SSHD, os.X_OK) or shutil.which("ssh-keygen") is None:
        pytest.skip(f"{SSHD} or ssh-keygen not installed (apt-get install openssh-server)")
    folder = tmp_path_factory.mktemp("sshd")
    host_pub = _keygen(folder / "host_ed25519")
    user_pub = _keygen(folder / "user_ed25519")
    (folder / "authorized_keys").write_text(user_pub + "\n")
    port = _free_port(HOSTS)
    known_hosts = folder / "known_hosts"
    key_part = " ".join(host_pub.split()[:2])
    known_hosts.write_text("".join(f"[{h}]:{port} {key_part}\n" for h in HOSTS))
    user = getpass.getuser()
    config = folder / "sshd_config"
    config.write_text(
        "\n".join(
            [
                *(f"ListenAddress {h}:{port}" for h in HOSTS),
                f"HostKey {folder / 'host_ed25519'}",
                f"PidFile {folder / 'sshd.pid'}",
                f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                f"AllowUsers {user}",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "UsePAM no",
                "StrictModes no",
                "Subsystem sftp internal-sftp",
                "MaxSessions 64",
                "MaxStartups 64:30:128",
                "LogLevel VERBOSE",
                "",
            ]
        )
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
    log = folder / "sshd.log"
    proc = subprocess.Popen(
        [SSHD, "-D", "-f", str(config), "-E", str(log)], stdin=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while not all(_banner(h, port) for h in HOSTS):
            if proc.poll() is not None or time.monotonic() > deadline:
                text = log.read_text() if log.exists() else ""
                pytest.fail(f"sshd did not start (exit {proc.poll()}):\n{text[-2000:]}")
            time.sleep(0.1)
        yield LoopbackSSHD(HOSTS, port, user, folder / "user_ed25519", known_hosts, folder, log)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

"""moto in server mode (a real HTTP endpoint on 127.0.0.1) for EC2, EMR, S3 and IAM tests."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

FAKE_KEY_ID = "AKIASENTITOPFAKEKEY7"
FAKE_SECRET = "sentitopFakeSecretDoNotLeak0123456789abcd"
FAKE_TOKEN = "sentitopFakeSessionTokenDoNotLeak"
REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    """URL of a moto server started once for the session on a free loopback port."""
    from moto.server import ThreadedMotoServer

    # mrjob attaches AWS's managed EMR policies to the roles it creates; moto loads them on demand
    os.environ["MOTO_IAM_LOAD_MANAGED_POLICIES"] = "true"
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def aws_env(moto_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path_factory) -> str:
    """Fake credentials in the standard chain and the endpoint override; the moto URL.

    moto's state is shared by the session's tests (resetting costs seconds of EC2 set-up
    each time), so every test works under its own run id and looks only at what it tagged.
    """
    empty = tmp_path_factory.mktemp("awsconfig") / "none"
    empty.write_text("")
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", FAKE_TOKEN)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("SENTITOP_AWS_ENDPOINT_URL", moto_url)
    return moto_url


@pytest.fixture
def run_id() -> str:
    """A run id of this test alone."""
    return f"test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def ec2(aws_env: str):
    """An EC2 client made by the project's own factory (so it talks to moto)."""
    from remote import aws

    return aws.client("ec2", REGION)


@pytest.fixture
def ami() -> str:
    """An image id (moto's server does not check that images exist)."""
    return "ami-03cf127a"


def running_tagged(ec2, run_id: str) -> list[str]:
    """Ids of pending/running instances tagged with ``run_id``."""
    from remote.clusters.ec2_fleet import describe_tagged

    return [i["InstanceId"] for i in describe_tagged(ec2, run_id, ("pending", "running"))]


@pytest.fixture
async def ssh_banner() -> AsyncIterator[tuple[str, int]]:
    """A loopback TCP server that greets like sshd (and does nothing else); its (host, port)."""

    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.2 fake\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(greet, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[:2]
    server.close()
    await server.wait_closed()


@pytest.fixture
def dead_port() -> tuple[str, int]:
    """A loopback (host, port) where nothing listens (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[:2]


@pytest.fixture
def bucket(aws_env: str) -> str:
    """A fresh S3 bucket of this test (in moto)."""
    from remote import aws

    name = f"sentitop-test-{uuid.uuid4().hex[:8]}"
    aws.client("s3", REGION).create_bucket(Bucket=name)
    return name


def live_clusters(run_id: str) -> list[str]:
    """Ids of EMR clusters tagged with ``run_id`` that are not terminated."""
    from remote import aws
    from remote.emr import live_clusters as live

    return live(aws.client("emr", REGION), run_id)

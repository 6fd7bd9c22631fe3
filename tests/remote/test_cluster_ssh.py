"""SSHCluster against a real OpenSSH server on 127.0.0.2 and 127.0.0.3 (see conftest.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import LaunchError
from engine.events import read_events
from engine.launch import free_port
from remote.clusters import Command, NodeFailedError
from remote.clusters.ssh import SSHCluster, SSHNode, code_bundle
from tests.remote.conftest import LoopbackSSHD

TRAIN_FLAGS = ["--threads", "1", "--batch-size", "32", "--log-every", "2",
               "--checkpoint-every-min", "0", "--no-events-file"]  # fmt: skip


def make_cluster(sshd: LoopbackSSHD, tmp: Path, **options: object) -> SSHCluster:
    nodes = [
        SSHNode(name=name, host=host, port=sshd.port, user=sshd.user, key=str(sshd.key))
        for name, host in zip(("a", "b"), sshd.hosts, strict=True)
    ]
    settings: dict[str, object] = {
        "python": sys.executable,
        "workdir": str(tmp / "workdir"),
        "known_hosts": sshd.known_hosts,
        "rdzv_port": free_port(sshd.hosts[0]),
        "connect_timeout": 10.0,
    }
    settings.update(options)
    return SSHCluster(nodes, **settings)  # type: ignore[arg-type]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """A tiny learnable dataset in the preprocess layout (the training tests' writer)."""
    from tests.train.conftest import write_dataset

    return write_dataset(tmp_path / "dataset", n_train=256, n_test=64, seq_len=12)


async def _train_commands(
    cluster: SSHCluster, dataset: Path, epochs: int, *extra: str
) -> dict[str, Command]:
    """Copy the dataset to the nodes; launcher commands running ``engine.sentiment.train`` on it."""
    paths = await cluster.put_data(dataset)
    flags = ["--run-dir", "train", "--epochs", str(epochs), *TRAIN_FLAGS, *extra]
    args = {node: ["--data", paths[node], *flags] for node in cluster.nodes}
    return cluster.rank_commands("engine.sentiment.train", args)


@pytest.mark.slow
@pytest.mark.timeout(900)  # torch starts 4 times; slow on a busy 2-core machine
async def test_two_node_training_over_ssh_end_to_end(
    sshd: LoopbackSSHD, tmp_path: Path, dataset: Path
) -> None:
    run_dir = tmp_path / "runs" / "ssh-run-1"
    seen: list[tuple[str, str, bool]] = []
    async with make_cluster(sshd, tmp_path) as cluster:
        await cluster.start(run_dir)
        commands = await _train_commands(cluster, dataset, epochs=2)
        results = await cluster.run(
            commands, on_line=lambda node, line, event: seen.append((node, line, event is not None))
        )
        assert cluster.rank0_node == "a"  # c10d orders nodes by address: 127.0.0.2 first
        fetched = await cluster.fetch(cluster.rank0_node, "train", run_dir / "train")
        remote_data = {n: Path(p) for n, p in (await cluster.put_data(dataset)).items()}
        code_dir = Path(cluster.code_env("b")["PYTHONPATH"])
    assert {r.exit_code for r in results.values()} == {0}
    events = list(read_events(run_dir / "events.jsonl"))
    epochs = [e for e in events if e["type"] == "epoch"]
    assert [(e["node"], e["epoch"]) for e in epochs] == [("a", 0), ("a", 1)]
    (start,) = [e for e in events if e["type"] == "train_start" and e.get("rank") == 0]
    assert start["world_size"] == 2  # one rank per node, joined over the rendezvous
    assert {e["rank"] for e in events if e["type"] == "phase"} == {0, 1}
    assert [(e["node"], e["status"]) for e in events if e["type"] == "node"] == [
        ("a", "running"), ("b", "running"), ("a", "done"), ("b", "done"),
    ]  # fmt: skip
    # the data reached every node intact, and the checkpoint came back from rank 0's node
    for node in ("a", "b"):
        copied = remote_data[node] / "dataset.h5"
        assert copied.read_bytes() == (dataset / "dataset.h5").read_bytes()
    assert (fetched / "checkpoints" / "latest.pt").stat().st_size > 0
    # every line is in the node's log; events were told apart from log lines
    for node in ("a", "b"):
        log = (run_dir / "logs" / f"{node}.log").read_text()
        assert "-m engine.launch" in log  # the note of what each node started
        assert all(line in log for n, line, _ in seen if n == node)
    assert any(is_event for n, _, is_event in seen if n == "a")
    assert (run_dir / "events.jsonl").stat().st_mode & 0o777 == 0o600
    # the engine package arrived whole: its content digest names its folder on the node
    assert code_bundle(code_dir / "engine")[0] == code_dir.name
    assert (code_dir / "engine" / "sentiment" / "train.py").is_file()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def _group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


async def _wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout} s")
        await asyncio.sleep(0.2)


def _training_worker(node: str) -> int | None:
    """Pid of the ``engine.sentiment.train`` rank (not the node's launcher) of ``node`` here."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            f"SENTITOP_NODE={node}".encode() in environ
            and b"engine.sentiment.train" in cmdline
            and b"engine.launch" not in cmdline
        ):
            return int(entry.name)
    return None


@pytest.mark.slow
@pytest.mark.timeout(900)  # torch starts 4 times; slow on a busy 2-core machine
async def test_killing_one_nodes_training_process_mid_epoch_stops_every_node_then_resume(
    sshd: LoopbackSSHD, tmp_path: Path, dataset: Path
) -> None:
    run_dir = tmp_path / "runs" / "ssh-kill"
    checkpoints: list[dict] = []
    mid_epoch = asyncio.Event()

    def on_line(node: str, line: str, event: dict | None) -> None:
        if event is not None and event["type"] == "checkpoint":
            checkpoints.append(event)
        elif event is not None and event["type"] == "step" and checkpoints:
            mid_epoch.set()  # a step after a checkpoint: inside an epoch that is not saved

    async with make_cluster(sshd, tmp_path) as cluster:
        await cluster.start(run_dir)
        commands = await _train_commands(cluster, dataset, epochs=500)
        task = asyncio.create_task(cluster.run(commands, on_line=on_line))
        waiter = asyncio.ensure_future(mid_epoch.wait())
        await asyncio.wait([task, waiter], timeout=180, return_when=asyncio.FIRST_COMPLETED)
        assert not task.done(), task.result()
        assert mid_epoch.is_set(), "no step after a checkpoint within 180 s"
        dirs = {n: Path(cluster.node_dir(n)) for n in cluster.nodes}
        groups = {n: int((dirs[n] / "train.pid").read_text()) for n in cluster.nodes}
        assert all(_group_pids(pg) for pg in groups.values())
        workers = {n: _training_worker(n) for n in cluster.nodes}
        assert None not in workers.values()
        os.kill(workers["b"], signal.SIGKILL)  # type: ignore[arg-type]
        killed_at = time.monotonic()
        with pytest.raises(NodeFailedError) as caught:
            await asyncio.wait_for(task, 30)
        stopped_after = time.monotonic() - killed_at
        # the launcher's view (error raised) and the machine's (no process left) within 10 s
        while any(_group_pids(pg) for pg in groups.values()) and time.monotonic() < killed_at + 10:
            await asyncio.sleep(0.1)
        pids_left = {n: _group_pids(pg) for n, pg in groups.items()}
        worker_a_alive = _alive(workers["a"])  # type: ignore[arg-type]
        # the same nodes continue from rank 0's last checkpoint and train one more epoch
        saved = max(e["epoch"] for e in checkpoints)
        resumed = await _train_commands(cluster, dataset, saved + 1, "--resume")
        results = await cluster.run(resumed)
    assert caught.value.node == "b"
    assert caught.value.node_exit_code != 0
    assert "node b (" in caught.value.message and "SIGKILL" in caught.value.message
    assert stopped_after < 10
    assert pids_left == {"a": [], "b": []}
    assert not worker_a_alive  # the rank left the group (own session): killed by token
    events = list(read_events(run_dir / "events.jsonl"))
    # the launcher's verdict (rank 0 may also report its own lost-peer error, with a rank)
    errors = [e for e in events if e["type"] == "error" and "rank" not in e]
    assert [e["node"] for e in errors] == ["b"]
    assert any("SIGKILL" in line for line in errors[0]["tail"])
    assert {r.exit_code for r in results.values()} == {0}
    starts = [i for i, e in enumerate(events) if e["type"] == "train_start"]
    assert len(starts) == 2 and events[starts[1]]["resumed_epoch"] == saved >= 1
    assert [e["epoch"] for e in events[starts[1] :] if e["type"] == "epoch"] == [saved]


async def test_unknown_host_key_is_one_clear_error(sshd: LoopbackSSHD, tmp_path: Path) -> None:
    other = tmp_path / "known_hosts"
    other.write_text(
        "".join(
            f"[{h}]:{sshd.port} ssh-ed25519 "
            "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
            for h in sshd.hosts
        )
    )
    cluster = make_cluster(sshd, tmp_path, known_hosts=other)
    with pytest.raises(LaunchError) as caught:
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")
    text = caught.value.user_message()
    assert "node a: the host key of 127.0.0.2" in text
    assert "not trusted" in text and str(other) in text
    assert "ssh-keyscan" in text
    assert "also failing: node b" in text
    assert "Traceback" not in text


async def test_missing_known_hosts_file_is_a_clear_error(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    cluster = make_cluster(sshd, tmp_path, known_hosts=tmp_path / "nope")
    with pytest.raises(LaunchError, match=r"known_hosts file .*nope does not exist"):
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")


async def test_host_key_check_can_be_switched_off_explicitly(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    cluster = make_cluster(
        sshd, tmp_path, known_hosts=empty, check_host_keys=False, probe_torch=False
    )
    async with cluster:
        await cluster.start(tmp_path / "runs" / "r")
        results = await cluster.run({"a": Command(argv=("true",))}, stage="probe")
    assert results["a"].exit_code == 0


async def test_refused_auth_is_one_clear_error(sshd: LoopbackSSHD, tmp_path: Path) -> None:
    import subprocess

    stranger = tmp_path / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    cluster = make_cluster(sshd, tmp_path)
    cluster = SSHCluster(
        [dataclasses.replace(cluster.node(n), key=str(stranger)) for n in cluster.nodes],
        python=sys.executable,
        known_hosts=sshd.known_hosts,
    )
    with pytest.raises(LaunchError) as caught:
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")
    text = caught.value.user_message()
    assert f"node a: {sshd.user}@127.0.0.2:{sshd.port} refused authentication" in text
    assert "authorized_keys" in text


async def test_unreachable_host_is_one_clear_error(sshd: LoopbackSSHD, tmp_path: Path) -> None:
    port = free_port("127.0.0.3")  # nothing listens there
    nodes = [
        SSHNode(name="a", host="127.0.0.2", port=sshd.port, user=sshd.user, key=str(sshd.key)),
        SSHNode(name="b", host="127.0.0.3", port=port, user=sshd.user, key=str(sshd.key)),
    ]
    cluster = SSHCluster(nodes, known_hosts=sshd.known_hosts, connect_timeout=5)
    open_at_teardown: list[str] = []
    disconnect = cluster._disconnect

    async def spy() -> None:
        open_at_teardown.extend(cluster._conns)
        await disconnect()

    cluster._disconnect = spy  # type: ignore[method-assign]
    with pytest.raises(LaunchError) as caught:
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")
    assert open_at_teardown == ["a"]  # the node that answered was connected ...
    assert cluster._conns == {}  # ... and is disconnected by the teardown
    assert caught.value.message.startswith(f"node b: cannot reach 127.0.0.3:{port}")
    assert "also failing" not in caught.value.message
    assert "sshd runs there" in (caught.value.hint or "")


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never says anything (a hung host)."""
    server = socket.socket()
    server.bind(("127.0.0.2", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


async def _start_one_node(
    sshd: LoopbackSSHD, tmp_path: Path, port: int, timeout: float
) -> LaunchError:
    """The LaunchError of starting a one-node cluster whose node listens at 127.0.0.2:port."""
    nodes = [SSHNode(name="a", host="127.0.0.2", port=port, user=sshd.user, key=str(sshd.key))]
    cluster = SSHCluster(nodes, known_hosts=sshd.known_hosts, connect_timeout=timeout)
    with pytest.raises(LaunchError) as caught:
        async with cluster:
            await cluster.start(tmp_path / "runs" / "r")
    return caught.value


async def test_host_that_never_answers_times_out_clearly(
    sshd: LoopbackSSHD, tmp_path: Path, silent_server: int
) -> None:
    started = time.monotonic()
    error = await _start_one_node(sshd, tmp_path, silent_server, 1.5)
    assert "no SSH answer within 1.5 s" in error.message
    assert time.monotonic() - started < 10


@pytest.fixture
def closing_server() -> Iterator[int]:
    """A TCP port that accepts each connection and closes it at once (another service, or an
    sshd refusing this address before the handshake)."""
    server = socket.socket()
    server.bind(("127.0.0.2", 0))
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    server.close()


async def test_a_host_that_closes_the_connection_gets_a_hint(
    sshd: LoopbackSSHD, tmp_path: Path, closing_server: int
) -> None:
    """ "SSH to … failed: Connection lost" came with no hint, unlike every other SSH error."""
    error = await _start_one_node(sshd, tmp_path, closing_server, 5)
    message, hint = error.message, error.hint or ""
    if message.endswith("failed: Connection lost"):  # closed cleanly after the handshake began
        assert "the port is sshd's" in hint
    else:  # closed while the client's first bytes were unread: a reset, as a refused port
        assert "Connection reset" in message and "sshd runs there" in hint


async def test_cancelling_a_run_kills_the_remote_process_group(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    cluster = make_cluster(sshd, tmp_path, probe_torch=False)
    async with cluster:
        await cluster.start(tmp_path / "runs" / "r")
        marker = Path(cluster.node_dir("b")) / "child.pid"
        script = f"sleep 300 & echo $! > {marker}; wait"
        task = asyncio.create_task(
            cluster.run(
                {
                    "a": Command(argv=("sleep", "300")),
                    "b": Command(argv=("sh", "-c", script)),
                },
                stage="sleepy",
            )
        )
        await _wait_for(marker, 30)
        child = int(marker.read_text())
        assert _alive(child)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < 10
    assert not _alive(child)


async def test_lost_connection_lets_the_watchdog_kill_the_remote_group(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    cluster = make_cluster(sshd, tmp_path, probe_torch=False)
    async with cluster:
        await cluster.start(tmp_path / "runs" / "r")
        marker = Path(cluster.node_dir("a")) / "child.pid"
        script = f"sleep 300 & echo $! > {marker}; wait"
        task = asyncio.create_task(
            cluster.run({"a": Command(argv=("sh", "-c", script))}, stage="orphan")
        )
        await _wait_for(marker, 30)
        child = int(marker.read_text())
        cluster._conns["a"].abort()  # as if the launcher vanished: no kill command is sent
        with pytest.raises(NodeFailedError, match=r"lost its connection|exited"):
            await asyncio.wait_for(task, 20)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert not _alive(child)


LAUNCHER = """
import asyncio, sys
from remote.clusters import Command
from remote.clusters.ssh import SSHCluster, SSHNode, code_bundle

host1, host2, port, user, key, known_hosts, workdir, run_dir = sys.argv[1:]

async def main():
    nodes = [SSHNode(name=n, host=h, port=int(port), user=user, key=key)
             for n, h in (("a", host1), ("b", host2))]
    cluster = SSHCluster(nodes, workdir=workdir, known_hosts=known_hosts, probe_torch=False)
    async with cluster:
        await cluster.start(run_dir)
        script = 'setsid sleep 300 & echo $! > "$(pwd)/child.pid"; wait'
        await cluster.run({n: Command(argv=("sh", "-c", script)) for n in cluster.nodes},
                          stage="sigint")

asyncio.run(main())
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_interrupted_or_killed_launcher_leaves_nothing_on_the_nodes(
    sshd: LoopbackSSHD, tmp_path: Path, sig: signal.Signals
) -> None:
    """Ctrl-C stops the nodes through teardown; kill -9 through the watchdogs."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER)
    workdir, run_dir = tmp_path / "wd", tmp_path / "runs" / "sig"
    argv = [sys.executable, str(launcher), *sshd.hosts, str(sshd.port), sshd.user,
            str(sshd.key), str(sshd.known_hosts), str(workdir), str(run_dir)]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    markers = [workdir / "runs" / "sig" / n / "child.pid" for n in ("a", "b")]
    try:
        deadline = time.monotonic() + 60
        while not all(m.exists() and m.read_text().strip() for m in markers):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "node commands did not start"
            time.sleep(0.1)
        children = [int(m.read_text()) for m in markers]
        assert all(_alive(pid) for pid in children)
        proc.send_signal(sig)
        proc.wait(20)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [pid for pid in children if _alive(pid)] == []
        assert proc.returncode != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_fetching_rank_0s_train_folder_into_the_one_the_checkpoints_made(
    sshd: LoopbackSSHD, tmp_path: Path
) -> None:
    """The run's train/ folder exists here once a checkpoint was copied home; sftp then put
    rank 0's train/ inside it (train/train/model.json), where eval and predict did not look:
    a model trained on SSH nodes could not be used by its run id."""
    run_dir = tmp_path / "runs" / "r"
    kept = run_dir / "train" / "checkpoints"
    kept.mkdir(parents=True)
    (kept / "latest.pt").write_bytes(b"older")
    (run_dir / "train" / "local-only.txt").write_text("kept")
    async with make_cluster(sshd, tmp_path) as cluster:
        await cluster.start(run_dir)
        node_train = Path(cluster.node_dir("a")) / "train"
        (node_train / "checkpoints").mkdir(parents=True)
        (node_train / "checkpoints" / "latest.pt").write_bytes(b"newer")
        (node_train / "model.json").write_text("{}")
        fetched = await cluster.fetch("a", "train", run_dir / "train")
    assert fetched == run_dir / "train"
    assert sorted(p.name for p in fetched.iterdir()) == [
        "checkpoints",
        "local-only.txt",
        "model.json",
    ]
    assert (kept / "latest.pt").read_bytes() == b"newer"
    assert [p.name for p in run_dir.iterdir() if p.name.startswith(".")] == []  # no landing left


async def test_init_embeddings_folder_reaches_each_node_as_its_own_copy(
    sshd: LoopbackSSHD, tmp_path: Path, dataset: Path
) -> None:
    """A profile's train.model.init_embeddings names a folder on this machine: every node's
    config must name the node's copy, not a path that exists only here."""
    import json

    from engine.config import ModelConfig, TrainConfig
    from remote.datasets import PreparedData
    from remote.train_stage import TrainContext, _commands
    from tests.train.test_init_embeddings import write_embed_run

    emb = tmp_path / "here" / "emb-run"
    write_embed_run(emb, ["good", "bad"], dim=4)
    train = TrainConfig(data_dir="", run_dir="", model=ModelConfig(init_embeddings=str(emb)))
    run_dir = tmp_path / "runs" / "r"
    run_dir.mkdir(parents=True)
    ctx = TrainContext(None, train, run_dir, None, None, None, None, None, None)  # type: ignore[arg-type]
    async with make_cluster(sshd, tmp_path) as cluster:
        await cluster.start(run_dir)
        await _commands(ctx, cluster, PreparedData(dataset, False, {}), resume=False)
    for node in ("a", "b"):
        cfg = json.loads((run_dir / "config" / f"train-{node}.json").read_text())
        copy = Path(cfg["model"]["init_embeddings"])
        assert copy != emb and str(tmp_path / "workdir") in str(copy)
        assert (copy / "embeddings.npy").read_bytes() == (emb / "embeddings.npy").read_bytes()
        assert (copy / "corpus.npz").read_bytes() == (emb / "corpus.npz").read_bytes()
    assert train.model.init_embeddings == str(emb)  # the shared config is left as it was


def test_server_refusing_sftp_gets_a_hint_naming_the_sshd_setting() -> None:
    """OpenSSH without a Subsystem sftp line answers "Session request failed"."""
    import asyncssh

    from remote.clusters.ssh import sftp_failed

    refused = asyncssh.ChannelOpenError(
        asyncssh.OPEN_REQUEST_SESSION_FAILED, "Session request failed"
    )
    error = sftp_failed("node0", "copying code", refused)
    assert "node node0: copying code by SFTP failed: Session request failed" in str(error)
    assert error.hint is not None and "Subsystem sftp" in error.hint
    other = sftp_failed("node0", "copying code", OSError(28, "No space left on device"))
    assert other.hint is None and "No space left" in str(other)


def test_setsids_own_note_about_a_signalled_child_is_dropped() -> None:
    """A budget stop on SSH nodes printed "[node0] setsid: child 14647 did not exit normally:
    Success" (util-linux's words about the program it waited for, not the program's)."""
    from remote.clusters.ssh import without_setsid_note

    note = b"setsid: child 14647 did not exit normally: Success\n"
    assert without_setsid_note(b"epoch 1 done\n" + note + b"bye\n") == b"epoch 1 done\nbye\n"
    assert without_setsid_note(note) == b""
    kept = b"the program said: setsid: child 1 did not exit normally\n"  # not at a line start
    assert without_setsid_note(kept) == kept

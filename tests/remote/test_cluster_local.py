"""LocalCluster and the shared supervision: streams, events, failures, cancellation, teardown."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from engine.errors import LaunchError
from engine.events import read_events
from remote.clusters import Command, LocalCluster, NodeFailedError
from remote.streams import LineSplitter

PY = sys.executable


def py(code: str) -> Command:
    return Command(argv=(PY, "-c", textwrap.dedent(code)))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


async def wait_file(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} did not appear"
        await asyncio.sleep(0.05)
    return path.read_text().strip()


# -- line splitting --------------------------------------------------------------------------


def test_splitter_joins_chunks_and_splits_lines() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"ab") == []
    assert splitter.feed(b"c\r\nde\nf") == ["abc", "de"]
    assert splitter.flush() == ["f"]
    assert splitter.flush() == []


def test_splitter_keeps_multibyte_characters_cut_between_chunks() -> None:
    data = "précis → ok\n".encode()
    splitter = LineSplitter()
    lines = [line for i in range(len(data)) for line in splitter.feed(data[i : i + 1])]
    assert lines == ["précis → ok"]


def test_splitter_cuts_runaway_lines() -> None:
    splitter = LineSplitter(max_line=4)
    assert splitter.feed(b"0123456789") == ["0123", "4567"]
    assert splitter.flush() == ["89"]


# -- running -------------------------------------------------------------------------------------


async def test_lines_are_logged_events_recorded_with_the_node_name(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "local-1"
    seen: list[tuple[str, str, dict | None]] = []

    async def on_line(node: str, line: str, event: dict | None) -> None:
        seen.append((node, line, event))

    async with LocalCluster(["n0"]) as cluster:
        await cluster.start(run_dir)
        results = await cluster.run(
            {
                "n0": py("""
                    import sys
                    print("hello log")
                    print('{"type":"progress","t":1.5,"rank":0,"done":3}', flush=True)
                    print("to stderr", file=sys.stderr)
                    print("no newline at end", end="")
                """)
            },
            on_line=on_line,
        )
    assert results["n0"].exit_code == 0
    assert [line for _, line, _ in seen] == [
        "hello log",
        '{"type":"progress","t":1.5,"rank":0,"done":3}',
        "to stderr",
        "no newline at end",
    ]
    assert [e is not None for _, _, e in seen] == [False, True, False, False]
    events = list(read_events(run_dir / "events.jsonl"))
    progress = [e for e in events if e["type"] == "progress"]
    assert progress == [{"type": "progress", "t": 1.5, "rank": 0, "done": 3, "node": "n0"}]
    assert [(e["node"], e["status"]) for e in events if e["type"] == "node"] == [
        ("n0", "running"),
        ("n0", "done"),
    ]
    log = (run_dir / "logs" / "n0.log").read_text()
    assert "hello log\n" in log and "to stderr\n" in log and "no newline at end\n" in log
    assert (run_dir / "logs" / "n0.log").stat().st_mode & 0o777 == 0o600
    assert cluster.rank0_node == "n0"


async def test_a_failing_node_stops_the_others_and_is_named(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "local-fail"
    pidfile = tmp_path / "sleeper.pid"
    async with LocalCluster(["a", "b"]) as cluster:
        await cluster.start(run_dir)
        started = time.monotonic()
        with pytest.raises(NodeFailedError) as caught:
            await cluster.run(
                {
                    "a": py(f"""
                        import os, time
                        open({str(pidfile)!r}, "w").write(str(os.getpid()))
                        time.sleep(120)
                    """),
                    "b": py(f"""
                        import os, sys, time
                        while not os.path.exists({str(pidfile)!r}):
                            time.sleep(0.05)
                        for i in range(30):
                            print(f"line {{i}}")
                        print("Traceback: boom", flush=True)
                        sys.exit(3)
                    """),
                }
            )
        elapsed = time.monotonic() - started
    error = caught.value
    assert error.node == "b" and error.node_exit_code == 3
    assert error.exit_code == 1  # the command's: a failed run, whatever the node's code
    assert "node b (localhost) exited with code 3 during train" in error.message
    assert "Traceback: boom" in error.message and "line 29" in error.message
    assert "line 5" not in error.message  # only the last lines
    assert error.log_path == run_dir / "logs" / "b.log"
    assert elapsed < 10
    assert not alive(int(pidfile.read_text()))
    errors = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "error"]
    assert [(e["node"], e["tail"][-1]) for e in errors] == [("b", "Traceback: boom")]
    assert error.user_message().startswith("launch failed: node b")


async def test_a_failed_node_shows_its_output_not_its_event_lines(tmp_path: Path) -> None:
    """The error quoted the node log's last lines, mostly raw JSON step events (one 600-character
    line each): the rank's own words (which rank died, how) were pushed out or buried."""
    run_dir = tmp_path / "runs" / "events-tail"
    async with LocalCluster(["a"]) as cluster:
        await cluster.start(run_dir)
        with pytest.raises(NodeFailedError) as caught:
            await cluster.run(
                {
                    "a": py("""
                        import json, sys
                        print("launch: rank 0 pid 1")
                        for i in range(30):
                            print(json.dumps({"type": "step", "t": 1.0, "rank": 0, "step": i}))
                        print(json.dumps({"type": "error", "t": 1.0, "rank": 1,
                                          "message": "rank 1 ran out of memory"}))
                        print("launch failed: rank 1 (pid 7) failed: killed by SIGKILL", flush=True)
                        sys.exit(1)
                    """),
                }
            )
    message = caught.value.message
    assert '"type"' not in message  # no event line
    assert "| launch: rank 0 pid 1" in message  # the output before 30 events is kept
    assert "| [rank 1] error: rank 1 ran out of memory" in message
    assert message.rstrip().endswith("| launch failed: rank 1 (pid 7) failed: killed by SIGKILL")
    steps = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "step"]
    assert len(steps) == 30  # the events themselves are kept where they belong


@pytest.mark.slow
async def test_a_node_whose_rank_crashes_after_it_finished_is_done_with_a_warning(
    tmp_path: Path,
) -> None:
    """The node launcher applies the one teardown rule: rank 1 aborts after its rank_end."""
    run_dir = tmp_path / "runs" / "teardown"
    async with LocalCluster(["a", "b"], nproc=1) as cluster:
        await cluster.start(run_dir)
        results = await cluster.run(cluster.rank_commands("tests.train.crashing_rank", ["after"]))
    assert {r.exit_code for r in results.values()} == {0}
    events = list(read_events(run_dir / "events.jsonl"))
    assert sorted(e["rank"] for e in events if e["type"] == "rank_end") == [0, 1]
    assert not [e for e in events if e["type"] == "error"]
    log = (run_dir / "logs" / "b.log").read_text()
    assert "rank 1 killed by SIGABRT while tearing down, after it finished its work" in log


@pytest.mark.slow
async def test_a_node_whose_rank_crashes_before_it_finished_fails_the_run(
    tmp_path: Path,
) -> None:
    async with LocalCluster(["a"], nproc=2) as cluster:
        await cluster.start(tmp_path / "runs" / "early")
        with pytest.raises(NodeFailedError) as caught:
            await cluster.run(cluster.rank_commands("tests.train.crashing_rank", ["before"]))
    assert caught.value.node_exit_code == 1 and "rank 1" in caught.value.message + "\n".join(
        caught.value.tail
    )


async def test_the_cause_is_named_not_the_node_that_lost_its_peer(tmp_path: Path) -> None:
    async with LocalCluster(["a", "b"]) as cluster:
        await cluster.start(tmp_path / "runs" / "cause")
        with pytest.raises(NodeFailedError) as caught:
            await cluster.run(
                {
                    "a": py("""
                        import sys
                        print("RuntimeError: Connection reset by peer", flush=True)
                        sys.exit(1)
                    """),
                    "b": py("""
                        import sys, time
                        time.sleep(0.3)
                        print("CUDA error: out of memory", flush=True)
                        sys.exit(1)
                    """),
                }
            )
    assert caught.value.node == "b"
    assert "also failed after it: a" in caught.value.message


async def test_cancelling_the_run_kills_the_whole_process_group(tmp_path: Path) -> None:
    child_pid = tmp_path / "grandchild.pid"
    async with LocalCluster(["n0"]) as cluster:
        await cluster.start(tmp_path / "runs" / "cancel")
        script = f"sleep 300 & echo $! > {child_pid}; wait"
        task = asyncio.create_task(cluster.run({"n0": Command(argv=("sh", "-c", script))}))
        grandchild = int(await wait_file(child_pid))
        assert alive(grandchild)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not alive(grandchild)


class SlowSpawnCluster(LocalCluster):
    """A LocalCluster whose process creation is still in progress when the test says so."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(names)
        self.spawning = asyncio.Event()
        self.release = asyncio.Event()
        self.pids: list[int] = []

    async def _spawn(self, node: str, command: Command, stage: str, token: str) -> Any:
        self.spawning.set()
        await self.release.wait()
        proc = await super()._spawn(node, command, stage, token)
        self.pids.append(proc.proc.pid)  # type: ignore[attr-defined]
        return proc


async def test_a_cancel_during_process_creation_still_stops_that_process(tmp_path: Path) -> None:
    """Ctrl-C while asyncio creates the process: creation ends, then teardown kills it."""
    cluster = SlowSpawnCluster(["n0"])
    async with cluster:
        await cluster.start(tmp_path / "runs" / "cancel-spawn")
        task = asyncio.create_task(cluster.run({"n0": Command(argv=("sleep", "300"))}))
        await cluster.spawning.wait()
        task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done()  # the creation is finished first, not abandoned
        cluster.release.set()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)
        (pid,) = cluster.pids
        assert not alive(pid)  # killed by run()'s teardown, not left for the watchdog


async def test_stopping_reaches_children_that_left_the_process_group(tmp_path: Path) -> None:
    """the launcher starts ranks in sessions of their own; the kill token still finds them."""
    marker = tmp_path / "escaped.pid"
    async with LocalCluster(["n0"]) as cluster:
        await cluster.start(tmp_path / "runs" / "escape")
        script = f"setsid sleep 300 & echo $! > {marker}; wait"
        task = asyncio.create_task(cluster.run({"n0": Command(argv=("sh", "-c", script))}))
        escaped = int(await wait_file(marker))
        assert os.getpgid(escaped) != os.getpgid(os.getpid())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    deadline = time.monotonic() + 10  # SIGKILL was sent; its delivery is asynchronous
    while alive(escaped) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not alive(escaped)


async def test_an_exception_inside_async_with_stops_every_node(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    cluster = LocalCluster(["n0"])
    with pytest.raises(RuntimeError, match="operator bug"):
        async with cluster:
            await cluster.start(tmp_path / "runs" / "exc")
            task = asyncio.create_task(
                cluster.run({"n0": Command(argv=("sh", "-c", f"echo $$ > {marker}; sleep 300"))})
            )
            pid = int(await wait_file(marker))
            raise RuntimeError("operator bug")
    assert task.done()
    with pytest.raises(LaunchError, match="stopped: the cluster is shutting down"):
        task.result()
    assert not alive(pid)


async def test_ignoring_sigterm_gets_sigkill_after_the_grace(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    async with LocalCluster(["n0"]) as cluster:
        await cluster.start(tmp_path / "runs" / "stubborn")
        script = f"trap '' TERM; echo $$ > {marker}; while :; do sleep 0.1; done"
        task = asyncio.create_task(cluster.run({"n0": Command(argv=("sh", "-c", script))}))
        pid = int(await wait_file(marker))
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < 8
    assert not alive(pid)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_an_interrupted_or_killed_launcher_leaves_no_node_process(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Ctrl-C: teardown stops the node; kill -9 of sentitop: the wrapper's watchdog does."""
    marker = tmp_path / "pid"
    launcher = tmp_path / "launcher.py"
    launcher.write_text(
        textwrap.dedent(f"""
        import asyncio
        from remote.clusters import Command, LocalCluster

        async def main():
            async with LocalCluster(["n0"]) as cluster:
                await cluster.start({str(tmp_path / "runs" / "orphan")!r})
                await cluster.run({{"n0": Command(argv=("sh", "-c",
                    "setsid sleep 300 & echo $! > {marker}; wait"))}})

        asyncio.run(main())
        """)
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [PY, str(launcher)], cwd=root, env={**os.environ, "PYTHONPATH": str(root)}
    )
    try:
        deadline = time.monotonic() + 30
        while not (marker.exists() and marker.read_text().strip()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        orphan = int(marker.read_text())
        assert alive(orphan)
        proc.send_signal(sig)
        proc.wait(20)
        assert proc.returncode != 0
        deadline = time.monotonic() + 10
        while alive(orphan) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(orphan)
    finally:
        if proc.poll() is None:
            proc.kill()


async def test_run_before_start_and_unknown_nodes_are_errors(tmp_path: Path) -> None:
    cluster = LocalCluster(["n0"])
    with pytest.raises(LaunchError, match=r"start\(run_dir\) was not called"):
        await cluster.run({"n0": Command(argv=("true",))})
    async with cluster:
        await cluster.start(tmp_path / "runs" / "x")
        with pytest.raises(LaunchError, match="no such node"):
            await cluster.run({"zz": Command(argv=("true",))})


async def test_missing_program_fails_the_node_with_its_message(tmp_path: Path) -> None:
    async with LocalCluster(["n0"]) as cluster:
        await cluster.start(tmp_path / "runs" / "missing")
        with pytest.raises(NodeFailedError) as caught:
            await cluster.run({"n0": Command(argv=("/nonexistent/python", "-V"))})
    assert caught.value.node_exit_code == 127 and caught.value.exit_code == 1
    assert "/nonexistent/python" in caught.value.message


async def test_put_data_and_fetch_are_local_paths(tmp_path: Path) -> None:
    data = tmp_path / "ds"
    data.mkdir()
    async with LocalCluster(["a", "b"]) as cluster:
        run_dir = tmp_path / "runs" / "files"
        await cluster.start(run_dir)
        assert await cluster.put_data(data) == {"a": str(data), "b": str(data)}
        (run_dir / "ckpt").mkdir()
        (run_dir / "ckpt" / "last.pt").write_text("x")
        got = await cluster.fetch("a", "ckpt", tmp_path / "out")
        assert (got / "last.pt").read_text() == "x"
        with pytest.raises(LaunchError, match="does not exist"):
            await cluster.put_data(tmp_path / "nope")


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_two_local_nodes_rendezvous_through_the_launcher(tmp_path: Path) -> None:
    code = tmp_path / "mod"
    code.mkdir()
    (code / "probe_ar.py").write_text(
        textwrap.dedent("""
        import json, os, sys, time
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        value = torch.tensor([dist.get_rank() + 1.0])
        dist.all_reduce(value)
        print(json.dumps({"type": "progress", "t": time.time(), "rank": dist.get_rank(),
                          "sum": value.item(), "env_node": os.environ["SENTITOP_NODE"]}))
        dist.barrier()  # as ranks end: meet, tear down, skip the interpreter's teardown (gloo)
        dist.destroy_process_group()
        sys.stdout.flush()
        os._exit(0)
        """)
    )
    run_dir = tmp_path / "runs" / "two-nodes"
    async with LocalCluster(["a", "b"]) as cluster:
        await cluster.start(run_dir)
        commands = cluster.rank_commands("probe_ar", [], env={"PYTHONPATH": str(code)})
        assert "--master" in commands["a"].argv
        results = await cluster.run(commands)
    assert {r.exit_code for r in results.values()} == {0}
    events = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "progress"]
    assert sorted((e["node"], e["env_node"], e["rank"], e["sum"]) for e in events) == [
        ("a", "a", 0, 3.0),  # ranks follow the node order: the first node holds rank 0
        ("b", "b", 1, 3.0),
    ]


def test_single_node_runs_its_ranks_through_the_launcher() -> None:
    cluster = LocalCluster(["local"], nproc=2)
    command = cluster.rank_commands("engine.sentiment.train", ["--config", "c.json"])["local"]
    argv = list(command.argv)
    assert argv[:3] == [PY, "-m", "engine.launch"]
    assert "--master" not in argv and argv[argv.index("--nproc") + 1] == "2"
    assert argv[-3:] == ["engine.sentiment.train", "--config", "c.json"]
    assert command.env["SENTITOP_NODE"] == "local"


@pytest.mark.parametrize("init", ["svd", "folder"])
async def test_node_configs_name_the_init_embeddings_each_node_reads(
    tmp_path: Path, init: str
) -> None:
    """`svd` is not a folder (rank 0 computes it): it is passed on as is, never copied."""
    import json

    from engine.config import ModelConfig, TrainConfig
    from remote.datasets import PreparedData
    from remote.train_stage import TrainContext, _commands
    from tests.train.conftest import write_dataset
    from tests.train.test_init_embeddings import write_embed_run

    data = write_dataset(tmp_path / "data", n_train=32, n_test=8)
    if init == "folder":
        write_embed_run(tmp_path / "emb", ["good"], dim=4)
    value = "svd" if init == "svd" else str(tmp_path / "emb")
    train = TrainConfig(data_dir="", run_dir="", model=ModelConfig(init_embeddings=value))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ctx = TrainContext(None, train, run_dir, None, None, None, None, None, None)  # type: ignore[arg-type]
    async with LocalCluster(["a", "b"]) as cluster:
        await cluster.start(run_dir)
        await _commands(ctx, cluster, PreparedData(data, False, {}), resume=False)
    for node in ("a", "b"):
        cfg = json.loads((run_dir / "config" / f"train-{node}.json").read_text())
        assert cfg["model"]["init_embeddings"] == value  # local nodes read the folder in place


async def test_a_node_whose_rank_was_sigkilled_says_which_and_why(tmp_path: Path) -> None:
    """The real launcher, a rank killed by SIGKILL: the error read "node n0 exited with code 1"
    (the launcher's own code), with the rank and the signal only in the log's last lines."""
    run_dir = tmp_path / "runs" / "killed"
    argv = (PY, "-m", "engine.launch", "--nproc", "2", "tests.sigkill_rank")
    launcher = Command(argv=argv, cwd=str(Path(__file__).parents[2]))
    async with LocalCluster(["n0"]) as cluster:
        await cluster.start(run_dir)
        with pytest.raises(NodeFailedError) as caught:
            await cluster.run({"n0": launcher})
    error = caught.value
    assert error.node_exit_code == 1
    assert "node n0 (localhost) exited with code 1 (rank 1 killed by SIGKILL)" in error.message
    assert "out-of-memory killer" in (error.hint or "")

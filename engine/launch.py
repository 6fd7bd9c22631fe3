"""The one launcher of ranks: start a node's ranks, stream their output, stop all when one fails.

:func:`launch_ranks` runs any ``python -m MODULE ...`` as N ranks (each workload's local
launcher is a thin layer on it, e.g. :func:`engine.sentiment.train.launch_local`). Each rank
gets the environment torchrun gives (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT), so one entry point serves both. On a cluster every node runs
``python -m engine.launch`` (see :func:`main`) for its share of the ranks — static rendezvous:
global rank = the node's rank offset + local rank, rank 0 on the first node hosting the store.
We supervise the processes ourselves rather than through torchrun's elastic agent to report
exactly which rank failed and to stop the others within a couple of seconds. Each rank runs in
its own session so its loader workers die with it. A rank that dies after its ``rank_end``
event (work done, final barrier met) crashed while tearing down: the run's results are
complete, so that is a warning line, not a failed run — the one rule for teardown crashes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO

from engine.errors import ConfigError, LaunchError
from engine.fork_guard import ForkGuard
from engine.preprocess.budget import available_memory
from engine.rank_malloc import add_malloc_tunables

LineHandler = Callable[[int, str, str], None]
"""Called with (rank, "stdout"|"stderr", line without newline) for every output line."""

_POLL_S = 0.05
_CAUSE_WAIT_S = 5.0
"""After a rank exits non-zero, how long to wait for a peer still running to die by a signal
(the cause, then named instead)."""
_DYING_WAIT_S = 60.0
"""How long to wait instead for a peer whose stderr already shows a fatal error (its stacks
being written as it aborts)."""
_DYING = ("Fatal Python error", "terminate called")
"""Stderr text of a rank that is aborting."""
_TAIL = 30
_RANK_END = '{"type":"rank_end"'


@dataclass(frozen=True, slots=True)
class StopFirst:
    """What a first Ctrl-C does before the ranks are stopped (a second one stops them at once):
    ``ask()`` (e.g. request a checkpoint), then wait until ``served()``, every rank has ended,
    or ``wait_s`` passed. ``said`` is printed (stderr, as a launch line) when it starts."""

    ask: Callable[[], None]
    served: Callable[[], bool]
    wait_s: float
    said: str


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host`` (for the rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def default_threads(local_world: int) -> int:
    """CPU cores available to this process divided by the ranks on this node (at least 1)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // max(1, local_world))


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """Where this node's ranks sit in the whole job (static rendezvous)."""

    node_rank: int = 0
    """This node's index among the nodes (0 hosts global rank 0 and the store)."""
    rank_offset: int = 0
    """Global rank of this node's local rank 0 (ranks of the nodes before it)."""
    world_size: int | None = None
    """Ranks over all nodes (None: this node's ranks only)."""
    master_addr: str = "127.0.0.1"
    """Address of the first node, where rank 0 listens."""
    master_port: int | None = None
    """Port of rank 0's store (None: a free port here, for one node)."""


def rank_environ(
    rank: int,
    nproc: int,
    port: int,
    threads: int,
    base: dict[str, str] | None = None,
    placement: Placement | None = None,
) -> dict[str, str]:
    """The torchrun-style environment of local rank ``rank`` of ``nproc`` on this node, with
    the ranks' malloc settings."""
    where = placement or Placement()
    env = dict(os.environ if base is None else base)
    env.update(
        RANK=str(where.rank_offset + rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(where.world_size or nproc),
        LOCAL_WORLD_SIZE=str(nproc),
        GROUP_RANK=str(where.node_rank),
        MASTER_ADDR=where.master_addr,
        MASTER_PORT=str(port),
        OMP_NUM_THREADS=str(threads),
        PYTHONUNBUFFERED="1",
    )
    add_malloc_tunables(env)  # steps stop faulting their tensors in again (engine/rank_malloc.py)
    return env


def _child_setup() -> Callable[[], None]:
    """What a rank runs before exec: own session; on Linux SIGKILL when the launcher dies."""
    prctl = None
    if sys.platform.startswith("linux"):
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before fork

    def setup() -> None:
        os.setsid()
        if prctl is not None:
            prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    return setup


def _tolerant(handler: LineHandler) -> LineHandler:
    """``handler`` that outlives a reader that left: a Ctrl-C at `sentitop train | tee log`
    kills tee too, and the first line then written (the "stopping: rank 0 first writes a
    checkpoint" line) raised BrokenPipeError out of the stop, before the checkpoint was asked
    for: the launcher exited 141 and the work was lost. The output goes to /dev/null instead."""

    def call(rank: int, stream: str, line: str) -> None:
        try:
            handler(rank, stream, line)
        except BrokenPipeError:
            silence_broken_streams()

    return call


def silence_broken_streams() -> None:
    """Point stdout and stderr at /dev/null where their reader has left (EPIPE), so later
    writes, and the interpreter's final flush, do not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:  # BrokenPipeError among them
                with contextlib.suppress(OSError, ValueError):
                    os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)


def _raise_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _default_handler(rank: int, stream: str, line: str) -> None:
    if stream == "stdout":
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    else:
        sys.stderr.write(f"[rank {rank}] {line}\n")
        sys.stderr.flush()


@dataclass(slots=True)
class _Rank:
    rank: int
    """Global rank."""
    proc: subprocess.Popen[bytes]
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=_TAIL))
    readers: list[threading.Thread] = field(default_factory=list)
    finished: bool = False
    """The rank reported ``rank_end``: its work is done and every rank met the final barrier."""
    excused: bool = False
    """It then died while tearing down; reported as a warning, not a failure."""


def _pump(r: _Rank, stream: IO[bytes], name: str, on_line: LineHandler) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        if name == "stderr":
            r.tail.append(line)
        elif line.startswith(_RANK_END):
            r.finished = True
        on_line(r.rank, name, line)
    stream.close()


RANK_FAILED = re.compile(r"rank (?P<rank>\d+) \(pid \d+\) failed: (?P<why>[^;]+)")
"""The launcher's own line for a failed rank (see launch_ranks), as a node's log tail holds it."""


def rank_failure(lines: Sequence[str]) -> str | None:
    """`rank 1 killed by SIGKILL` from a node launcher's last lines (None: no rank failed): the
    node itself exits 1 whatever its rank died of."""
    for line in reversed(lines):
        if found := RANK_FAILED.search(line):
            why = found["why"].strip()
            why = why.replace("exit code", "exited with code", 1) if why[:1] == "e" else why
            return f"rank {found['rank']} {why}"
    return None


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _stop(ranks: Sequence[_Rank], grace_s: float) -> None:
    """SIGTERM every live rank's session, then SIGKILL what is left after ``grace_s``."""
    live = [r for r in ranks if r.proc.poll() is None]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for r in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(r.proc.pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(r.proc.poll() is None for r in live):
            time.sleep(_POLL_S)
        live = [r for r in live if r.proc.poll() is None]
        if not live:
            return


RANK_MEMORY_FLOOR = 180 << 20
"""The least memory one rank holds before any data: the interpreter with torch and the trainer
imported (RssAnon measured 180 MB; a rank of the seed model holds ≈ 310 MB, of the default
model 0.5–0.8 GB: README), so the refusal only catches rank counts that cannot fit at all."""


def check_rank_memory(nproc: int) -> None:
    """Refuse (ConfigError, exit 2) a rank count whose imports alone need more memory than this
    machine has available: 500 ranks on a small box would otherwise swap for minutes, silent."""
    available = available_memory()
    if nproc * RANK_MEMORY_FLOOR <= available:
        return
    raise ConfigError(
        f"--nproc {nproc}: {nproc} ranks need at least {nproc * RANK_MEMORY_FLOOR / 1e9:,.1f} GB "
        f"of memory ({RANK_MEMORY_FLOOR / 1e6:.0f} MB each before any data), and this machine "
        f"has {available / 1e9:,.1f} GB available",
        hint=f"use --nproc {max(1, available // RANK_MEMORY_FLOOR)} or fewer (or more nodes)",
    )


def oversubscription_warning(nproc: int) -> str | None:
    """A warning when more CPU ranks than cores are asked for (None otherwise): every rank
    waits for the slowest at each step, so extra ranks only add switching and memory."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    if nproc <= cores:
        return None
    return (
        f"--nproc {nproc}: {nproc} CPU ranks on {cores} core{'s' if cores > 1 else ''}; ranks "
        f"share cores and every step waits for the slowest, so this runs slower than "
        f"--nproc {cores} (use more nodes for more ranks)"
    )


def launch_ranks(
    module: str,
    args: Sequence[str],
    nproc: int,
    *,
    threads: int,
    on_line: LineHandler | None = None,
    python: str = sys.executable,
    grace_s: float = 3.0,
    env: dict[str, str] | None = None,
    placement: Placement | None = None,
    stop_first: StopFirst | None = None,
) -> None:
    """Run ``python -m MODULE ARGS...`` as ``nproc`` local ranks and supervise them.

    Each rank gets the torchrun environment (:func:`rank_environ`, ``threads`` OpenMP threads)
    on top of ``env`` (default: this process's). Output lines go to ``on_line`` (default: stdout
    lines to stdout, stderr lines prefixed with the rank to stderr). Returns when every rank
    exited 0; when one fails the others are stopped (SIGTERM, SIGKILL after ``grace_s``) and
    LaunchError names the rank and its last stderr lines. SIGTERM to the launcher (main thread)
    and any exception stop the ranks too; a Ctrl-C as well, after ``stop_first`` if given.
    """
    if nproc < 1:
        raise ConfigError(f"--nproc = {nproc} must be >= 1")
    check_rank_memory(nproc)
    handler = _tolerant(on_line or _default_handler)
    port = placement.master_port if placement and placement.master_port else free_port()
    ranks: list[_Rank] = []
    child_setup = _child_setup()
    previous = None
    if threading.current_thread() is threading.main_thread():  # SIGTERM: stop the ranks too
        previous = signal.signal(signal.SIGTERM, _raise_on_sigterm)
    try:
        for rank in range(nproc):
            # a Ctrl-C mid-fork is raised once the rank is on the list (stopped), not lost
            with ForkGuard():
                proc = subprocess.Popen(
                    [python, "-m", module, *args],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=rank_environ(rank, nproc, port, threads, env, placement),
                    preexec_fn=child_setup,
                )
                r = _Rank(_global(rank, placement), proc)
                ranks.append(r)
            for stream, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
                assert stream is not None
                t = threading.Thread(target=_pump, args=(r, stream, name, handler), daemon=True)
                t.start()
                r.readers.append(t)
            handler(r.rank, "stderr", f"launch: rank {r.rank} pid {proc.pid}")
        try:
            failed = _supervise(ranks, handler)
        except KeyboardInterrupt:
            if stop_first is not None:
                _serve_first(stop_first, ranks, handler)  # a second Ctrl-C ends it at once
            raise
        if failed is not None:
            _stop(ranks, grace_s)
            _join(ranks)
            tail = "\n".join(failed.tail) or "(no stderr)"
            code = failed.proc.returncode
            others = (
                f"; stopped the other {nproc - 1} rank(s)" + (" of this node" if placement else "")
                if nproc > 1
                else ""
            )
            error = LaunchError(
                f"rank {failed.rank} (pid {failed.proc.pid}) failed: {_describe(code)}{others}",
                hint=f"last lines of rank {failed.rank}:\n{tail}",
            )
            error.rank_exit = code
            if code == 2:  # the rank refused its input or configuration: so does the launch
                error.exit_code = 2
            raise error
        _join(ranks)
    except BaseException:
        _stop(ranks, grace_s)
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _serve_first(stop_first: StopFirst, ranks: Sequence[_Rank], handler: LineHandler) -> None:
    """Ask, then wait for the answer, the ranks' end or the time limit."""
    stop_first.ask()  # first: nothing said about it may keep it from being asked
    handler(ranks[0].rank if ranks else 0, "stderr", f"launch: {stop_first.said}")
    deadline = time.monotonic() + stop_first.wait_s
    while time.monotonic() < deadline and not stop_first.served():
        if all(r.proc.poll() is not None for r in ranks):
            return
        time.sleep(_POLL_S)


def _global(local_rank: int, placement: Placement | None) -> int:
    return local_rank + (placement.rank_offset if placement else 0)


def _supervise(ranks: Sequence[_Rank], handler: LineHandler) -> _Rank | None:
    """Wait until every rank exited 0 (None) or one failed: the rank to blame. A rank killed
    by a signal is the cause and its peers then fail in collectives, but a peer can exit first
    (the killed one still writing its stacks): failures that are only exit codes wait up to
    _CAUSE_WAIT_S for a rank still running to die by a signal (_DYING_WAIT_S for one whose
    stderr already says it is aborting)."""
    blame_by: float | None = None
    while True:
        codes = [(r, r.proc.poll()) for r in ranks]
        failed = [r for r, code in codes if code not in (None, 0) and not _excuse(r, handler)]
        if failed:
            now = time.monotonic()
            blame_by = now + _CAUSE_WAIT_S if blame_by is None else blame_by
            killed = any(r.proc.returncode < 0 for r in failed)
            running = [r for r, code in codes if code is None]
            dying = any(mark in line for r in running for line in r.tail for mark in _DYING)
            limit = blame_by + (_DYING_WAIT_S - _CAUSE_WAIT_S if dying else 0.0)
            if killed or not running or now >= limit:
                return min(failed, key=lambda r: (r.proc.returncode >= 0, r.rank))
        elif all(code == 0 or r.excused for r, code in codes):
            return None
        time.sleep(_POLL_S)


def _excuse(r: _Rank, handler: LineHandler) -> bool:
    """True when exited rank ``r`` had finished its work (``rank_end``): a teardown crash.

    Its output is read to the end first, so a ``rank_end`` still in the pipe counts. The
    warning goes to ``handler`` once, with the exit status (its stderr lines went before).
    """
    if r.excused:
        return True
    for t in r.readers:  # EOF comes at exit unless a grandchild still holds the pipe
        t.join(timeout=1)
    if not r.finished:
        return False
    r.excused = True
    handler(
        r.rank,
        "stderr",
        f"launch: warning: rank {r.rank} {_describe(r.proc.returncode)} while tearing down, "
        "after it finished its work; its results are complete",
    )
    return True


def _join(ranks: Sequence[_Rank]) -> None:
    for r in ranks:
        for t in r.readers:
            t.join(timeout=5)


def _master(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not (sep and host and port.isdigit()):
        raise argparse.ArgumentTypeError(f"--master {text!r} is not ADDR:PORT")
    return host, int(port)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m engine.launch --nproc N [placement] MODULE ARGS...``: one node's ranks.

    Exit 0 when every rank finished (teardown crashes after ``rank_end`` only warn), 1 when
    one failed (its rank, status and last stderr lines on stderr), 2 for bad arguments.
    """
    parser = argparse.ArgumentParser(
        prog="python -m engine.launch", description="Run this node's ranks of a job."
    )
    parser.add_argument("--nproc", type=int, required=True, help="ranks on this node")
    parser.add_argument("--threads", type=int, default=None, help="OpenMP threads per rank")
    parser.add_argument("--node-rank", type=int, default=0, help="this node's index")
    parser.add_argument("--rank-offset", type=int, default=0, help="global rank of local rank 0")
    parser.add_argument("--world-size", type=int, default=None, help="ranks over all nodes")
    parser.add_argument(
        "--master", type=_master, default=None, help="ADDR:PORT of rank 0 (multi-node)"
    )
    parser.add_argument("module", help="python module every rank runs (python -m MODULE)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    ns = parser.parse_args(argv)
    addr, port = ns.master or ("127.0.0.1", None)
    placement = Placement(
        node_rank=ns.node_rank,
        rank_offset=ns.rank_offset,
        world_size=ns.world_size,
        master_addr=addr,
        master_port=port,
    )
    threads = ns.threads or default_threads(ns.nproc)
    try:
        launch_ranks(ns.module, ns.args, ns.nproc, threads=threads, placement=placement)
    except LaunchError as exc:
        print(f"launch: {exc.user_message()}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

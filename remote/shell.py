"""Shell command building: every value that reaches a (remote) shell goes through here, quoted.

Node commands run under a small POSIX ``sh`` wrapper (:data:`NODE_WRAPPER`) that

* writes its pid to a pid file — it is the leader of a fresh process group (``setsid`` over
  SSH, ``start_new_session`` locally), so ``kill -s TERM -- -PID`` reaches the program — and
  marks the program's environment with a kill token that every descendant inherits, so
  processes that start sessions of their own (torchrun's workers) are found too;
* starts a watchdog that waits for end-of-file on the wrapper's stdin and then kills the
  group and the marked processes: the launcher never writes to that pipe, so it reaches
  end-of-file exactly when the launcher or its SSH connection goes away (crash, ``kill -9``,
  network loss), and no node process outlives its launcher;
* runs the program with stdin from ``/dev/null`` and stderr merged into stdout.

Values are never interpolated into a script: the program and its arguments are passed as
positional parameters (``"$@"``) and each one is quoted with :func:`shlex.quote` exactly once.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from engine.errors import ConfigError

TOKEN_VAR = "SENTITOP_KILL_TOKEN"
"""Environment variable marking every process of one node command (see :data:`NODE_WRAPPER`)."""

_KILL_MARKED = (
    f'for e in $(grep -slzxF -- "{TOKEN_VAR}=$token" /proc/[0-9]*/environ 2>/dev/null); do '
    'p=${e#/proc/}; kill -s "$s" "${p%/environ}" 2>/dev/null; done'
)

NODE_WRAPPER = (
    'pidfile=$1; token=$2; shift 2; [ -z "$pidfile" ] || echo $$ > "$pidfile"; exec 3<&0; '
    "( trap '' INT TERM HUP; cat <&3 >/dev/null 2>&1; for s in TERM KILL; do "
    f'[ -z "$token" ] || {{ {_KILL_MARKED}; }}; '
    'kill -s "$s" -- -$$ 2>/dev/null; i=0; while [ "$s" = TERM ] && [ $i -lt 20 ] && '
    "kill -0 $$ 2>/dev/null; do sleep 0.1; i=$((i+1)); done; done ) >/dev/null 2>&1 & "
    f'exec env {TOKEN_VAR}="$token" "$@" </dev/null 3<&- 2>&1'
)
"""The wrapper script: ``sh -c NODE_WRAPPER sentitop-node PIDFILE TOKEN PROGRAM ARGS...``.

Besides the process group, the kill token (an environment variable inherited by every
descendant) reaches processes that left the group: torchrun starts each worker in a session of
its own, so a group kill alone would orphan the workers once the agent is SIGKILLed.
"""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")


def quote(value: object) -> str:
    """One shell word for ``value`` (``str()`` of it), safe against every metacharacter."""
    return shlex.quote(str(value))


def join(argv: Sequence[object]) -> str:
    """A shell command line running ``argv`` literally."""
    return " ".join(quote(arg) for arg in argv)


def check_name(value: str, what: str) -> str:
    """``value`` if it is a safe file-name component (node names, run ids); ConfigError if not."""
    if not _SAFE_NAME.match(value):
        raise ConfigError(
            f"{what} = {value!r} is not allowed; expected 1-64 letters, digits, '.', '_' or '-' "
            "starting with a letter or digit"
        )
    return value


def env_args(env: Mapping[str, str]) -> list[str]:
    """``env`` program arguments setting ``env`` (``["env", "K=V", ...]``, or [] when empty)."""
    if not env:
        return []
    args = ["env"]
    for name, value in env.items():
        if not _ENV_NAME.match(name):
            raise ConfigError(f"environment variable name {name!r} is not allowed")
        args.append(f"{name}={value}")
    return args


def wrapped_argv(
    argv: Sequence[str],
    *,
    pidfile: str = "",
    token: str = "",
    env: Mapping[str, str] | None = None,
    shell: str = "sh",
) -> list[str]:
    """argv that runs ``argv`` (with ``env``) under :data:`NODE_WRAPPER` (no shell parsing)."""
    if not argv:
        raise ConfigError("empty node command")
    if token:
        check_name(token, "kill token")
    return [shell, "-c", NODE_WRAPPER, "sentitop-node", pidfile, token,
            *env_args(env or {}), *argv]  # fmt: skip


def remote_dir(path: str) -> str:
    """Shell words for a directory that may start with ``~/`` (expanded to ``$HOME``, quoted)."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        rest = path[2:]
        return '"$HOME"' + ("/" + quote(rest) if rest else "")
    return quote(path)


def remote_node_command(
    argv: Sequence[str],
    *,
    cwd: str,
    pidfile: str,
    token: str = "",
    env: Mapping[str, str] | None = None,
) -> str:
    """The command line an SSH channel runs: cd, new session (``setsid -w``), wrapper, argv."""
    wrapped = wrapped_argv(argv, pidfile=pidfile, token=token, env=env)
    return f"cd -- {remote_dir(cwd)} && exec setsid -w {join(wrapped)}"


def kill_command(pidfile: str, token: str = "", signal: str = "TERM") -> str:
    """Command line that signals a node command's process group (leader's pid in ``pidfile``)
    and every process carrying its kill ``token``."""
    if signal not in ("TERM", "KILL", "INT"):
        raise ValueError(f"unsupported signal {signal!r}")
    line = (
        f"s={signal}; pg=$(cat -- {quote(pidfile)} 2>/dev/null); "
        '[ -z "$pg" ] || kill -s "$s" -- "-$pg" 2>/dev/null; '
    )
    if token:
        line += f"token={quote(check_name(token, 'kill token'))}; {_KILL_MARKED}; "
    return line + "true"


def torchrun_argv(
    python: str,
    module: str,
    args: Sequence[str] = (),
    *,
    nnodes: int,
    node_rank: int,
    nproc: int,
    rdzv_endpoint: str | None,
    rdzv_id: str,
    local_addr: str | None = None,
) -> list[str]:
    """``python -m torch.distributed.run ... -m module args`` for one node.

    One node with no endpoint runs ``--standalone``; otherwise c10d rendezvous on
    ``rdzv_endpoint`` (the first node, which hosts the store: ``is_host`` is set explicitly so
    nodes sharing one machine, as on loopback, never race for it). c10d numbers the nodes
    itself (sorted by ``--local-addr``), so ``node_rank`` only decides who hosts the store;
    which node got global rank 0 is seen from its events (:attr:`RunStreams.rank0_node`).
    """
    argv = [python, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc)]
    if nnodes == 1 and rdzv_endpoint is None:
        argv += ["--standalone", "--nnodes", "1"]
    else:
        if rdzv_endpoint is None:
            raise ConfigError("a multi-node run needs a rendezvous endpoint")
        argv += [
            "--nnodes", str(nnodes),
            "--rdzv-backend", "c10d",
            "--rdzv-endpoint", rdzv_endpoint,
            "--rdzv-id", rdzv_id,
            "--rdzv-conf", f"is_host={'true' if node_rank == 0 else 'false'}",
            "--max-restarts", "0",
        ]  # fmt: skip
        if local_addr:
            argv += ["--local-addr", local_addr]
    return [*argv, "-m", module, *args]

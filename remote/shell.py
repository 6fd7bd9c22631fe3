"""Shell command building: every value that reaches a (remote) shell goes through here, quoted.

Node commands run under a small POSIX ``sh`` wrapper (:data:`NODE_WRAPPER`) that

* writes its pid to a pid file — it is the leader of a fresh process group (``setsid`` over
  SSH, ``start_new_session`` locally), so ``kill -s TERM -- -PID`` reaches the program — and
  marks the program's environment with a kill token that every descendant inherits, so
  processes that start sessions of their own (the launcher's ranks) are found too;
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
descendant) reaches processes that left the group: the launcher starts each rank in a session of
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


def launch_argv(
    python: str,
    module: str,
    args: Sequence[str] = (),
    *,
    nproc: int,
    node_rank: int = 0,
    rank_offset: int = 0,
    world_size: int | None = None,
    master: str | None = None,
    threads: int | None = None,
) -> list[str]:
    """``python -m engine.launch ... MODULE ARGS`` for one node (the one launcher of ranks).

    Static rendezvous: the node runs global ranks ``rank_offset .. rank_offset + nproc - 1``
    of ``world_size``; rank 0 (on the first node) listens on ``master`` (``ADDR:PORT``). One
    node with no ``master`` picks a free local port itself.
    """
    argv = [python, "-m", "engine.launch", "--nproc", str(nproc)]
    if master is not None:
        argv += [
            "--node-rank", str(node_rank),
            "--rank-offset", str(rank_offset),
            "--world-size", str(world_size if world_size is not None else nproc),
            "--master", master,
        ]  # fmt: skip
    elif world_size not in (None, nproc):
        raise ConfigError("a multi-node run needs the first node's address (master)")
    if threads is not None:
        argv += ["--threads", str(threads)]
    return [*argv, module, *args]

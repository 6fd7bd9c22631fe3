"""A dead man's switch for EC2 nodes: each instance shuts itself down (and is terminated) when
the launcher stops renewing its lease — a launcher killed by SIGKILL, the OOM killer or a
laptop lid can tear nothing down, and its instances billed until someone noticed.

At start the launcher runs a detached loop on every instance (``setsid nohup sh``, outside the
node wrapper, whose watchdog fires at every normal disconnect too): it looks at a lease file's
age every ``poll_s`` and runs the shutdown command once the file is older than ``limit_s``.
While the run lives, the launcher touches the lease every ``renew_s`` over its SSH connection;
a normal stop kills the loop first (its pid is in ``<lease>.pid``), then terminates the
instances as always. ``InstanceInitiatedShutdownBehavior=terminate`` makes a shutdown a
termination.
"""

from __future__ import annotations

from dataclasses import dataclass

from remote.shell import join, quote

SHUTDOWN_ARGV = ("sh", "-c", "sudo -n shutdown -h now || shutdown -h now")
"""What an instance whose launcher went silent runs (the AMIs' users have passwordless sudo)."""
DEFAULT_LIMIT_S = 600.0
"""Silence after which an instance shuts itself down, unless the profile says otherwise."""

LOOP = (
    'lease=$1; limit=$2; poll=$3; shift 3; echo $$ > "$lease.pid"; touch "$lease" || exit 1; '
    'while sleep "$poll"; do seen=$(stat -c %Y "$lease" 2>/dev/null || echo 0); '
    'if [ $(( $(date +%s) - seen )) -gt "$limit" ]; then rm -f "$lease.pid"; "$@"; exit 0; fi; '
    "done"
)
"""``sh -c LOOP sentitop-dead-man LEASE LIMIT POLL SHUTDOWN...``: values as arguments only."""


TOOLS = ("setsid", "nohup")
"""Programs the loop needs on the node besides sh, touch, date and GNU/busybox ``stat -c``."""


@dataclass(frozen=True, slots=True)
class DeadMan:
    """The switch's settings for one cluster."""

    limit_s: float = DEFAULT_LIMIT_S
    shutdown_argv: tuple[str, ...] = SHUTDOWN_ARGV
    tools: tuple[str, ...] = TOOLS

    def probe_command(self) -> str:
        """A shell line that prints what the node lacks to run the switch (nothing: ready):
        each missing program, ``stat -c``, and for the real shutdown root or passwordless
        sudo. It always exits 0."""
        checks = [f"command -v {quote(t)} >/dev/null 2>&1 || printf '%s ' {quote(t)}"
                  for t in self.tools]  # fmt: skip
        checks.append("stat -c %Y / >/dev/null 2>&1 || printf 'stat-c '")
        if self.shutdown_argv == SHUTDOWN_ARGV:
            checks.append(
                '[ "$(id -u)" = 0 ] || sudo -n true >/dev/null 2>&1 || printf "passwordless-sudo "'
            )
        return "; ".join([*checks, "true"])

    @property
    def renew_s(self) -> float:
        """How often the launcher touches each lease (several times per limit)."""
        return max(0.2, min(60.0, self.limit_s / 5))

    @property
    def poll_s(self) -> int:
        """How often the loop looks at the lease (whole seconds, for sleep)."""
        return max(1, min(30, int(self.limit_s / 10)))

    def arm_command(self, lease: str) -> str:
        """The shell line that starts the loop detached and returns at once."""
        argv = ["sh", "-c", LOOP, "sentitop-dead-man", lease, str(int(self.limit_s)),
                str(self.poll_s), *self.shutdown_argv]  # fmt: skip
        return f"setsid nohup {join(argv)} </dev/null >/dev/null 2>&1 &"

    @staticmethod
    def renew_command(lease: str) -> str:
        """The shell line that renews the lease."""
        return f"touch -- {quote(lease)}"

    @staticmethod
    def disarm_command(lease: str) -> str:
        """The shell line that stops the loop (a normal stop: the launcher tears down itself)."""
        pid = quote(f"{lease}.pid")
        return f'[ -f {pid} ] && kill "$(cat {pid})" 2>/dev/null; rm -f -- {pid}; true'

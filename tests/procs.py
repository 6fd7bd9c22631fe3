"""Finding a training rank's process on this machine (tests and benchmarks that kill one)."""

from __future__ import annotations

from pathlib import Path


def rank_pid(rank: int, marker: str) -> int | None:
    """Pid of global rank ``rank`` whose command line names ``marker`` (e.g. the run folder).

    The node's launcher (``python -m engine.launch``) names the same module and config but
    carries no RANK of its own, so only the rank itself matches.
    """
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            marker.encode() in cmdline
            and b"engine.launch" not in cmdline
            and f"RANK={rank}".encode() in environ
        ):
            return int(entry.name)
    return None

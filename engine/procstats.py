"""Process facts: this process's anonymous memory and storage reads, and whether a pid lives."""

from __future__ import annotations

import os


def rss_anon_bytes() -> int | None:
    """RssAnon of this process: memory it holds itself (not shared, reclaimable file pages)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        return None
    return None


def storage_read_bytes() -> int | None:
    """Bytes this process caused to be fetched from storage (page-cache misses, read-ahead)."""
    try:
        with open("/proc/self/io", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

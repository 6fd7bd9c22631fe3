"""The local runner's default memory budget (a light module: the CLI shows it in --help)."""

from __future__ import annotations

import os

DEFAULT_BUDGET_SHARE = 0.5
"""Default memory budget: this share of the memory available when the job starts."""
MIN_BUDGET = 1_000_000
"""Smallest budget accepted, 1MB (the fixed costs of a worker are on top of it); sizes are
powers of 1000 everywhere else, and 1MiB refused `--memory-budget 1MB`."""


def available_memory() -> int:
    """MemAvailable of /proc/meminfo in bytes (physical memory where that file is missing)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def default_budget() -> int:
    """The memory budget when none is given: DEFAULT_BUDGET_SHARE of the available memory."""
    return max(MIN_BUDGET, int(available_memory() * DEFAULT_BUDGET_SHARE))


def budget_warning(budget: int | None) -> dict[str, str] | None:
    """A ``memory_budget_above_available`` warning ({code, message}) when a given budget is
    more than the memory available now: the runner would not spill before the machine runs
    out of memory (a typo such as 1000GB for 1000MB was taken silently)."""
    if budget is None:
        return None
    available = available_memory()
    if budget <= available:
        return None
    return {
        "code": "memory_budget_above_available",
        "message": f"--memory-budget {budget / 1e9:,.2f} GB is more than the "
        f"{available / 1e9:,.2f} GB of memory available: the local runner spills only past "
        "its budget, so it may run out of memory first (without --memory-budget it takes "
        f"{DEFAULT_BUDGET_SHARE:.0%} of the available memory)",
    }

"""glibc malloc settings for training ranks: keep freed tensor memory, back big ones by huge pages.

A CPU training step allocates and frees tensors of tens of MB (LSTM gates and activations of a
batch of 256 rows). glibc returns such memory to the kernel as soon as it is freed (mmapped
chunks above its threshold; the heap's top above the trim threshold), so the next step faults
every page of it in again, zeroed: on the 2-core box 2.9 M minor faults and 9–10 s of system
time in a 32 s epoch of the default model, 11–15 M faults and 33–47 s in a length-bucketed one
(whose batches of long rows need the biggest tensors). Tensors up to 32 MB now stay in the heap
and the heap is not trimmed below 1 GB of free space at its top; what is still mmapped (over
32 MB) is backed by transparent huge pages where the kernel offers them (``madvise`` mode): 512
faults fewer per 2 MB. Measured (BENCHMARKS.md "Rank malloc settings",
benchmarks/bench_rank_malloc.py): `sentitop train` 1.36× the samples/s with random batches,
2.17× with length buckets, the same peak memory. The settings are glibc tunables, read when a
process starts, so the launcher puts them in each rank's environment; a key the user set in
GLIBC_TUNABLES keeps the user's value, another C library ignores them, and
``SENTITOP_RANK_MALLOC=off`` leaves glibc's own behaviour (e.g. to compare, or where ranks must
hand freed memory back at once).
"""

from __future__ import annotations

from collections.abc import MutableMapping

MAX_MMAP_THRESHOLD = 32 * 1024 * 1024
"""The largest mmap threshold glibc accepts on 64-bit (here and in the preprocessing job's
mallopt, engine/preprocess/run_local.py)."""

RANK_MALLOC_TUNABLES = (
    ("glibc.malloc.mmap_threshold", str(MAX_MMAP_THRESHOLD)),
    ("glibc.malloc.trim_threshold", str(1024 * 1024 * 1024)),
    ("glibc.malloc.hugetlb", "1"),
)
"""(tunable, value): allocations up to 32 MB from the heap (glibc's largest threshold), 1 GB of
free heap kept before trimming, huge pages for what malloc maps (glibc ≥ 2.35; older ones
ignore the name)."""


SWITCH = "SENTITOP_RANK_MALLOC"
"""Environment variable: ``off`` leaves the ranks' malloc as glibc sets it up."""


def add_malloc_tunables(env: MutableMapping[str, str]) -> None:
    """Add :data:`RANK_MALLOC_TUNABLES` to ``env``'s GLIBC_TUNABLES, after those it holds; a
    tunable already set there keeps its value. Nothing when ``env`` has
    ``SENTITOP_RANK_MALLOC=off``."""
    if env.get(SWITCH, "").strip().lower() == "off":
        return
    given = [part for part in env.get("GLIBC_TUNABLES", "").split(":") if part]
    names = {part.split("=", 1)[0] for part in given}
    added = [f"{name}={value}" for name, value in RANK_MALLOC_TUNABLES if name not in names]
    env["GLIBC_TUNABLES"] = ":".join(given + added)

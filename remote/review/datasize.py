"""A corpus given by size: training samples it yields and preprocessing time per runner.

Figures (BENCHMARKS.md):
- the local runner: 80.0 MB of input per CPU-second on one worker, 2 workers 1.78× one
  (parallel efficiency 0.89, assumed to hold beyond 2 cores: not measured there);
- EMR and Spark were not measured: the same per-core rate is assumed (the mapper is the same
  code), so their predictions lack Hadoop/Spark overhead and cluster start-up (a lower bound);
- samples per GB: the old study's corpus, 142.8 M records in 92 GB → 21.3 M distinct texts
  (231.5 k per GB); synthetic reviews: 46,602 distinct texts per 256 MB (182 k per GB).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import InputError

MB_PER_CPU_S = 80.0
"""Local runner, 1 worker, MB of input per CPU-second (BENCHMARKS.md Preprocessing, quiet)."""

PARALLEL_EFFICIENCY = 1.78 / 2
"""2 workers / (2 × 1 worker), fresh processes (BENCHMARKS.md Preprocessing)."""

TEXTS_PER_GB_CORPUS = 21.3e6 / 92
"""Distinct texts per GB of the old study's Amazon reviews (21.3 M of 142.8 M records, 92 GB)."""

TEXTS_PER_GB_SYNTHETIC = 46_602 / 0.256
"""Distinct texts per GB of `sentitop synth` output (256 MB → 46,602, BENCHMARKS.md)."""

TITLE_ROWS_FACTOR = 44_938 / 27_205
"""Training rows with preprocess.title_rows / without, on real reviews: the seven McAuley and
Fine Food files of ../shared/data, 27,205 → 44,938 (BENCHMARKS.md "Review titles as training
rows"). Synthetic reviews draw their titles from a few dozen: no factor for them."""


SPILL_MB_PER_CPU_S = 8_000 / 275
"""Local runner spilling past its budget, MB of input per CPU-second: 8 GB of synthetic
reviews (1.46 M distinct texts) with a 1 GB budget took 275 CPU-seconds on 2 workers
(BENCHMARKS.md "Preprocessing with a memory budget"; docs/scaling.md)."""

STATE_BYTES_PER_TEXT = 952e6 / 182_353
"""Peak memory of the local runner's process tree per distinct text held in memory: 952 MB
at 1 GB of input, 182,353 distinct texts (BENCHMARKS.md Preprocessing)."""

SCRATCH_BYTES_PER_TEXT = 3.52e9 / 1_459_484
"""Scratch disk the spill runs take per distinct text: 3.52 GB for 1.46 M at a 1 GB budget."""


@dataclass(frozen=True, slots=True)
class PrepEstimate:
    """Predicted preprocessing of one runner."""

    runner: str
    machines: str
    cores: int
    seconds: float
    basis: str
    scratch_bytes: int = 0
    """Scratch disk the local runner's spill runs need beside the output (0: fits in memory)."""
    usd_per_hour: float = 0.0
    """What its machines cost per hour (the EMR cluster; 0 for this machine)."""
    usd: float = 0.0
    """Its predicted cost (billed per second, a minute at least; 0 for this machine)."""


def train_samples(
    size_bytes: int, test_fraction: float, *, synthetic: bool, title_rows: bool = False
) -> int:
    """Training samples of a corpus of ``size_bytes`` (distinct texts less the test split, times
    TITLE_ROWS_FACTOR for real reviews whose titles are rows too)."""
    per_gb = TEXTS_PER_GB_SYNTHETIC if synthetic else TEXTS_PER_GB_CORPUS
    return samples_of(size_bytes / 1e9 * per_gb, test_fraction, title_rows and not synthetic)


def samples_of(texts: float, test_fraction: float, title_rows: bool) -> int:
    """Training samples of ``texts`` distinct reviews: less the test split, times
    TITLE_ROWS_FACTOR when their titles are rows too (at least 1)."""
    return max(1, int(texts * (1.0 - test_fraction) * (TITLE_ROWS_FACTOR if title_rows else 1.0)))


MIN_PLAN_SAMPLES = 1_000
"""Fewest training reviews a --data-size may stand for: below it a run is its start-up alone,
and a prediction would look exact and mean nothing."""


MAX_PLAN_BYTES = 10 * 1000**5
"""Largest --data-size planned for, 10 PB: ten times a big lab's petabyte corpus. Past it a slip
(TB for GB, a few zeros too many) is likelier than a corpus, and its hours would mean nothing."""


def require_plannable(n_train: int, size_bytes: int) -> None:
    """InputError when a corpus of ``size_bytes`` (``n_train`` training reviews) is too small
    or too large to plan for."""
    if size_bytes > MAX_PLAN_BYTES:
        from engine.synth.size import format_size  # engine.synth imports numpy: only here

        raise InputError(
            f"--data-size {size_bytes:,} bytes ({format_size(size_bytes)}): more than the "
            f"largest corpus planned for, {format_size(MAX_PLAN_BYTES)}",
            hint="give the corpus's size, e.g. --data-size 92GB, 10TB or 1PB",
        )
    if n_train < MIN_PLAN_SAMPLES:
        raise InputError(
            f"--data-size {size_bytes:,} bytes: about {n_train:,} training review(s), too few to "
            f"plan a run on (at least {MIN_PLAN_SAMPLES:,})",
            hint="give the corpus's size, e.g. --data-size 92GB",
        )


def prep_time(
    size_bytes: int,
    runner: str,
    machines: str,
    cores: int,
    *,
    texts: int = 0,
    budget: int | None = None,
) -> PrepEstimate:
    """Seconds to preprocess ``size_bytes`` on ``cores`` vCPUs with ``runner``; the local
    runner spills past ``budget`` bytes of memory (at ``texts`` distinct texts) and is then
    slower, with scratch disk beside the output."""
    spills = runner == "local" and budget is not None and texts * STATE_BYTES_PER_TEXT > budget
    per_core = SPILL_MB_PER_CPU_S if spills else MB_PER_CPU_S
    rate = per_core * (1 if cores == 1 else cores * PARALLEL_EFFICIENCY)
    seconds = size_bytes / 1e6 / rate
    scratch = int(texts * SCRATCH_BYTES_PER_TEXT) if spills else 0
    cores_text = f" x {cores} vCPUs" + (
        f" x efficiency {PARALLEL_EFFICIENCY:.2f}" if cores > 1 else ""
    )
    if spills:
        assert budget is not None
        basis = (
            f"{per_core:.0f} MB per CPU-second{cores_text}: its distinct texts need about "
            f"{texts * STATE_BYTES_PER_TEXT / 1e9:,.0f} GB of memory, past its "
            f"{budget / 1e9:,.1f} GB budget, so it spills (8 GB measured with a 1 GB budget; "
            f"{MB_PER_CPU_S:g} in memory) and needs about {scratch / 1e9:,.1f} GB of scratch "
            "disk beside the output"
        )
    else:
        basis = (
            f"{MB_PER_CPU_S:g} MB/s per core measured on idle cores (local runner, "
            f"BENCHMARKS.md; busy ones are slower){cores_text}"
        )
    if runner != "local":
        basis += (
            f"; {runner} not measured: the local runner's per-core rate is assumed, without "
            "cluster start-up or framework overhead (a lower bound)"
        )
    return PrepEstimate(runner, machines, cores, seconds, basis, scratch)

"""Scaling and cost metrics of a series of runs: speedup, efficiency, $ and hours for N epochs.

Runs of one configuration (same label: an embeddings run's names its mode; local runs of one
label that ran different threads per rank are told apart) are pooled; the baseline is the
configuration with the fewest workers (ties: the cheapest). Strong scaling: speedup =
T_base / T, efficiency = speedup / (workers / base workers). Weak scaling (data ∝ workers):
efficiency = T_base / T and the scaled speedup = efficiency x workers / base workers. Both by
epoch time and, where every run of the pair reached it, by time to the loss threshold. An
efficiency above :data:`UNTRUSTED` (super-linear by far) is kept but marked untrusted.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field

from remote.cost import BILLING_MINIMUM_S
from remote.review.outcome import run_outcome
from remote.run_record import Billing, RunRecord


def billed_usd(seconds: float, usd_per_hour: float, billing: Billing = "per_second") -> float:
    """Cost of ``seconds`` on machines costing ``usd_per_hour`` under the billing rule."""
    if billing == "hours_2dp":
        return round(seconds / 3600.0, 2) * usd_per_hour
    return max(BILLING_MINIMUM_S, float(math.ceil(seconds))) * usd_per_hour / 3600.0


def billed_hours(seconds: float, billing: Billing = "per_second") -> float:
    """Hours as the billing rule counts them."""
    return round(seconds / 3600.0, 2) if billing == "hours_2dp" else seconds / 3600.0


@dataclass(slots=True)
class ConfigMetrics:
    """One configuration of a series with its measured and derived figures."""

    label: str
    workers: int
    hardware: str
    usd_per_hour: float
    billing: Billing
    runs: list[RunRecord]
    epoch_s: float
    """Median training seconds of one epoch over the runs' epochs."""
    time_to_threshold_s: float | None
    samples_per_s: float | None
    accuracy: float | None
    mode: str
    speedup: float = math.nan
    efficiency: float = math.nan
    speedup_tts: float | None = None
    efficiency_tts: float | None = None
    hours: float = math.nan
    """Hours of training for the report's N epochs."""
    usd: float = math.nan
    """USD of training for the report's N epochs."""
    usd_per_point: float | None = None
    """usd / (accuracy in percent): dollars per point of test accuracy."""
    published_usd: float | None = None
    """Cost the source published for the run (CSV rows), to compare with :attr:`usd`."""
    notes: list[str] = field(default_factory=list)
    threads: int | None = None
    """torch threads per rank of local CPU runs (None: not recorded, or not a local run)."""
    embed_mode: str = ""
    """Embeddings runs: sync, async or svd ('' for sentiment)."""
    words_per_s: float | None = None
    """Embeddings runs: median corpus words per training second."""
    pip_loss: float | None = None
    """Embeddings runs: median final PIP loss (runs whose outcome counts)."""
    pip_loss_initial: float | None = None
    """Embeddings runs: median PIP loss of the random start."""

    @property
    def untrusted(self) -> bool:
        """True when the speedup by epoch time is super-linear by far (see :data:`UNTRUSTED`)."""
        return is_untrusted(self.efficiency)

    @property
    def untrusted_tts(self) -> bool:
        """True when the speedup by time to threshold is super-linear by far."""
        return is_untrusted(self.efficiency_tts)

    @property
    def instance_type(self) -> str | None:
        """Instance type of the configuration's first run."""
        return self.runs[0].instance_type


@dataclass(slots=True)
class SeriesMetrics:
    """A series of configurations compared with its baseline, for N epochs."""

    configs: list[ConfigMetrics]
    baseline: ConfigMetrics
    epochs: int
    mode: str
    notes: list[str] = field(default_factory=list)
    task: str = "sentiment"
    """What the runs trained: sentiment or embeddings (one task per series)."""


def is_untrusted(efficiency: float | None) -> bool:
    """True when ``efficiency`` (speedup per worker against the baseline) is above
    :data:`UNTRUSTED`: no measurement to rely on, whatever the printed figure."""
    return efficiency is not None and math.isfinite(efficiency) and efficiency > UNTRUSTED


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(values) if values else None


def median_epoch_s(run: RunRecord) -> float:
    """Median training seconds of one epoch of ``run`` (NaN without any): the figure the report
    and `sentitop runs` both show, robust to a slow first epoch (start-up, warm caches)."""
    median = _median(run.epoch_seconds)
    return math.nan if median is None else median


def _threads(run: RunRecord) -> int | None:
    """Threads per rank of a local CPU run (None: not recorded, or GPUs do the work)."""
    return run.threads if run.provider == "local" and not run.gpus else None


def _group(runs: list[RunRecord]) -> dict[str, list[RunRecord]]:
    """Runs by configuration: by label, and for local runs by threads per rank as well (a label
    shared by runs of different thread settings gets them added: never one averaged row)."""
    keyed: dict[tuple[str, int | None], list[RunRecord]] = {}
    for run in runs:
        keyed.setdefault((run.label, _threads(run)), []).append(run)
    shared = Counter(label for label, _ in keyed)
    groups: dict[str, list[RunRecord]] = {}
    for (label, threads), group in keyed.items():
        if shared[label] > 1:
            label += f", {threads} thread(s)/rank" if threads else ", threads not recorded"
        groups[label] = group
    return groups


def _job(run: RunRecord) -> str:
    """The run's workload without its embeddings mode (said apart: the mode is in the label)."""
    if not run.embed_mode:
        return run.workload
    try:
        settings = json.loads(run.workload)
        inner = next(iter(settings.values()))
        inner.pop("mode", None)
    except (ValueError, TypeError, AttributeError, StopIteration):
        return run.workload
    return json.dumps(settings, sort_keys=True)


def _config(label: str, runs: list[RunRecord]) -> ConfigMetrics:
    epochs = [s for r in runs for s in r.epoch_seconds]
    first = runs[0]
    counted = [r for r in runs if run_outcome(r).accuracy_counts]
    kept = [r for r in runs if r.status == "ok"]
    return ConfigMetrics(
        label=label,
        workers=first.workers,
        hardware=first.hardware,
        usd_per_hour=first.usd_per_hour,
        billing=first.billing,
        runs=runs,
        epoch_s=_median(epochs) or math.nan,
        time_to_threshold_s=_median(
            [r.time_to_threshold_s for r in runs if r.time_to_threshold_s is not None]
        ),
        samples_per_s=_median([r.samples_per_s for r in runs if r.samples_per_s is not None]),
        accuracy=_median([r.accuracy for r in counted if r.accuracy is not None]),
        mode=first.mode,
        published_usd=first.usd if first.source == "csv" else None,
        threads=_threads(first),
        embed_mode=first.embed_mode,
        words_per_s=_median([r.words_per_s for r in runs if r.words_per_s is not None]),
        pip_loss=_median([r.pip_loss for r in kept if r.pip_loss is not None]),
        pip_loss_initial=_median(
            [r.pip_loss_initial for r in kept if r.pip_loss_initial is not None]
        ),
    )


def _refuse_other_data(runs: list[RunRecord]) -> None:
    """ValueError when strong-scaling runs trained on different numbers of samples: an epoch's
    time grows with the data, so a run on 3.7× fewer reviews read as a super-linear speedup and
    took the frontier. (Weak scaling grows the data with the ranks on purpose.)"""
    sizes: dict[int, list[str]] = {}
    for run in runs:
        if run.n_train and run.mode != "weak":
            sizes.setdefault(run.n_train, []).append(run.run_id)
    if len(sizes) > 1:
        groups = "; ".join(f"{n:,}: {', '.join(ids)}" for n, ids in sorted(sizes.items()))
        raise ValueError(
            f"the runs trained on different amounts of data (training samples {groups}): "
            "their epoch times measure the data as much as the machines; report the runs of "
            "each dataset on their own"
        )


def series_metrics(runs: list[RunRecord], *, epochs: int | None = None) -> SeriesMetrics:
    """Metrics of ``runs`` as one series; $ and hours for ``epochs`` (default: the runs')."""
    usable = [r for r in runs if r.epoch_seconds and not r.mixed_world]
    mixed = [r.run_id for r in runs if r.mixed_world]
    if not usable:
        raise ValueError(
            "no run with measured epochs on one world size (did every run fail before training?)"
            + (f"; left out, their ranks changed mid-training: {', '.join(mixed)}" if mixed else "")
        )
    tasks: dict[str, list[str]] = {}
    for run in usable:
        tasks.setdefault(run.task, []).append(run.run_id)
    if len(tasks) > 1:  # epoch seconds of different jobs: no speedup or $ between them means much
        kinds = "; ".join(f"{task}: {', '.join(ids)}" for task, ids in sorted(tasks.items()))
        raise ValueError(f"the runs train different workloads ({kinds}): report each on its own")
    _refuse_other_data(usable)
    configs = [_config(label, group) for label, group in _group(usable).items()]
    configs.sort(key=lambda c: (c.workers, c.usd_per_hour, c.label))
    base = configs[0]
    modes = {c.mode for c in configs}
    mode = modes.pop() if len(modes) == 1 else "mixed"
    n_epochs = epochs or max(r.epochs for r in usable)
    notes: list[str] = []
    if mixed:
        notes.append(
            f"left out: {', '.join(mixed)} (a recovery changed the number of ranks mid-training, "
            "so its epoch times belong to no one configuration)"
        )
    if mode == "mixed":
        notes.append("the runs mix strong and weak scaling; speedups use the strong formulas")
    modes_used = sorted({r.embed_mode for r in usable if r.embed_mode})
    if len(modes_used) > 1:
        notes.append(
            f"the runs mix embeddings modes ({', '.join(modes_used)}): each mode is its own "
            "configuration; a speedup against a baseline of another mode compares the "
            "algorithms as well as the process counts (an async run of N processes has one "
            "parameter server and N-1 workers), and the PIP loss says what an epoch bought"
        )
    if len({_job(r) for r in usable if r.source != "csv"}) > 1:
        notes.append(
            "the runs differ in model or sequence settings: their epoch times are not the same "
            "job's, so speedups between them mix two effects"
        )
    sources = {r.source for r in usable}
    if "csv" in sources and "folder" in sources:
        notes.append(
            "the runs mix imported CSV rows with run folders: a CSV row records no model, "
            "sequence length or dataset, so whether it ran the same job as the folders' runs "
            "is not checked; speedups and the frontier across them may compare different jobs"
        )
    priced = [r for r in usable if r.usd_per_hour > 0]
    unpriced = [r.run_id for r in usable if r.usd_per_hour <= 0]
    if priced and unpriced:
        notes.append(
            f"no price: {', '.join(unpriced)} (a `sentitop train` run, or a profile without a "
            "price): their $ read 0 beside priced runs; compare their hours, not their $"
        )
    single = [r.run_id for r in usable if r.source == "folder" and len(r.epoch_seconds) == 1]
    if single and len(configs) > 1:
        notes.append(
            f"one measured epoch only: {', '.join(single)}: a first epoch carries the warm-up "
            "(allocation, caches, the data copy), so speedups and efficiencies from it can be "
            "off, even above 1; measure 2 epochs or more"
        )
    for run in runs:
        if run.epochs_left_out:
            notes.append(
                f"{run.run_id}: left out of its configuration's epoch time: "
                f"{run.epochs_left_out} epoch(s) split by a `train --resume` or trained on "
                "another number of ranks"
            )
    skipped = [r.run_id for r in runs if not r.epoch_seconds]
    if skipped:
        notes.append(f"left out (no measured epoch): {', '.join(skipped)}")
    for run in usable:
        outcome = run_outcome(run)
        if not outcome.accuracy_counts:
            notes.append(
                f"{run.run_id}: {outcome.why}: its accuracy is left out of its configuration's "
                "accuracy and $/point (its epoch times are kept)"
            )
    for cfg in configs:
        _compare(cfg, base, weak=mode == "weak")
        _thread_notes(cfg, base)
        _noise_notes(cfg)
        seconds = cfg.epoch_s * n_epochs
        cfg.hours = billed_hours(seconds, cfg.billing)
        cfg.usd = billed_usd(seconds, cfg.usd_per_hour, cfg.billing)
        if cfg.accuracy:
            cfg.usd_per_point = cfg.usd / (100.0 * cfg.accuracy)
        if (
            cfg.published_usd is not None
            and n_epochs == cfg.runs[0].epochs
            and abs(round(cfg.usd, 2) - cfg.published_usd) > 0.005
        ):
            cfg.notes.append(f"published ${cfg.published_usd:.2f}, computed ${cfg.usd:.2f}")
    return SeriesMetrics(configs, base, n_epochs, mode, notes, usable[0].task)


SUPERLINEAR = 1.2
"""Efficiency above this is flagged: usually the runs saw different machine load."""
UNTRUSTED = 1.5
"""Efficiency above this (speedup per worker 1.5 x the ideal) is marked not trustworthy: no
cache effect makes a worker that much faster; one run was slowed (a loaded machine, more
threads than free cores) or the runs did not do the same work."""
UNTRUSTED_MARK = "⚠"
"""What the report's tables and the dashboard put before an untrusted ratio."""
NOISY_CV = 0.25
"""Epoch-time coefficient of variation above this is flagged as noisy."""


def _thread_notes(cfg: ConfigMetrics, base: ConfigMetrics) -> None:
    """Say when ``cfg`` ran other threads per rank than the baseline: its speedup then mixes the
    worker count with the threads, and the ideal is the ratio of threads in all."""
    if cfg is base or not (cfg.threads and base.threads) or cfg.threads == base.threads:
        return
    mine, theirs = cfg.workers * cfg.threads, base.workers * base.threads
    cfg.notes.append(
        f"ran {cfg.threads} thread(s) per rank where the baseline {base.label} ran "
        f"{base.threads}: {mine} thread(s) in all against {theirs}, so the ideal speedup is "
        f"{mine / theirs:.2g}, not {cfg.workers / base.workers:.2g}; its efficiency is "
        "measured against that ideal, and its speedup mixes the process count with the "
        "threads (compare runs of equal --threads)"
    )


def _noise_notes(cfg: ConfigMetrics) -> None:
    if cfg.untrusted or cfg.untrusted_tts:
        which = cfg.efficiency if cfg.untrusted else cfg.efficiency_tts
        cfg.notes.append(
            f"efficiency {which:.2f} > {UNTRUSTED}: super-linear by far, not trustworthy "
            "(marked ⚠): one of the runs was slowed or sped up by something other than its "
            "workers (a loaded machine, more threads than free cores, different work); re-run "
            "both on an idle machine with equal --threads before using the figure"
        )
    else:
        for what, value in (("", cfg.efficiency), (" by time to threshold", cfg.efficiency_tts)):
            if value is not None and math.isfinite(value) and value > SUPERLINEAR:
                cfg.notes.append(
                    f"efficiency{what} {value:.2f} > {SUPERLINEAR}: superlinear; the runs were "
                    "probably measured under different machine load, or one started slower "
                    "(its first epoch), which time to threshold carries (re-run them, or "
                    "check `phase` events)"
                )
    epochs = [s for r in cfg.runs for s in r.epoch_seconds]
    if len(epochs) > 1:
        cv = statistics.pstdev(epochs) / statistics.fmean(epochs)
        if cv > NOISY_CV:
            cfg.notes.append(
                f"epoch times vary by {cv:.0%} (coefficient of variation over "
                f"{len(epochs)} epochs): noisy measurement"
            )


def _compare(cfg: ConfigMetrics, base: ConfigMetrics, *, weak: bool) -> None:
    scale = cfg.workers / base.workers
    if cfg.threads and base.threads:  # local CPU runs: the ideal is the ratio of threads in all
        scale = cfg.workers * cfg.threads / (base.workers * base.threads)  # (1 proc x 2 threads
        # against 2 x 1: ideal 1; by workers alone a 2.65x speedup read as efficiency 1.33)
    cfg.speedup, cfg.efficiency = _ratios(base.epoch_s, cfg.epoch_s, scale, weak)
    if base.time_to_threshold_s and cfg.time_to_threshold_s:
        cfg.speedup_tts, cfg.efficiency_tts = _ratios(
            base.time_to_threshold_s, cfg.time_to_threshold_s, scale, weak
        )


def _ratios(base_s: float, s: float, scale: float, weak: bool) -> tuple[float, float]:
    """(speedup, efficiency) of time ``s`` against ``base_s`` at ``scale`` x the workers."""
    if not (s > 0 and math.isfinite(s) and math.isfinite(base_s)):
        return math.nan, math.nan
    if weak:
        efficiency = base_s / s
        return efficiency * scale, efficiency
    speedup = base_s / s
    return speedup, speedup / scale


def pareto_front(configs: list[ConfigMetrics]) -> list[ConfigMetrics]:
    """Configurations no other one beats on both hours and $, fastest first."""
    front = [
        c
        for c in configs
        if not any(
            (o.hours <= c.hours and o.usd <= c.usd) and (o.hours < c.hours or o.usd < c.usd)
            for o in configs
        )
    ]
    return sorted(front, key=lambda c: (c.hours, c.usd))


def cheapest_within(configs: list[ConfigMetrics], deadline_h: float) -> ConfigMetrics | None:
    """The cheapest configuration finishing within ``deadline_h`` hours (ties: the faster)."""
    meeting = [c for c in configs if c.hours <= deadline_h]
    return min(meeting, key=lambda c: (c.usd, c.hours)) if meeting else None

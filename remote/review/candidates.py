"""The planner's candidate configurations: GPU sets (one type, mixed, spot) and the pick.

A set's epoch on GPUs, from per-GPU rates (measured or transferred, remote.review.transfer):

    epoch_s = n_train / (Σ rateᵢ · e) + (n_train / batch) · s · 2(n-1)/n

``e`` = 1 for identical GPUs, the load balancer's measured efficiency for mixed ones; ``s`` =
seconds of all-reduce per step and unit of ring traffic, from the old study's 1/4/8-GPU runs
(scaling it by the instances' network bandwidth back-tested worse: BENCHMARKS.md).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from engine.errors import InputError
from remote.pricing import Catalog, PriceBook
from remote.profile import UNSUPPORTED_GPUS, Profile
from remote.review.hardware import gpu_table, instance_links
from remote.review.metrics import billed_usd
from remote.review.scaling import compute_units, ring
from remote.review.transfer import (
    BALANCER_EFFICIENCY,
    RateEstimate,
    Workload,
    band_logs,
    bundled_anchors,
)
from remote.run_record import groups_label

CANDIDATE_COUNTS = (1, 2, 4, 8)
"""Instance counts tried for each GPU instance type."""

MIXED_TYPES = 5
"""Mixed sets are built from this many single-GPU types with the lowest $ per sample."""

MIXED_COUNTS = (1, 2, 3)
"""Instances of each type in a mixed set of two types."""


@dataclass(slots=True)
class Candidate:
    """One configuration with its predicted hours and $ and their band."""

    label: str
    hardware: str
    instance_type: str | None
    count: int
    workers: int
    usd_per_hour: float
    epoch_s: float
    seconds: float
    """Predicted seconds for the N epochs (+ evaluation, + fixed overhead where measured)."""
    usd: float
    is_target: bool = False
    actual_s: list[float] = field(default_factory=list)
    """Measured seconds of past runs of this configuration (same epochs basis)."""
    band: float = 1.0
    """The prediction lies in [value / band, value · band] (from back-test errors)."""
    basis: str = ""
    """How the time was predicted (measured on …; scaled by …)."""
    estimate: bool = False
    """True when no run of this workload was measured on this hardware."""
    market: str = "on-demand"
    """on-demand, spot, or mixed (spot and on-demand groups)."""
    groups: list[tuple[str, int, bool]] = field(default_factory=list)
    """(instance type, count, spot) of the set (EC2 candidates)."""

    @property
    def hours(self) -> float:
        """Predicted hours."""
        return self.seconds / 3600.0

    @property
    def usd_high(self) -> float:
        """$ at the slow end of the band."""
        return billed_usd(self.seconds * self.band, self.usd_per_hour)

    @property
    def usd_low(self) -> float:
        """$ at the fast end of the band (never under the billing minimum)."""
        return billed_usd(self.seconds / self.band, self.usd_per_hour)

    def fits(self, deadline_h: float | None, budget_usd: float | None, *, high: bool) -> bool:
        """Meets the deadline and budget (at the slow end of the band when ``high``)."""
        factor = self.band if high else 1.0
        usd = self.usd_high if high else self.usd
        ok_time = deadline_h is None or self.hours * factor <= deadline_h
        return ok_time and (budget_usd is None or usd <= budget_usd)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "label": self.label,
            "hardware": self.hardware,
            "instance_type": self.instance_type,
            "count": self.count,
            "workers": self.workers,
            "usd_per_hour": self.usd_per_hour,
            "market": self.market,
            "epoch_s": round(self.epoch_s, 3),
            "seconds": round(self.seconds, 1),
            "hours": round(self.hours, 4),
            "hours_band": [round(self.hours / self.band, 4), round(self.hours * self.band, 4)],
            "usd": round(self.usd, 4),
            "usd_band": [
                round(self.usd_low, 4),
                round(self.usd_high, 4),
            ],
            "band": round(self.band, 3),
            "estimate": self.estimate,
            "basis": self.basis,
            "groups": [list(g) for g in self.groups],
            "is_target": self.is_target,
        }


SPOT_INTERRUPTIONS_PER_HOUR = 0.02
"""Assumed interruptions per spot instance-hour (planning default; `plan --spot-interruptions`).
AWS publishes interruption frequency per month in buckets (<5 % ... >20 %); GPU types are often
in the high buckets, so 2 %/h (≈ one in 50 instance-hours) is a deliberately cautious guess."""
SPOT_INTERRUPTIONS_MAX = 1.0
"""Highest rate accepted (0 is the lowest): one interruption per instance-hour, far above any
AWS bucket; beyond it the restart model (:func:`spot_overhead`) means nothing."""
SPOT_RESTART_S = 300.0 + 150.0
"""Wall seconds one interruption costs a run: a replacement instance started and set up
(≈ 5 min on EC2, assumed) plus half the default 5-minute checkpoint interval redone. The
measured recovery itself (benchmarks/bench_recovery.py, loopback) is 10-16 s of it."""


@dataclass(frozen=True, slots=True)
class GpuJob:
    """What every GPU candidate shares: the work and how sync and evaluation cost."""

    epochs: int
    n_train: int
    n_test: int
    evals: int
    batch: int
    sync_step_s: float
    count_band_log: float
    """|log error| of worker-count scaling (leave-one-out on the old study's runs)."""
    spot_interruptions_h: float = SPOT_INTERRUPTIONS_PER_HOUR
    """Interruptions per spot instance-hour assumed when pricing spot sets."""


def hours_text(hours: float) -> str:
    """A deadline for people: "2 h", "1.5 h", "45 min", "0.6 min", "3 s" ("0.0166667 h" read
    as a typo, and a few seconds read "0 min")."""
    if hours >= 1:
        return f"{hours:g} h"
    minutes = round(hours * 60, 1)
    return f"{minutes:g} min" if minutes >= 0.1 else f"{round(hours * 3600, 1):g} s"


def check_spot_rate(value: float, name: str = "spot interruptions per hour") -> float:
    """``value`` if a finite rate in [0, :data:`SPOT_INTERRUPTIONS_MAX`], else InputError."""
    if not (math.isfinite(value) and 0.0 <= value <= SPOT_INTERRUPTIONS_MAX):
        raise InputError(
            f"{name} {value:g}: expected interruptions per spot instance-hour from 0 to "
            f"{SPOT_INTERRUPTIONS_MAX:g} (default {SPOT_INTERRUPTIONS_PER_HOUR:g})"
        )
    return value


def spot_overhead(seconds: float, spot_instances: int, rate_h: float) -> float:
    """Expected wall seconds with interruptions: each of ``spot_instances`` is interrupted at
    ``rate_h`` per hour and each interruption costs :data:`SPOT_RESTART_S` of the whole run
    (s' = s + rate·n·(s'/3600)·restart, solved for s'; capped at 10× when it diverges)."""
    load = rate_h * spot_instances * SPOT_RESTART_S / 3600.0
    return seconds / (1.0 - load) if load < 0.9 else seconds * 10.0


def gpu_set(
    groups: list[tuple[str, int, bool]],
    catalog: Catalog,
    rates: dict[str, RateEstimate],
    job: GpuJob,
    prices: dict[tuple[str, bool], float],
) -> Candidate | None:
    """The candidate of ``groups`` (None when a type has no GPU rate or no price)."""
    total_rate = 0.0
    gpus = 0
    models: list[str] = []
    usd_h = 0.0
    for name, count, spot in groups:
        row = catalog.specs(name)
        price = prices.get((name, spot))
        if row is None or row.gpus < 1 or row.gpu_model not in rates or price is None:
            return None
        total_rate += count * row.gpus * rates[row.gpu_model].samples_per_s
        gpus += count * row.gpus
        models.append(row.gpu_model)
        usd_h += count * price
    mixed = len(set(models)) > 1
    if mixed:
        total_rate *= BALANCER_EFFICIENCY
    compute = job.n_train / total_rate
    sync = (job.n_train / job.batch) * job.sync_step_s * ring(gpus)
    epoch = compute + sync
    eval_s = job.n_test / (3.0 * total_rate)  # forward only: ≈ 1/3 of a training step
    seconds = job.epochs * epoch + job.evals * eval_s
    spot_instances = sum(count for _, count, spot in groups if spot)
    calm = seconds
    if spot_instances:
        seconds = spot_overhead(seconds, spot_instances, job.spot_interruptions_h)
    band_log = max(rates[m].band_log for m in models) + (job.count_band_log if gpus > 1 else 0.0)
    basis = "; ".join(dict.fromkeys(rates[m].basis for m in models))
    if gpus > 1:
        links = instance_links()
        over = "; ".join(
            f"{name}: {links[name].describe()}" for name, _, _ in groups if name in links
        )
        basis += (
            f"; {gpus} GPUs: all-reduce {job.sync_step_s * 1000:.1f} ms/step x 2(n-1)/n "
            "(old study, not scaled by link speed: that back-tested worse)"
            + (f" over {over}" if over else "")
        )
    if mixed:
        basis += f"; mixed GPUs: load balancer efficiency {BALANCER_EFFICIENCY:.3f} (measured)"
    if spot_instances:
        basis += (
            f"; spot: {job.spot_interruptions_h:g} interruptions per instance-hour assumed, "
            f"{SPOT_RESTART_S:.0f} s each (replacement + half a checkpoint interval): "
            f"+{seconds - calm:.0f} s expected"
        )
    spots = {s for _, _, s in groups}
    label = groups_label(groups) or f"{groups[0][1]}×{groups[0][0]}"
    return Candidate(
        label=label,
        hardware="+".join(sorted(set(models))),
        instance_type=groups[0][0] if len(groups) == 1 else None,
        count=sum(c for _, c, _ in groups),
        workers=gpus,
        usd_per_hour=usd_h,
        epoch_s=epoch,
        seconds=seconds,
        usd=billed_usd(seconds, usd_h),
        band=math.exp(band_log),
        basis=basis,
        estimate=any(rates[m].estimate for m in models),
        market="mixed" if len(spots) > 1 else ("spot" if True in spots else "on-demand"),
        groups=list(groups),
    )


def gpu_prices(book: PriceBook, catalog: Catalog) -> dict[tuple[str, bool], float]:
    """(type, spot) -> $/h for every GPU type with an on-demand price (spot where known)."""
    out: dict[tuple[str, bool], float] = {}
    for row in catalog.rows():
        if row.gpus < 1 or row.name in {n for n, _ in out}:
            continue
        on_demand = book.hourly_usd(row.name)
        if on_demand is None:
            continue
        out[(row.name, False)] = on_demand
        spot = book.spot_price(row.name)
        if spot is not None:
            out[(row.name, True)] = spot.usd_per_hour
    return out


def gpu_candidates(
    catalog: Catalog,
    rates: dict[str, RateEstimate],
    job: GpuJob,
    prices: dict[tuple[str, bool], float],
) -> list[Candidate]:
    """Every single-type set (counts × markets) and two-type mixed sets of the best types;
    never a type whose GPUs current PyTorch cannot use (:func:`unsupported_note` says so)."""
    out: list[Candidate] = []
    gpu_of = {r.name: r.gpu_model for r in catalog.rows()}
    prices = {k: v for k, v in prices.items() if gpu_of.get(k[0]) not in UNSUPPORTED_GPUS}
    for (name, spot), _ in sorted(prices.items()):
        for count in CANDIDATE_COUNTS:
            cand = gpu_set([(name, count, spot)], catalog, rates, job, prices)
            if cand is not None:
                out.append(cand)
    singles = [
        c
        for c in out
        if c.count == 1 and c.workers == 1 and c.market == "on-demand" and c.instance_type
    ]
    best = [c.instance_type or "" for c in sorted(singles, key=lambda c: c.usd)[:MIXED_TYPES]]
    for a, b in itertools.combinations(best, 2):
        models = {gpu_of.get(a), gpu_of.get(b)}
        if len(models) < 2:
            continue
        for na, nb in itertools.product(MIXED_COUNTS, MIXED_COUNTS):
            for sa, sb in ((False, False), (True, True), (False, True)):
                if (a, sa) not in prices or (b, sb) not in prices:
                    continue
                groups = [(a, na, sa), (b, nb, sb)]
                cand = gpu_set(groups, catalog, rates, job, prices)
                if cand is not None:
                    out.append(cand)
    return out


def unsupported_note(catalog: Catalog, target: Candidate) -> str | None:
    """Which GPU types the candidates leave out, and a warning when the profile's own uses one."""
    types = sorted({r.name for r in catalog.rows() if r.gpu_model in UNSUPPORTED_GPUS})
    if not types:
        return None
    models = ", ".join(f"{m} ({why})" for m, why in UNSUPPORTED_GPUS.items())
    note = f"not ranked: {', '.join(types)}: their GPUs, {models}, are not supported by current "
    note += "PyTorch CUDA builds (training would fail or fall back to CPU)"
    own = [m for m in target.hardware.split("+") if m in UNSUPPORTED_GPUS]
    if own:
        note += f"; the profile's own configuration uses {', '.join(own)}: its prediction is "
        note += "for hardware this PyTorch cannot train on (use g4dn, g5 or g6)"
    return note


@dataclass(slots=True)
class Choice:
    """The pick under the constraints, or why there is none and what comes nearest."""

    pick: Candidate | None
    safe: bool
    """The pick meets the constraints even at the slow end of its band."""
    ranked: list[Candidate]
    """Candidates meeting the constraints (at the predicted value), best first."""
    nearest: list[Candidate]
    """When none meets them: the nearest options (fastest, or cheapest)."""
    message: str
    sure: list[Candidate] = field(default_factory=list)
    """Those of ``ranked`` that meet the constraints even at the slow end of their band."""


def choose(
    candidates: list[Candidate],
    *,
    deadline_h: float | None,
    budget_usd: float | None,
    extra_s: float = 0.0,
    extra_usd: float = 0.0,
) -> Choice:
    """Cheapest meeting a deadline; fastest within a budget; cheapest meeting both.

    ``extra_s``/``extra_usd``: preprocessing time and $ every candidate shares. Candidates
    meeting the constraints at the slow end of their band are preferred.
    """
    d = None if deadline_h is None else deadline_h - extra_s / 3600
    b = None if budget_usd is None else budget_usd - extra_usd
    if deadline_h is not None:
        key = lambda c: (c.usd, c.hours)  # noqa: E731
    elif budget_usd is not None:
        key = lambda c: (c.hours, c.usd)  # noqa: E731
    else:
        key = lambda c: (c.usd, c.hours)  # noqa: E731
    meeting = sorted((c for c in candidates if c.fits(d, b, high=False)), key=key)
    safe = [c for c in meeting if c.fits(d, b, high=True)]
    if meeting:
        pick = safe[0] if safe else meeting[0]
        return Choice(pick, bool(safe), meeting, [], "", safe)
    parts = []
    if deadline_h is not None:
        parts.append(f"finishes within {hours_text(deadline_h)}")
    if budget_usd is not None:
        parts.append(f"costs at most ${budget_usd:g}")
    if deadline_h is not None:
        nearest = sorted(candidates, key=lambda c: (c.hours, c.usd))[:3]
    else:
        nearest = sorted(candidates, key=lambda c: (c.usd, c.hours))[:3]
    msg = "no configuration " + " and ".join(parts) + " (predicted)"
    return Choice(None, False, [], nearest, msg)


def cpu_target(
    profile: Profile,
    hardware: str,
    instance_type: str | None,
    count: int,
    workload: Workload,
    job: GpuJob,
    usd_h: float,
    catalog: Catalog,
) -> Candidate:
    """A CPU profile with no past run: the development host's measured core rate, transferred."""
    bands = band_logs()
    host = next(a for a in bundled_anchors() if a.device not in gpu_table())
    same = [
        a
        for a in bundled_anchors()
        if a.device == host.device
        and (a.workload.model, a.workload.seq_len) == (workload.model, workload.seq_len)
    ]
    anchor = same[0] if same else host
    rate = anchor.samples_per_s * anchor.workload.cost / workload.cost
    workers = profile.world_size()
    units = compute_units(profile.provider, workers, profile.train.threads)
    if profile.provider == "ssh":
        units = float(workers * (profile.train.threads or 1))
    elif profile.provider == "ec2":  # CPU instances: every vCPU of every instance
        specs = [(catalog.specs(g.instance_type), g.count) for g in getattr(profile, "nodes", [])]
        units = float(sum(count * (row.vcpus if row else 1) for row, count in specs))
    networked = profile.provider != "local" and workers > 1  # ranks on several machines
    sync = (job.n_train / job.batch) * job.sync_step_s * ring(workers) if networked else 0.0
    seconds = job.epochs * (job.n_train / (rate * units) + sync) + job.evals * job.n_test / (
        3 * rate * units
    )
    band_log = bands["device_cpu"] + (0.0 if same else bands["workload"])
    band_log += job.count_band_log if networked else 0.0
    basis = (
        f"measured on one core of the development host ({anchor.where}): "
        f"{anchor.samples_per_s:,.0f} samples/s of the {anchor.workload.label}"
        + ("" if same else f"; scaled by MACs per sample to the {workload.label}")
        + f"; x {units:g} cores; these cores not measured (device band applied)"
        + (
            f"; {workers} ranks over the network: all-reduce {job.sync_step_s * 1000:.1f} "
            "ms/step x 2(n-1)/n and the worker-count band of the old study"
            if networked
            else ""
        )
    )
    label = (
        f"local ×{workers} proc"
        if profile.provider == "local"
        else f"{profile.name} ({workers} proc)"
    )
    return Candidate(
        label,
        hardware,
        instance_type,
        count,
        workers,
        usd_h,
        seconds / job.epochs,
        seconds,
        billed_usd(seconds, usd_h),
        True,
        band=math.exp(band_log),
        basis=basis,
        estimate=True,
    )

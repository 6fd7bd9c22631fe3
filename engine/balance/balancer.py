"""Load balancer: per-rank data shares and batch sizes from measured speed (pure, torch-free).

The arithmetic, for one epoch (or one chunk of K steps when rebalancing inside an epoch):

* every rank runs the same number of steps ``I`` (no rank hangs at the all-reduce);
* step ``s`` has a global batch ``g_s`` known to every rank without communication: ``B`` for
  every full step and the remainder on the last (a remainder smaller than the world size is
  folded into the previous step, so every rank has at least one sample in every step);
* rank ``i`` takes ``b_i`` samples per full step (``sum b_i = B``, ``b_i >= 1``, ``b_i`` ∝ its
  speed) from its own contiguous slice of the epoch permutation, so every sample is used exactly
  once per epoch and nothing is dropped or repeated;
* rank ``i`` multiplies its mean loss by ``loss_scale = n_i(s) * W / g_s``; DDP's average of the
  gradients is then exactly the mean gradient over the ``g_s`` samples of the step.

Speeds come from measured seconds per sample (smoothed with an EMA); shares only move when some
share would change by at least the hysteresis (relative to itself), and no share falls below
``min_share``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from engine.config import BalanceConfig
from engine.errors import ConfigError


def _positive(values: Sequence[float], name: str) -> None:
    if not values:
        raise ConfigError(f"{name} is empty; expected one value per rank")
    for i, v in enumerate(values):
        if not (math.isfinite(v) and v > 0):
            raise ConfigError(f"{name}[{i}] = {v!r} is not allowed; expected a finite value > 0")


def _sig(value: float) -> float:
    """``value`` rounded to 6 significant digits (compact event fields)."""
    return float(f"{value:.6g}")


def apportion(total: int, weights: Sequence[float], minimum: int = 0) -> list[int]:
    """Split ``total`` into integers ∝ ``weights``, each >= ``minimum``, summing to ``total``.

    Parts whose quota falls below ``minimum`` are pinned there and the rest is re-split among the
    others; the integer rounding is by largest remainder (ties to the lower index).
    """
    k = len(weights)
    _positive(weights, "weights")
    if total < minimum * k:
        raise ConfigError(f"cannot split {total} into {k} parts of at least {minimum} each")
    exact = [Fraction(w) for w in weights]  # exact arithmetic: the parts always sum to total
    pinned: set[int] = set()
    while True:
        free = [i for i in range(k) if i not in pinned]
        rest = total - minimum * len(pinned)
        wsum = sum((exact[i] for i in free), Fraction(0))
        quotas = {i: rest * exact[i] / wsum for i in free}
        low = [i for i in free if quotas[i] < minimum]
        if not low:
            break
        pinned.update(low)
    parts = [minimum] * k
    for i in free:
        parts[i] = math.floor(quotas[i])
    left = total - sum(parts)
    order = sorted(free, key=lambda i: (-(quotas[i] - parts[i]), i))
    for i in order[:left]:
        parts[i] += 1
    return parts


def shares_from_speed(sec_per_sample: Sequence[float], min_share: float) -> list[float]:
    """Data shares ∝ speed (1 / seconds per sample), summing to 1, none below ``min_share``.

    When ``min_share * W > 1`` the floor cannot hold for everyone and every rank gets ``1 / W``.
    """
    _positive(sec_per_sample, "sec_per_sample")
    k = len(sec_per_sample)
    if min_share * k >= 1:
        return [1.0 / k] * k
    speeds = [1.0 / s for s in sec_per_sample]
    pinned: set[int] = set()
    while True:
        free = [i for i in range(k) if i not in pinned]
        rest = 1.0 - min_share * len(pinned)
        total = math.fsum(speeds[i] for i in free)
        shares = [min_share] * k
        for i in free:
            shares[i] = rest * speeds[i] / total
        low = [i for i in free if shares[i] < min_share]
        if not low:
            return shares
        pinned.update(low)


def smooth(previous: Sequence[float] | None, new: Sequence[float], alpha: float) -> list[float]:
    """Exponential moving average: ``alpha * new + (1 - alpha) * previous`` element-wise."""
    if previous is None:
        return list(new)
    if len(previous) != len(new):
        raise ConfigError(f"got {len(new)} measurements for {len(previous)} ranks")
    return [alpha * n + (1.0 - alpha) * p for p, n in zip(previous, new, strict=True)]


def apply_hysteresis(current: Sequence[float], target: Sequence[float], hysteresis: float) -> bool:
    """True when shares should move: some share would change by at least ``hysteresis`` of itself.

    Relative, because a rank's step time scales with its share: a 2 % hysteresis leaves no
    rank more than about 2 % slower than balanced, whatever its share.
    """
    return max(abs(t - c) / c for c, t in zip(current, target, strict=True)) >= hysteresis


@dataclass(frozen=True, slots=True)
class SplitPlan:
    """Who processes which positions of the epoch permutation, step by step, in one chunk.

    Positions ``start .. start + n - 1`` of the epoch's sample permutation are covered,
    step-major: step ``s`` takes the ``step_global(s)`` positions from ``start + s * global_batch``
    and rank ``i`` its ``local_size`` of them after the ranks before it, so the positions done
    after any step are a prefix whatever the shares or the world size (resume on fewer ranks).
    """

    start: int
    """First position of the epoch permutation covered by this plan."""
    n: int
    """Samples covered (every one exactly once)."""
    global_batch: int
    """Global batch of a full step (sum of ``batch_sizes``)."""
    shares: tuple[float, ...]
    """Target data shares (sum 1) the batch sizes were derived from."""
    batch_sizes: tuple[int, ...]
    """Per-rank samples in every step but the last."""
    last_sizes: tuple[int, ...]
    """Per-rank samples in the last step (each >= 1)."""
    steps: int
    """Steps in this chunk, the same on every rank."""

    @property
    def world(self) -> int:
        """Number of ranks."""
        return len(self.batch_sizes)

    @property
    def counts(self) -> tuple[int, ...]:
        """Samples per rank in this chunk (sum = n)."""
        return tuple(
            (self.steps - 1) * b + last
            for b, last in zip(self.batch_sizes, self.last_sizes, strict=True)
        )

    def step_global(self, step: int) -> int:
        """Global batch of ``step`` (the same number on every rank, no communication)."""
        self._check_step(step)
        return self.global_batch if step < self.steps - 1 else sum(self.last_sizes)

    def local_size(self, rank: int, step: int) -> int:
        """Samples rank ``rank`` processes in ``step``."""
        self._check_step(step)
        return self.batch_sizes[rank] if step < self.steps - 1 else self.last_sizes[rank]

    def local_range(self, rank: int, step: int) -> tuple[int, int]:
        """Permutation positions ``[lo, hi)`` rank ``rank`` processes in ``step``."""
        sizes = self.batch_sizes if step < self.steps - 1 else self.last_sizes
        lo = self.start + step * self.global_batch + sum(sizes[:rank])
        return lo, lo + self.local_size(rank, step)

    def loss_scale(self, rank: int, step: int) -> float:
        """Factor for the rank's mean loss so DDP's gradient average is the global mean."""
        return self.local_size(rank, step) * self.world / self.step_global(step)

    def predict_seconds(self, sec_per_sample: Sequence[float], per_step_s: float = 0.0) -> float:
        """Predicted wall time: each step waits for its slowest rank, plus a per-step cost."""
        full = max(b * s for b, s in zip(self.batch_sizes, sec_per_sample, strict=True))
        last = max(b * s for b, s in zip(self.last_sizes, sec_per_sample, strict=True))
        return (self.steps - 1) * full + last + self.steps * per_step_s

    def _check_step(self, step: int) -> None:
        if not 0 <= step < self.steps:
            raise IndexError(f"step {step} outside 0..{self.steps - 1}")


def split(start: int, n: int, global_batch: int, shares: Sequence[float]) -> SplitPlan:
    """Plan ``n`` samples (from permutation position ``start``) over ranks with these shares."""
    world = len(shares)
    if global_batch < world:
        raise ConfigError(
            f"batch_size = {global_batch} is smaller than the world size {world}; "
            "give every rank at least one sample per step"
        )
    if n < world:
        raise ConfigError(f"{n} training samples cannot feed {world} ranks; use fewer processes")
    batch_sizes = apportion(global_batch, shares, minimum=1)
    full, rest = divmod(n, global_batch)
    if rest == 0:
        steps, last = full, list(batch_sizes)
    elif rest >= world:
        steps, last = full + 1, apportion(rest, shares, minimum=1)
    else:  # 0 < rest < world, full >= 1: fold the remainder into the last full step
        extra = apportion(rest, shares, minimum=0)
        steps, last = full, [b + e for b, e in zip(batch_sizes, extra, strict=True)]
    return SplitPlan(
        start=start,
        n=n,
        global_batch=global_batch,
        shares=tuple(shares),
        batch_sizes=tuple(batch_sizes),
        last_sizes=tuple(last),
        steps=steps,
    )


def ideal_epoch_seconds(n: int, sec_per_sample: Sequence[float]) -> float:
    """Lower bound of an epoch's compute time: ``n / sum(rates)``."""
    _positive(sec_per_sample, "sec_per_sample")
    return n / math.fsum(1.0 / s for s in sec_per_sample)


def ring_allreduce_factor(world: int) -> float:
    """Relative cost of a ring all-reduce among ``world`` ranks (``2 (W - 1) / W``)."""
    return 2.0 * (world - 1) / world if world > 1 else 0.0


@dataclass(frozen=True, slots=True)
class Advice:
    """Whether dropping the slowest rank would make epochs faster or cheaper."""

    drop_rank: int
    """The slowest rank (the candidate to drop)."""
    epoch_s_with: float
    """Predicted balanced epoch seconds with every rank."""
    epoch_s_without: float
    """Predicted balanced epoch seconds without ``drop_rank``."""
    cost_with: float
    """Cost of one epoch with every rank ($ when prices are known, else rank-hours)."""
    cost_without: float
    """Cost of one epoch without ``drop_rank``."""
    unit: str
    """``usd`` or ``rank_hours``."""
    faster: bool
    """Dropping the rank would shorten an epoch."""
    cheaper: bool
    """Dropping the rank would lower the cost of an epoch."""
    message: str
    """One sentence for the summary."""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for events and summary.json."""
        return {name: getattr(self, name) for name in self.__slots__}


def advise(
    sec_per_sample: Sequence[float],
    *,
    n: int,
    global_batch: int,
    allreduce_s: float,
    per_step_s: float = 0.0,
    usd_per_hour: Sequence[float] | None = None,
    min_share: float = 0.0,
    balanced: bool = True,
) -> Advice | None:
    """Compare predicted epoch time and cost with and without the slowest rank (None if W = 1).

    ``allreduce_s`` is the measured all-reduce seconds per step at this world size (scaled by the
    ring factor for one rank fewer, and zero for a single rank); ``per_step_s`` is any other
    per-step cost (optimizer, data) that stays. ``balanced``: the run splits by speed (the
    balancer on); off, both epochs are predicted with equal shares, as the run trained (a
    balanced epoch it never ran made dropping a 3x straggler look slower), and the message
    says what --balance would give.
    """
    world = len(sec_per_sample)
    if world < 2:
        return None
    _positive(sec_per_sample, "sec_per_sample")
    prices = list(usd_per_hour) if usd_per_hour is not None else [1.0] * world
    if len(prices) != world:
        raise ConfigError(f"got {len(prices)} prices for {world} ranks")
    unit = "usd" if usd_per_hour is not None else "rank_hours"
    drop = max(range(world), key=lambda i: (sec_per_sample[i], i))
    keep = [i for i in range(world) if i != drop]

    def epoch_s(ranks: list[int], by_speed: bool = balanced) -> float:
        sps = [sec_per_sample[i] for i in ranks]
        w = len(ranks)
        ar = allreduce_s * ring_allreduce_factor(w) / ring_allreduce_factor(world)
        floor = min(min_share, 1.0 / w)
        shares = shares_from_speed(sps, floor) if by_speed else [1.0 / w] * w
        plan = split(0, n, max(global_batch, w), shares)
        return plan.predict_seconds(sps, per_step_s + ar)

    t_with, t_without = epoch_s(list(range(world))), epoch_s(keep)
    c_with = t_with / 3600.0 * math.fsum(prices)
    c_without = t_without / 3600.0 * math.fsum(prices[i] for i in keep)
    faster = t_without < t_with * (1 - 1e-9)
    cheaper = c_without < c_with * (1 - 1e-9)

    def money(cost: float) -> str:
        return f"${cost:.4g}" if unit == "usd" else f"{cost:.4g} rank-h"

    time_part = f"{t_with:.2f} s → {t_without:.2f} s per epoch"
    cost_part = f"{money(c_with)} → {money(c_without)}"
    slower = f"{abs(t_without / t_with - 1) * 100:.0f}%"
    dearer = f"{abs(c_without / c_with - 1) * 100:.0f}%"
    if faster and cheaper:
        verdict = f"drop rank {drop}: {slower} faster and {dearer} cheaper"
    elif cheaper:
        verdict = f"dropping rank {drop} would be {dearer} cheaper but {slower} slower"
    elif faster:
        verdict = f"dropping rank {drop} would be {slower} faster but {dearer} dearer"
    else:
        verdict = f"keep rank {drop}: dropping it would be slower and no cheaper"
    message = f"{verdict} ({time_part}, {cost_part})"
    if not balanced:
        message += (
            f"; equal shares, as this run trained: with --balance every rank would take "
            f"{epoch_s(list(range(world)), True):.2f} s per epoch"
        )
    return Advice(
        drop_rank=drop,
        epoch_s_with=t_with,
        epoch_s_without=t_without,
        cost_with=c_with,
        cost_without=c_without,
        unit=unit,
        faster=faster,
        cheaper=cheaper,
        message=message,
    )


@dataclass(slots=True)
class Balancer:
    """Per-epoch (and per-chunk) split plans, fed with measured per-rank compute speed.

    Every rank holds one and feeds it the same gathered measurements, so all ranks compute the
    same plans without further communication. With ``config.enabled`` false the shares stay
    equal (plain DDP split, but with exact loss weights and no dropped sample).
    """

    config: BalanceConfig
    """Balancer settings."""
    world: int
    """Number of ranks."""
    global_batch: int
    """Global batch size B (sum of per-rank batches)."""
    n: int
    """Training samples per epoch."""
    shares: list[float] = field(default_factory=list)
    """Current target shares (equal until the first rebalance)."""
    sec_per_sample: list[float] | None = None
    """Smoothed measured compute seconds per sample, per rank."""
    per_step_s: float = 0.0
    """Smoothed per-step cost outside compute (all-reduce, optimizer, data)."""
    allreduce_s: float = 0.0
    """Smoothed all-reduce seconds per step (the least-waiting rank's wait)."""
    epochs_seen: int = 0
    """Epochs completed (for ``every_epochs``)."""
    rebalances: int = 0
    """How many times the shares moved."""
    fresh: bool = True
    """The next window replaces the smoothed measurements instead of blending in: true at the
    start and after every move (older windows ran other batch sizes, whose per-sample cost
    differs when a step has a fixed cost, and would slow convergence)."""

    def __post_init__(self) -> None:
        if self.world < 1:
            raise ConfigError(f"world size {self.world} must be >= 1")
        split(0, self.n, self.global_batch, [1.0] * self.world)  # validates B >= W, n >= W
        if not self.shares:
            self.shares = [1.0 / self.world] * self.world

    def plan(self, start: int = 0) -> SplitPlan:
        """The plan from permutation position ``start``: to the epoch's end, or K steps."""
        remaining = self.n - start
        if remaining < 1:
            raise IndexError(f"position {start} is past the epoch's {self.n} samples")
        k = self.config.every_steps if self.config.enabled else 0
        size = remaining
        if k > 0 and remaining - k * self.global_batch >= self.world:
            size = k * self.global_batch
        return split(start, size, self.global_batch, self.shares)

    def observe(
        self,
        sec_per_sample: Sequence[float],
        *,
        per_step_s: float | None = None,
        allreduce_s: float | None = None,
    ) -> None:
        """Feed one window of measurements (every rank's, as gathered); smoothed by EMA."""
        _positive(sec_per_sample, "sec_per_sample")
        if len(sec_per_sample) != self.world:
            raise ConfigError(f"got {len(sec_per_sample)} measurements for {self.world} ranks")
        a = 1.0 if self.fresh else self.config.smoothing
        self.fresh = False
        self.sec_per_sample = smooth(self.sec_per_sample, sec_per_sample, a)
        if per_step_s is not None:
            self.per_step_s = smooth([self.per_step_s], [per_step_s], a)[0]
        if allreduce_s is not None:
            self.allreduce_s = smooth([self.allreduce_s], [allreduce_s], a)[0]

    def end_chunk(self, *, epoch_end: bool) -> bool:
        """Call after each plan is done; returns True when the shares moved."""
        due = False
        if epoch_end:
            self.epochs_seen += 1
            due = self.epochs_seen % self.config.every_epochs == 0
        elif self.config.every_steps > 0:
            due = True
        if not (due and self.config.enabled and self.sec_per_sample is not None):
            return False
        target = shares_from_speed(self.sec_per_sample, self.config.min_share)
        if not apply_hysteresis(self.shares, target, self.config.hysteresis):
            return False
        self.shares = target
        self.rebalances += 1
        self.fresh = True
        return True

    def epoch_plan(self) -> SplitPlan:
        """The whole epoch split with the current shares (ignoring ``every_steps`` chunks)."""
        return split(0, self.n, self.global_batch, self.shares)

    def predicted_epoch_s(self) -> float | None:
        """Predicted seconds of a full epoch with the current shares (None before measuring)."""
        if self.sec_per_sample is None:
            return None
        return self.epoch_plan().predict_seconds(self.sec_per_sample, self.per_step_s)

    def event_fields(self, plan: SplitPlan) -> dict[str, Any]:
        """Fields of a ``balance`` event for ``plan`` (add epoch and step)."""
        predicted = self.predicted_epoch_s()
        sps = self.sec_per_sample
        return {
            "shares": [round(s, 6) for s in plan.shares],
            "batch_sizes": list(plan.batch_sizes),
            "counts": list(plan.counts),
            "steps": plan.steps,
            "sec_per_sample": None if sps is None else [_sig(s) for s in sps],
            "predicted_epoch_s": None if predicted is None else _sig(predicted),
            "ideal_epoch_s": None if sps is None else _sig(ideal_epoch_seconds(self.n, sps)),
            "enabled": self.config.enabled,
        }

    def advice(self, usd_per_hour: Sequence[float] | None = None) -> Advice | None:
        """Drop-the-slowest-rank advice from the smoothed measurements (None before any)."""
        if self.sec_per_sample is None:
            return None
        return advise(
            self.sec_per_sample,
            n=self.n,
            global_batch=self.global_batch,
            allreduce_s=self.allreduce_s,
            per_step_s=max(self.per_step_s - self.allreduce_s, 0.0),
            usd_per_hour=usd_per_hour,
            min_share=self.config.min_share,
            balanced=self.config.enabled,
        )


def advise_from_summary(
    block: Mapping[str, Any], usd_per_hour: Sequence[float] | None = None
) -> Advice | None:
    """The advice of a summary's ``balance`` block again, with per-rank prices ($/h).

    For the operator side, which knows the prices: ``summary.json`` records rank-hours.
    """
    sps = block.get("sec_per_sample")
    if not sps:
        return None
    return advise(
        sps,
        n=int(block["n"]),
        global_batch=int(block["global_batch"]),
        allreduce_s=float(block["allreduce_s_per_step"]),
        per_step_s=float(block["other_s_per_step"]),
        usd_per_hour=usd_per_hour,
        min_share=float(block["min_share"]),
        balanced=bool(block.get("enabled", True)),
    )


def describe_balance_event(event: Mapping[str, Any]) -> str:
    """One terminal line for a ``balance`` event (headless progress)."""
    shares = "/".join(f"{s:.3f}" for s in event["shares"])
    batches = "/".join(str(b) for b in event["batch_sizes"])
    where = f"epoch {event['epoch'] + 1} step {event['step']}"  # events count epochs from 0
    line = f"balance {where}: shares {shares}  batch {batches}"
    if event.get("sec_per_sample"):
        ms = "/".join(f"{s * 1e3:.3g}" for s in event["sec_per_sample"])
        line += f"  ms/sample {ms}  predicted epoch {event['predicted_epoch_s']:.1f} s"
    return line

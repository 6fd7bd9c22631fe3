"""Running cost meter (per-second billing, 60 s minimum, EMR surcharge, spot) and budgets."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from engine.errors import BudgetError
from remote.review.money_text import money

log = logging.getLogger(__name__)

BILLING_MINIMUM_S = 60.0
"""EC2 and EMR bill per second with a one-minute minimum per instance start."""
DEFAULT_INTERVAL_S = 2.0
"""Seconds between `cost` events (the running figure and the cost plot move at this pace)."""
DEFAULT_TEARDOWN_S = 30.0
"""Billing time allowed for teardown when deciding whether a budget would be exceeded."""

Stage = Literal["preprocess", "train", "all"]
Market = Literal["on_demand", "spot"]


@dataclass(frozen=True, slots=True)
class CostLine:
    """A priced group of identical machines of a profile."""

    name: str
    """Short label, e.g. 'nodes[0] g5.xlarge' or 'emr core'."""
    field: str
    """Profile field it came from (for error messages), e.g. nodes[0].instance_type."""
    instance_type: str
    count: int
    """Machines in the group."""
    usd_per_hour: float
    """EC2 price of one machine."""
    emr_usd_per_hour: float = 0.0
    """EMR surcharge of one machine (0 outside EMR)."""
    market: Market = "on_demand"
    stage: Stage = "train"
    """When the group runs: preprocess, train, or all (the operator's machine)."""
    source: str = "bundled"
    """Where the price came from (live, cache, bundled, user, estimate)."""

    @property
    def total_usd_per_hour(self) -> float:
        """USD per hour of the whole group, EMR surcharge included."""
        return self.count * (self.usd_per_hour + self.emr_usd_per_hour)


@dataclass(slots=True)
class _Running:
    line: CostLine
    started_at: float
    stopped_at: float | None = None

    def billed_s(self, now: float) -> float:
        end = self.stopped_at if self.stopped_at is not None else now
        elapsed = max(0.0, end - self.started_at)
        return max(BILLING_MINIMUM_S, float(math.ceil(elapsed)))

    def usd(self, now: float) -> float:
        return self.line.total_usd_per_hour * self.billed_s(now) / 3600.0

    def accrued_usd(self, now: float) -> float:
        end = self.stopped_at if self.stopped_at is not None else now
        return self.line.total_usd_per_hour * max(0.0, end - self.started_at) / 3600.0


PEAK_HOLD_S = 10.0
"""A sum of rates held for less than this is not a peak: launch times have whole-second
resolution, so a replacement seemed to start before the line of the node it replaced stopped,
and a run that replaced a node reported the rate of both beside the rest."""


def peak_rate(spans: Iterable[tuple[float, float, float]], hold_s: float = PEAK_HOLD_S) -> float:
    """The largest sum of rates over (start, stop, rate) spans that overlap in time for at
    least ``hold_s`` (a span that stops when another starts does not overlap it); when no sum
    was held that long (a run of a few seconds), the largest sum at all."""
    changes = sorted(
        (t, delta) for start, stop, rate in spans for t, delta in ((start, rate), (stop, -rate))
    )  # at equal times the stop (negative) comes first
    held = brief = running = 0.0
    ends = [t for t, _ in changes[1:]] + [math.inf]
    for (t, delta), t_next in zip(changes, ends, strict=False):  # none: no spans, no rate
        running += delta
        brief = max(brief, running)
        if t_next - t >= hold_s:
            held = max(held, running)
    return held or brief


class CostMeter:
    """Σ over machine groups of price x billed seconds; thread-safe.

    Start a group when its machines start (``start``), stop it when they are gone.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lines: dict[str, _Running] = {}
        self._lock = threading.Lock()

    def start(self, line: CostLine, *, at: float | None = None, key: str | None = None) -> str:
        """Begin billing ``line``; returns the key to stop it with (default: line.name)."""
        key = key or line.name
        with self._lock:
            if key in self._lines and self._lines[key].stopped_at is None:
                raise ValueError(f"cost line {key!r} is already running")
            self._lines[key] = _Running(line, self._clock() if at is None else at)
        return key

    def relabel(self, key: str, new_key: str, line: CostLine) -> str:
        """Go on billing ``key`` as ``new_key`` with ``line``'s labels, from the same start
        (one machine whose role became known later: an instance that became a node)."""
        with self._lock:
            if new_key != key and new_key in self._lines:
                raise ValueError(f"cost line {new_key!r} exists already")
            old = self._lines[key]
            relabelled = _Running(line, old.started_at, old.stopped_at)
            # rebuilt in the same order, so the summary lists the line where it started
            self._lines = {
                (new_key if k == key else k): (relabelled if k == key else r)
                for k, r in self._lines.items()
            }
        return new_key

    def stop(self, key: str, *, at: float | None = None) -> None:
        """Stop billing one group (idempotent)."""
        with self._lock:
            running = self._lines.get(key)
            if running is not None and running.stopped_at is None:
                running.stopped_at = self._clock() if at is None else at

    def stop_all(self, *, at: float | None = None) -> None:
        """Stop billing every group."""
        for key in list(self._lines):
            self.stop(key, at=at)

    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now

    def usd(self, now: float | None = None) -> float:
        """USD spent so far (billed seconds, minimum 60 s per group)."""
        now = self._now(now)
        with self._lock:
            return sum(r.usd(now) for r in self._lines.values())

    def accrued_usd(self, now: float | None = None) -> float:
        """USD of the seconds used so far, without the one-minute minimum (moves with time)."""
        now = self._now(now)
        with self._lock:
            return sum(r.accrued_usd(now) for r in self._lines.values())

    def usd_per_hour(self) -> float:
        """USD per hour of the groups running now."""
        with self._lock:
            return sum(
                r.line.total_usd_per_hour for r in self._lines.values() if r.stopped_at is None
            )

    def peak_usd_per_hour(self, now: float | None = None) -> float:
        """The most USD per hour of groups running at the same time so far: the cluster's
        price, not the sum over every group ever started (a replaced node or an EMR cluster
        that finished before training are not billed beside what replaced or followed them)."""
        now = self._now(now)
        with self._lock:
            spans = [
                (r.started_at, r.stopped_at if r.stopped_at is not None else now, r.line)
                for r in self._lines.values()
            ]
        return peak_rate((start, stop, line.total_usd_per_hour) for start, stop, line in spans)

    def elapsed_s(self, now: float | None = None) -> float:
        """Seconds since the first group started (0 before)."""
        now = self._now(now)
        with self._lock:
            starts = [r.started_at for r in self._lines.values()]
        return max(0.0, now - min(starts)) if starts else 0.0

    def projected_usd(self, now: float | None = None, remaining_s: float | None = None) -> float:
        """Total USD if the running groups run ``remaining_s`` more (now's cost when unknown)."""
        now = self._now(now)
        return self.usd(now + max(0.0, remaining_s or 0.0))

    def would_exceed(
        self, max_usd: float, *, now: float | None = None, horizon_s: float = 0.0
    ) -> bool:
        """True when the cost ``horizon_s`` from now (groups still running) is above ``max_usd``."""
        return self.usd(self._now(now) + max(0.0, horizon_s)) > max_usd

    def tick(self, now: float | None = None, remaining_s: float | None = None) -> dict[str, float]:
        """Fields of a `cost` event: usd, accrued_usd, usd_per_hour, projected_usd, elapsed_s."""
        now = self._now(now)
        return {
            "usd": round(self.usd(now), 6),
            "accrued_usd": round(self.accrued_usd(now), 6),
            "usd_per_hour": round(self.usd_per_hour(), 6),
            "projected_usd": round(self.projected_usd(now, remaining_s), 6),
            "elapsed_s": round(self.elapsed_s(now), 3),
        }

    def summary(self, now: float | None = None) -> dict[str, Any]:
        """The cost part of summary.json: total and one entry per group."""
        now = self._now(now)
        with self._lock:
            total = sum(r.usd(now) for r in self._lines.values())
            first = min((r.started_at for r in self._lines.values()), default=now)
            lines: list[dict[str, Any]] = [
                {
                    "name": key,
                    "instance_type": r.line.instance_type,
                    "count": r.line.count,
                    "market": r.line.market,
                    "stage": r.line.stage,
                    "usd_per_hour": round(r.line.total_usd_per_hour, 6),
                    "price_source": r.line.source,
                    "billed_s": r.billed_s(now),
                    "usd": round(r.usd(now), 6),
                    "start_s": round(r.started_at - first, 3),
                    "stop_s": round((r.stopped_at or now) - first, 3),
                }
                for key, r in self._lines.items()
            ]
        return {"usd": round(total, 6), "lines": lines}


class CostTicker:
    """Emits `cost` events every ``interval_s`` and calls ``on_exceeded`` once on budget breach.

    ``emit`` is an engine Emitter (``emit("cost", **fields)``) or a callable taking the fields.
    ``on_exceeded(reason)`` runs on the ticker thread (use loop.call_soon_threadsafe from asyncio),
    or in the loop when run with :meth:`run_async`.
    """

    def __init__(
        self,
        meter: CostMeter,
        emit: Any,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        max_usd: float | None = None,
        on_exceeded: Callable[[str], object] | None = None,
        teardown_s: float = DEFAULT_TEARDOWN_S,
        remaining: Callable[[], float | None] | None = None,
    ) -> None:
        self.meter = meter
        self._emit = emit
        self.interval_s = interval_s
        self.max_usd = max_usd
        self.on_exceeded = on_exceeded
        self.horizon_s = interval_s + teardown_s
        self.remaining = remaining
        self.exceeded_reason: str | None = None
        """Why the budget stopped the run (None while within budget)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick_once(self, now: float | None = None) -> dict[str, float]:
        """Emit one `cost` event and check the budget; returns the event fields."""
        fields = self.meter.tick(now, self.remaining() if self.remaining else None)
        if hasattr(self._emit, "emit"):
            self._emit.emit("cost", **fields)
        else:
            self._emit(fields)
        if (
            self.max_usd is not None
            and self.exceeded_reason is None
            and self.meter.would_exceed(self.max_usd, now=now, horizon_s=self.horizon_s)
        ):
            self.exceeded_reason = (
                f"budget max_usd ${self.max_usd:.2f} would be exceeded within "
                f"{self.horizon_s:.0f} s (spent ${fields['usd']:.2f} at "
                f"${fields['usd_per_hour']:.2f}/h)"
            )
            if self.on_exceeded is not None:
                self.on_exceeded(self.exceeded_reason)
        return fields

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick_once()
            except Exception:  # keep metering; the failure is logged, not hidden
                log.exception("cost tick failed")

    def start(self) -> CostTicker:
        """Emit a first event now and tick on a daemon thread."""
        self.tick_once()
        self._thread = threading.Thread(target=self._loop, name="cost-ticker", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        """Stop ticking and emit a final event (call after the meter's groups are stopped)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.interval_s + 5)
        return self.tick_once()

    async def run_async(self) -> None:
        """Tick in the running event loop until cancelled (an alternative to start/stop)."""
        import asyncio

        while True:
            self.tick_once()
            await asyncio.sleep(self.interval_s)

    def __enter__(self) -> CostTicker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def check_launch_budget(
    profile_name: str,
    usd_per_hour: float,
    *,
    max_usd_per_hour: float | None = None,
    max_usd: float | None = None,
) -> None:
    """Refuse to launch (BudgetError) when the rate or the one-minute minimum breaks the budget."""
    if max_usd_per_hour is not None and usd_per_hour > max_usd_per_hour:
        raise BudgetError(
            f"profile {profile_name!r} costs ${usd_per_hour:.3f}/h, above its "
            f"budget.max_usd_per_hour of ${max_usd_per_hour:.3f}/h; not launching",
            hint="use fewer or cheaper instances (or spot), or raise budget.max_usd_per_hour",
        )
    minimum = usd_per_hour * BILLING_MINIMUM_S / 3600.0
    if max_usd is not None and minimum > max_usd:
        raise BudgetError(
            f"profile {profile_name!r} costs at least {money(minimum)} (one billed minute at "
            f"${usd_per_hour:.3f}/h), above its budget.max_usd of {money(max_usd)}; not "
            "launching",
            hint="raise budget.max_usd or use cheaper instances",
        )

"""Dashboard performance: first frame, event ingest rate, redraw with 10^6 points, memory bound.

Run: `.venv/bin/python benchmarks/bench_dashboard.py` (about a minute on 2 cores). Every figure
is printed next to its target as a ratio measured in this run; nothing is asserted.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from array import array
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.events import encode_event, read_events  # noqa: E402
from tui.model import RunState  # noqa: E402
from tui.model.series import Series  # noqa: E402
from tui.replay import read_events_fast  # noqa: E402

FIXTURE = ROOT / "tests" / "tui" / "fixtures" / "runs" / "20261121-fixture"
TARGET_FIRST_FRAME_S = 1.5
TARGET_INGEST_PER_S = 50_000
TARGET_REDRAW_S = 0.050
WORLD = 4

CHILD = """
import resource, sys, time
t0 = time.perf_counter()
from tui.app import make_app
app = make_app({kwargs})
async def first_frame(pilot):
    await pilot.pause()
    use = resource.getrusage(resource.RUSAGE_SELF)
    print("FIRST_FRAME", time.perf_counter() - t0, use.ru_utime + use.ru_stime,
          "torch" in sys.modules, flush=True)
    app.exit()
app.run(headless=True, size=(120, 40), auto_pilot=first_frame)
"""


def first_frame(kwargs: str, runs: int = 3) -> dict[str, Any]:
    """Seconds from process start to the first painted frame (wall and CPU, median of
    ``runs`` fresh processes), and whether torch was loaded."""
    walls, cpus, torch = [], [], False
    for _ in range(runs):
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", CHILD.format(kwargs=kwargs)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        walls.append(time.perf_counter() - start)
        line = next(ln for ln in out.splitlines() if ln.startswith("FIRST_FRAME"))
        _, _inside, cpu, loaded = line.split()
        cpus.append(float(cpu))
        torch = torch or loaded == "True"
    med = statistics.median
    return {"wall": med(walls), "cpu": med(cpus), "torch": torch, "walls": walls}


def synthetic_events(n: int) -> Any:
    """n events with a live run's mix: mostly steps, plus balance/cost/phase/node/epoch/log."""
    t, step = 1.7e9, 0
    shares = [1 / WORLD] * WORLD
    yield {
        "type": "run_start",
        "t": t,
        "run": "bench",
        "profile": "bench",
        "world_size": WORLD,
        "config": {"epochs": 1000},
    }
    for i in range(1, n):
        t += 0.01
        k = i % 100
        if k < 80:
            step += 1
            yield {
                "type": "step",
                "t": t,
                "epoch": step // 5000,
                "step": step % 5000,
                "global_step": step,
                "loss": 0.5 + 0.3 * math.sin(step / 500),
                "samples_per_s": 9000.0 + (step % 17),
                "lr": 0.002,
            }
        elif k < 84:
            shares = [s * (1 + 0.01 * math.sin(i + r)) for r, s in enumerate(shares)]
            total = sum(shares)
            shares = [s / total for s in shares]
            yield {
                "type": "balance",
                "t": t,
                "epoch": step // 5000,
                "step": step,
                "shares": shares,
                "batch_sizes": [int(512 * s) for s in shares],
                "sec_per_sample": [1e-4 * (1 + r / 10) for r in range(WORLD)],
                "predicted_epoch_s": 60.0,
            }
        elif k < 88:
            yield {
                "type": "cost",
                "t": t,
                "usd": i * 1e-5,
                "usd_per_hour": 12.0,
                "projected_usd": 99.0,
                "elapsed_s": t - 1.7e9,
            }
        elif k < 92:
            yield {
                "type": "phase",
                "t": t,
                "rank": k % WORLD,
                "epoch": step // 5000,
                "data": 1.0,
                "h2d": 0.1,
                "forward": 5.0,
                "backward": 9.0,
                "allreduce_opt": 2.0,
                "eval": 1.0,
                "steps": 100,
            }
        elif k < 94:
            yield {
                "type": "progress",
                "t": t,
                "stage": "train",
                "done": step,
                "total": 5e6,
                "unit": "steps",
                "rate": 100.0,
            }
        elif k < 96:
            yield {
                "type": "node",
                "t": t,
                "node": f"n{k % 2}",
                "status": "running",
                "gpu": "T4",
                "detail": f"step {step}",
            }
        elif k < 98:
            yield {
                "type": "checkpoint",
                "t": t,
                "epoch": step // 5000,
                "step": step,
                "path": "ckpt.pt",
            }
        elif k < 99:
            yield {
                "type": "epoch",
                "t": t,
                "epoch": step // 5000,
                "train_loss": 0.3,
                "test_loss": 0.35,
                "accuracy": 0.9,
                "precision": 0.9,
                "recall": 0.9,
                "f1": 0.9,
                "seconds": 60.0,
                "samples_per_s": 9000.0,
            }
        else:
            yield {"type": "error", "t": t, "message": "rank 3 slow", "rank": 3, "tail": ["a", "b"]}


def bench_ingest(path: Path, n: int) -> dict[str, tuple[float, float]]:
    """(events/s wall, events per CPU-second) for the replay path, json+ingest, ingest only."""
    rates: dict[str, tuple[float, float]] = {}
    for label, reader in (("replay path", read_events_fast), ("json+ingest", read_events)):
        state = RunState()
        start, cpu = time.perf_counter(), time.process_time()
        batch: list[dict[str, Any]] = []
        for event in reader(path):
            batch.append(event)
            if len(batch) == 5000:
                state.ingest_many(batch)
                batch = []
        state.ingest_many(batch)
        rates[label] = (n / (time.perf_counter() - start), n / (time.process_time() - cpu))
    events = list(synthetic_events(200_000))
    state = RunState()
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(events), 5000):
        state.ingest_many(events[i : i + 5000])
    rates["ingest only"] = (
        len(events) / (time.perf_counter() - start),
        len(events) / (time.process_time() - cpu),
    )
    return rates


def bench_memory(path: Path) -> dict[str, float]:
    """Memory held by the state after 10^5 and after 10^6 events of one streamed replay."""
    gc.collect()
    tracemalloc.start()
    state = RunState()
    held: dict[int, float] = {}
    marks = (100_000, 250_000, 500_000, 750_000, 1_000_000)
    for i, event in enumerate(read_events_fast(path), 1):
        state.ingest(event)
        if i in marks:
            gc.collect()
            held[i] = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    return {
        "held_mb": held,
        "series_points": len(state.train_loss),
        "log_lines": len(state.log),
        "epoch_rows": len(state.epochs),
    }


def fill(series: Series, n: int, y: np.ndarray, t: np.ndarray) -> None:
    """Give a series n points directly (benchmark setup only)."""
    series.capacity = max(series.capacity, 2 * n + 16)
    series.t = array("d", t[:n].tobytes())
    series.step = array("d", np.arange(n, dtype=np.float64).tobytes())
    series.y = array("d", y[:n].tobytes())
    series.version += 1


def fixture_state(n: int) -> RunState:
    """The recorded fixture run, in a state whose series may hold 2n points."""
    state = RunState(capacity=2 * n + 16)
    state.ingest_many(read_events(FIXTURE / "events.jsonl"))
    return state


def fill_big(state: RunState, n: int) -> None:
    """Give the 12 plotted series of ``state`` n points each."""
    rng = np.random.default_rng(0)
    t = np.linspace(0, 36_000, n)
    base = 0.5 + 0.3 * np.exp(-np.arange(n) / (n / 5))
    for s in (state.train_loss, state.test_loss, state.throughput, state.cost):
        fill(s, n, base + rng.normal(0, 0.02, n), t)
    for table in (state.rank_shares, state.rank_throughput):
        for s in table.values():
            fill(s, n, 0.25 + rng.normal(0, 0.01, n), t)


def append_points(state: RunState, k: int) -> None:
    """k new points on every plotted series (what arrives between two redraws)."""
    series = [state.train_loss, state.test_loss, state.throughput, state.cost]
    series += list(state.rank_shares.values()) + list(state.rank_throughput.values())
    for s in series:
        t0, y0 = s.t[-1], s.y[-1]
        for i in range(k):
            s.append(t0 + i + 1, y0, float(len(s)))


async def bench_redraw(n: int) -> dict[str, Any]:
    """(wall, CPU) seconds of Run-screen redraws with n points in each of 12 series."""
    from tests.tui.fakes import build_app
    from tui.screens.run import RunScreen
    from tui.widgets.line_plot import LinePlot

    app = build_app(start="run")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RunScreen)
        plots = list(screen.query(LinePlot))
        paints: list[tuple[float, float]] = []
        timer = screen._update_timer  # its callback lays out and paints the frame
        paint = timer._callback
        assert paint is not None

        def timed_paint() -> None:
            start, cpu = time.perf_counter(), time.process_time()
            paint()
            paints.append((time.perf_counter() - start, time.process_time() - cpu))

        timer._callback = timed_paint

        async def painted() -> tuple[float, float, float]:
            """Views redrawn from the state, then the frame laid out and painted."""
            paints.clear()
            start, cpu = time.perf_counter(), time.process_time()
            screen.refresh_views(force=True)
            views = (time.perf_counter() - start, time.process_time() - cpu)
            await pilot.pause()  # the screen's 60 fps update timer lays out and paints
            waited = time.perf_counter() - start
            return (
                views[0] + sum(w for w, _ in paints),
                views[1] + sum(c for _, c in paints),
                waited,
            )

        def redraw() -> tuple[float, float]:
            start, cpu = time.perf_counter(), time.process_time()
            screen.refresh_views(force=True)
            for plot in plots:
                plot.render()
            return time.perf_counter() - start, time.process_time() - cpu

        screen.state = fixture_state(n)
        await painted()  # tables, phases and log of the fixture run, a few points per plot
        fill_big(screen.state, n)
        points = len(screen.state.train_loss)
        first = await painted()
        steady = []
        for _ in range(10):
            append_points(screen.state, 500)
            steady.append(redraw())
        frames = []
        for _ in range(7):
            append_points(screen.state, 500)
            frames.append(await painted())
    med = statistics.median
    return {
        "points": points,
        "first": first[:2],
        "steady": (med(w for w, _ in steady), med(c for _, c in steady)),
        "painted": (med(w for w, *_ in frames), med(c for _, c, _ in frames)),
        "waited": med(w for *_, w in frames),
    }


def main() -> int:
    """Run every benchmark and print the figures."""
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    print(f"machine: {os.cpu_count()} CPUs, load average {load} at start")
    print(
        "== first frame (median of 3 fresh processes, headless 120x40, interpreter start and"
        " imports included)"
    )
    for label, kwargs in (
        ("sentitop (Profiles)", "profiles_dir='profiles'"),
        ("sentitop replay", f"replay={str(FIXTURE)!r}"),
    ):
        ff = first_frame(kwargs)
        print(
            f"  {label:20s} wall {ff['wall']:4.2f} s = {ff['wall'] / TARGET_FIRST_FRAME_S:4.2f} x"
            f" target {TARGET_FIRST_FRAME_S} s; CPU {ff['cpu']:4.2f} s = "
            f"{ff['cpu'] / TARGET_FIRST_FRAME_S:4.2f} x (torch imported: {ff['torch']}; "
            f"runs {', '.join(f'{w:.2f}' for w in ff['walls'])} s)"
        )

    n = 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for event in synthetic_events(n):
                fh.write(encode_event(event) + "\n")
        print(f"== ingest ({n:,} synthetic events, {path.stat().st_size / 2**20:.0f} MiB)")
        for label, (rate, cpu_rate) in bench_ingest(path, n).items():
            print(
                f"  {label:12s} {rate:9,.0f} events/s wall = {rate / TARGET_INGEST_PER_S:4.1f} x"
                f" target {TARGET_INGEST_PER_S:,}; {cpu_rate:9,.0f} per CPU-second = "
                f"{cpu_rate / TARGET_INGEST_PER_S:4.1f} x"
            )
        print("== memory held by RunState during one 10^6-event replay (tracemalloc)")
        mem = bench_memory(path)
        marks = "  ".join(f"{k / 1e6:g}M: {v:.1f} MiB" for k, v in mem["held_mb"].items())
        held = list(mem["held_mb"].values())
        print(f"  {marks}")
        print(
            f"  growth over the last half (0.5M -> 1M events): {held[-1] / held[2]:.2f}x; "
            f"kept: {mem['series_points']:,} train-loss points (cap 16,384), "
            f"{mem['log_lines']} log lines (cap 500), {mem['epoch_rows']} epoch rows (cap 2,000)"
        )

    print("== redraw of the Run screen, 12 series x 10^6 points each (120x40; medians of 10 / 7)")
    red = asyncio.run(bench_redraw(n))
    for label, key in (
        ("first frame after 10^6 points arrive", "first"),
        ("plots redrawn, +500 points/series", "steady"),
        ("frame: redraw + layout + paint", "painted"),
    ):
        wall, cpu = red[key]
        print(
            f"  {label:37s} wall {wall * 1e3:7.1f} ms = {wall / TARGET_REDRAW_S:5.2f} x target "
            f"{TARGET_REDRAW_S * 1e3:.0f} ms; "
            f"CPU {cpu * 1e3:7.1f} ms = {cpu / TARGET_REDRAW_S:5.2f} x"
        )
    print(
        f"  (until the frame is on screen, including the wait for the next tick of Textual's"
        f" 60 fps update timer: {red['waited'] * 1e3:.1f} ms median)"
    )
    print(json.dumps({"redraw_points_per_series": red["points"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

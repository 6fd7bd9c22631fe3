"""PNG plots of a review (matplotlib, Agg backend, imported lazily)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from remote.review.metrics import ConfigMetrics, SeriesMetrics, pareto_front

DPI = 110


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    _plt().close(fig)
    return path


def time_unit(hours: list[float]) -> tuple[str, float]:
    """('hours'|'minutes'|'seconds', factor from hours) readable for values up to max(hours)."""
    top = max(hours, default=0.0)
    if top >= 1.0:
        return "hours", 1.0
    if top >= 1.0 / 30:
        return "minutes", 60.0
    return "seconds", 3600.0


def _xticks(ax: Any, workers: list[int]) -> None:
    ax.set_xticks(sorted(set(workers)))
    ax.set_xlim(0, max(workers) * 1.08 + 0.5)


def speedup_plot(series: SeriesMetrics, path: Path) -> Path:
    """Speedup (left) and efficiency (right) vs workers, by epoch time and time to threshold."""
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    cfgs = series.configs
    xs = [c.workers for c in cfgs]
    base = series.baseline.workers
    ideal = [x / base for x in xs]
    left.plot(xs, ideal, "--", color="grey", label="ideal (linear)")
    # equal values coincide (the baseline is 1.00 both ways): epoch-time dots are drawn small
    # and on top of large hollow squares, so neither marker hides the other
    dot = {"marker": "o", "markersize": 5, "zorder": 3, "color": "C0", "label": "by epoch time"}
    right.axhline(1.0, ls="--", color="grey", label="ideal")
    modes = sorted({c.embed_mode for c in cfgs})
    for k, mode in enumerate(modes):  # embeddings modes are lines of their own, never joined
        line = [c for c in cfgs if c.embed_mode == mode]
        if len(modes) > 1:
            dot = {**dot, "color": f"C{2 * k}", "label": f"by epoch time ({mode})"}
        left.plot([c.workers for c in line], [c.speedup for c in line], "-", **dot)
        right.plot([c.workers for c in line], [c.efficiency for c in line], "-", **dot)
    tts = [(c.workers, c.speedup_tts, c.efficiency_tts) for c in cfgs if c.speedup_tts]
    if tts:
        square = {
            "marker": "s",
            "markersize": 10,
            "markerfacecolor": "none",
            "markeredgewidth": 1.5,
            "zorder": 2,
            "color": "C1",
            "label": "by time to threshold",
        }
        left.plot([t[0] for t in tts], [t[1] for t in tts], "--", **square)
        right.plot([t[0] for t in tts], [t[2] for t in tts], "--", **square)
    for c in cfgs:
        doubt = {"color": "C3"} if c.untrusted else {}  # super-linear by far: said on the plot
        mark = " (untrusted)" if c.untrusted else ""
        left.annotate(
            f"{c.speedup:.2f}{mark}",
            (c.workers, c.speedup),
            textcoords="offset points",
            xytext=(10, -12),  # below right: clear of the line and of the hollow square
            fontsize=8,
            **doubt,
        )
        right.annotate(
            f"{c.efficiency:.2f}{mark}",
            (c.workers, c.efficiency),
            textcoords="offset points",
            xytext=(10, 6),
            fontsize=8,
            **doubt,
        )
    unit = "GPUs" if any(c.hardware != "local CPU" for c in cfgs) else "processes"
    kind = "scaled speedup (weak)" if series.mode == "weak" else "speedup"
    left.set(
        title=f"{kind.capitalize()} vs {unit}",
        xlabel=unit,
        ylabel=f"{kind} vs {series.baseline.label}",
    )
    right.set(title=f"Efficiency vs {unit}", xlabel=unit, ylabel="efficiency")
    top = max(
        [
            1.1,
            *[c.efficiency for c in cfgs if math.isfinite(c.efficiency)],
            *[t[2] for t in tts if t[2]],
        ]
    )
    right.set_ylim(0, top * 1.15)
    for ax in (left, right):
        _xticks(ax, xs)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    left.set_ylim(0, max([*ideal, *[c.speedup for c in cfgs if math.isfinite(c.speedup)]]) * 1.15)
    return _save(fig, path)


def throughput_plot(series: SeriesMetrics, path: Path) -> Path:
    """Training samples per second (words per second for embeddings runs; epochs per hour
    without either) per config."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    cfgs = series.configs
    words = series.task == "embeddings" and all(c.words_per_s for c in cfgs)
    have = words or all(c.samples_per_s for c in cfgs)
    values = [
        ((c.words_per_s if words else c.samples_per_s) or 0.0) if have else 3600.0 / c.epoch_s
        for c in cfgs
    ]
    bars = ax.bar([c.label for c in cfgs], values, color="C2")
    ax.bar_label(bars, labels=[f"{v:,.0f}" if v >= 10 else f"{v:.2f}" for v in values], fontsize=8)
    unit = "words / s" if words else "samples / s" if have else "epochs / hour"
    ax.set(title="Training throughput", ylabel=unit)
    ax.set_ylim(0, max(values) * 1.18)
    ax.tick_params(axis="x", labelrotation=15)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def loss_plot(series: SeriesMetrics, path: Path) -> Path:
    """Smoothed training loss vs seconds (left) and vs $ (right), one line per run."""
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    drawn = 0
    for i, cfg in enumerate(series.configs):
        for j, run in enumerate(cfg.runs):
            if not run.curve:
                continue
            t = [p[0] for p in run.curve]
            loss = [p[1] for p in run.curve]
            usd = [s * cfg.usd_per_hour / 3600.0 for s in t]
            label = cfg.label + (f" #{j + 1}" if len(cfg.runs) > 1 else "")
            left.plot(t, loss, color=f"C{i}", alpha=1.0 if j == 0 else 0.55, label=label)
            right.plot(usd, loss, color=f"C{i}", alpha=1.0 if j == 0 else 0.55, label=label)
            drawn += 1
    threshold = _threshold(series)
    for ax in (left, right):
        if threshold is not None:
            ax.axhline(threshold, ls=":", color="grey", label=f"threshold {threshold:g}")
        ax.grid(alpha=0.3)
        ax.set_ylabel("smoothed train loss")
        if drawn:
            ax.legend(fontsize=8)
        else:
            ax.text(
                0.5,
                0.5,
                "no loss curves recorded\n(imported runs have none)",
                ha="center",
                va="center",
                transform=ax.transAxes,
                color="grey",
            )
    left.set(title="Loss vs time", xlabel="seconds since training began")
    right.set(title="Loss vs cost", xlabel="USD (training machines)")
    _usd_axis(right)
    return _save(fig, path)


def _usd_axis(ax: Any) -> None:
    """An x axis in dollars: a few ticks, labels like $0.0005, slanted so they never run into
    each other (the default formatter printed nine 7-digit labels into one string)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=5, min_n_ticks=3))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: usd_tick(v)))
    ax.tick_params(axis="x", labelrotation=30)


def usd_tick(value: float) -> str:
    """$ with two significant digits, never in e-notation: $0, $0.00025, $0.012, $1.50, $1,234."""
    if value == 0 or not math.isfinite(value):
        return "$0" if value == 0 else "?"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    decimals = max(2, 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}".rstrip("0").rstrip(".")
    return f"${text}"


def _threshold(series: SeriesMetrics) -> float | None:
    values = [r.loss_threshold for c in series.configs for r in c.runs if r.loss_threshold]
    return values[0] if values else None


def cost_table_plot(series: SeriesMetrics, path: Path) -> Path:
    """Hours and $ for N epochs per configuration, side by side."""
    plt = _plt()
    cfgs = series.configs
    fig, ax = plt.subplots(figsize=(7.5, 4))
    xs = range(len(cfgs))
    width = 0.38
    unit, factor = time_unit([c.hours for c in cfgs])
    hours = ax.bar(
        [x - width / 2 for x in xs], [c.hours * factor for c in cfgs], width, color="C0", label=unit
    )
    ax2 = ax.twinx()
    usd = ax2.bar(
        [x + width / 2 for x in xs], [c.usd for c in cfgs], width, color="C3", label="USD"
    )
    ax.bar_label(hours, labels=[_hours(c.hours) for c in cfgs], fontsize=8)
    ax2.bar_label(usd, labels=[_usd(c.usd) for c in cfgs], fontsize=8)
    ax.set_xticks(list(xs), [c.label for c in cfgs])
    ax.tick_params(axis="x", labelrotation=15)
    ax.set_ylabel(unit, color="C0")
    ax2.set_ylabel("USD", color="C3")
    ax.set_ylim(0, max(c.hours * factor for c in cfgs) * 1.35)
    ax2.set_ylim(0, max(c.usd for c in cfgs) * 1.35 or 1)
    ax.set_title(f"Hours and $ for {series.epochs} epochs")
    ax.legend(
        [hours, usd],
        [
            unit,
            "USD (per-second billing, 60 s minimum)" if cfgs[0].billing == "per_second" else "USD",
        ],
        loc="upper center",
        ncol=2,
        fontsize=8,
    )
    return _save(fig, path)


def pareto_plot(
    series: SeriesMetrics, path: Path, deadline_h: float | None, pick: ConfigMetrics | None
) -> Path:
    """Time vs $ of every configuration, the Pareto frontier and the deadline pick."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 5.2))
    cfgs = series.configs
    unit, k = time_unit([c.hours for c in cfgs] + ([deadline_h] if deadline_h else []))
    ax.scatter(
        [c.hours * k for c in cfgs],
        [c.usd for c in cfgs],
        color="C0",
        zorder=3,
        label="configuration",
    )
    _label_points(ax, [(c.label, c.hours * k, c.usd) for c in cfgs])
    front = pareto_front(cfgs)
    ax.step(
        [c.hours * k for c in front],
        [c.usd for c in front],
        where="post",
        color="C1",
        zorder=2,
        marker="o",
        markersize=11,
        markerfacecolor="none",
        label=f"Pareto frontier ({len(front)} configuration(s))",
    )
    if deadline_h is not None:
        ax.axvline(deadline_h * k, ls="--", color="grey", label=f"deadline {_hours(deadline_h)}")
    if pick is not None:
        ax.scatter(
            [pick.hours * k],
            [pick.usd],
            s=260,
            facecolors="none",
            edgecolors="C3",
            linewidths=2,
            zorder=4,
            label=f"cheapest within the deadline: {pick.label}",
        )
    hi = max([c.hours for c in cfgs] + ([deadline_h] if deadline_h else [])) * k
    ax.set_xlim(0, hi * 1.25)
    ax.set_ylim(0, max(c.usd for c in cfgs) * 1.25 or 1)
    ax.set(title=f"Time vs $ for {series.epochs} epochs", xlabel=unit, ylabel="USD")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    return _save(fig, path)


def _label_points(ax: Any, points: list[tuple[str, float, float]]) -> None:
    """Annotate points; labels of points that nearly coincide are stacked, not overprinted."""
    xs = [p[1] for p in points]
    ys = [p[2] for p in points]
    span_x = max(xs) or 1.0  # the axes start at 0
    span_y = max(ys) or 1.0
    placed: list[tuple[float, float]] = []
    for label, x, y in points:
        near = sum(
            1 for px, py in placed if abs(px - x) < 0.06 * span_x and abs(py - y) < 0.06 * span_y
        )
        ax.annotate(
            label, (x, y), textcoords="offset points", xytext=(9, 9 + 11 * near), fontsize=8
        )
        placed.append((x, y))


def _hours(h: float) -> str:
    return f"{h:.2f} h" if h >= 0.1 else f"{h * 3600:.0f} s"


def _usd(v: float) -> str:
    return f"${v:.2f}" if v >= 0.1 else f"${v:.4f}"

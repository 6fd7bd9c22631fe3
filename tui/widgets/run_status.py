"""The Run screen's status lines: who and where, epoch, step, rates, time, ETA, $ and stages."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tui.format import fmt_duration, fmt_usd, minimum_charged, nice_number
from tui.model import RunState
from tui.widgets.tables import bar

STATUS_STYLE = {
    "running": "bold green",
    "ok": "bold cyan",
    "waiting": "dim",
    "replay stopped": "bold yellow",
}


def status_text(st: RunState, snap: dict[str, Any]) -> Text:
    """Two lines: run, profile, ranks, price, status, warnings; epoch, step, rate, time, $,
    data rate and memory."""
    style = STATUS_STYLE.get(st.status, "bold red")
    line1 = Text.assemble(
        ("run ", "dim"),
        (st.run_id or "—", "bold"),
        ("  profile ", "dim"),
        st.profile or "—",
        ("  ranks ", "dim"),
        str(st.world_size or "—"),
        _embeddings_info(snap["train_info"]) if st.embeddings else "",
        ("  price ", "dim"),
        f"{fmt_usd(st.usd_per_hour)}/h",
        ("  ● ", style),
        (st.status, style),
        (f"  {st.reason}" if st.reason else "", "red"),
        (_warning_note(st), "bold yellow"),
    )
    if st.embeddings:
        rate = f"{nice_number(st.words_per_s)} words/s" if st.words_per_s else "— words/s"
    else:
        rate = f"{nice_number(st.samples_per_s)} samples/s" if st.samples_per_s else "— samples/s"
    total = st.total_epochs
    done = st.epochs_done  # a resumed run's epoch events start where it took over
    stopped_mid_way = st.finished and st.status != "ok" and st.global_step > 0
    # a run stopped in its second epoch still reads epoch 2 (it read 1 once stopped)
    current = (
        done if (st.finished and not stopped_mid_way) or (total and done >= total) else done + 1
    )
    shown = str(current) if current else "—"  # stopped before its first step: not "0/12"
    step = f"{st.global_step:,}"
    if st.resumed_from and not st.train_plan and not st.finished:  # not epoch 1 step 0
        shown, step = "—", "— (loading the checkpoint)"
    line2 = Text.assemble(
        ("epoch ", "dim"),
        f"{shown}/{total}" if total else shown,
        ("  step ", "dim"),
        step,
        ("  ", ""),
        rate,
        ("  elapsed ", "dim"),
        fmt_duration(st.elapsed),
        ("  ETA ", "dim"),
        fmt_duration(snap["eta"]),
        ("  cost ", "dim"),
        cost_text(st, snap["projected"]),  # before the data rate and memory: it matters most
        data_and_memory(st),
        recovery_summary(st.recoveries),
    )
    return Text("\n").join([line1, line2])


def stages_text(stages_rows: list[Any], epochs: tuple[int, int | None]) -> Text:
    """`preprocess ✓ 12s  ▸ train ▶ ██████···· 60% 70/117 steps · epoch 2/3`."""
    stages = Text()
    for name, status, seconds, done, stotal, unit in stages_rows:
        if stages:
            stages.append("  ▸ ", style="dim")
        if status == "running" and not stotal:
            stages.append(f"{name} ▶ ", style="bold green")
            stages.append("starting…" if name == "train" else "running…", style="dim")
        elif status == "running":
            frac = min(done / stotal, 1.0)
            stages.append(f"{name} ▶ ", style="bold green")
            count = f"{nice_number(done)}/{nice_number(stotal)} {unit}"
            stages.append(f"{bar(frac, 10)} {frac:4.0%} {count}")
            if name == "train" and epochs[1]:
                stages.append(f" · epoch {min(epochs[0] + 1, epochs[1])}/{epochs[1]}")
        else:
            mark = "✓" if status == "ok" else ("·" if status == "pending" else f"✗ {status}")
            stages.append(f"{name} {mark} ", style="cyan" if status == "ok" else "red")
            stages.append(fmt_duration(seconds), style="dim")
    if not stages:
        stages.append("no stages yet — waiting for events", style="dim")
    return stages


NBSP = "\u00a0"
"""Between a figure and its unit: the status line wraps at spaces ("read 0.26" / "MB/s")."""


def data_and_memory(st: RunState) -> Text:
    """`  read 3.1 MB/s (0.4 MB/s from disk)  RAM/rank 310/294 MB` when the run reports them,
    else empty."""
    out = Text()
    if st.read_mb_s is not None:
        out.append("  read ", style="dim")
        out.append(f"{nice_number(st.read_mb_s)}{NBSP}MB/s")  # a wrap never splits a figure
        if st.disk_mb_s:
            out.append(f" ({nice_number(st.disk_mb_s)}{NBSP}MB/s from disk)", style="dim")
    if st.rank_rss_mb:
        values = [v for _, v in sorted(st.rank_rss_mb.items())]
        shown = (
            "/".join(f"{v:.0f}" for v in values) if len(values) <= 4 else f"max {max(values):.0f}"
        )
        out.append("  RAM/rank ", style="dim")
        out.append(f"{shown}{NBSP}MB")
    return out


def cost_text(st: RunState, projected: float | None) -> Text:
    """`$0.00081 (min. charge $0.0016) → projected $0.0021`: the dollars used so far, the
    one-minute minimum while it is above them, and the total at the ETA."""
    spent = st.spent
    floor = st.accrued_usd is not None and minimum_charged(st.usd, spent, st.usd_per_hour)
    if st.finished and floor:  # the bill is the minimum charge
        return Text.assemble(
            (fmt_usd(st.usd), "bold yellow"),
            (f" billed (1-min minimum; {fmt_usd(spent)} used)", "dim"),
        )
    text = Text(fmt_usd(spent), style="bold yellow")
    if floor:
        text.append(f" (min. charge {fmt_usd(st.usd)})", style="dim")
    if not st.finished:
        text.append("  → projected ", style="dim")
        text.append(fmt_usd(projected))
    return text


def _embeddings_info(info: dict[str, Any]) -> Text:
    """`  embeddings sync · 2 worker(s) · word · dim 50 · batch 1024` for the status line."""
    parts = [str(info.get("mode") or "?")]
    if "workers" in info:
        parts.append(f"{info['workers']} worker(s)")
    if "encoder" in info:
        parts.append(str(info["encoder"]))
    parts += [f"{k} {info[k]}" for k in ("dim", "batch") if k in info]
    return Text.assemble(("  embeddings ", "dim"), " · ".join(parts))


WARNING_LABELS = {
    "below_majority": "below the majority rate",
    "skipped_share": "many lines skipped",
    "class_share": "a class is rare",
    "path_unused": "a model path went unused",
}
"""Short status-line names of `warning` codes (the log pane has the whole message)."""


def _warning_note(st: RunState) -> str:
    """`  ⚠ below the majority rate (+1 more)` when the run sent warnings, else nothing."""
    if not st.warnings:
        return ""
    code = str(st.warnings[-1].get("code") or "")
    label = WARNING_LABELS.get(code, "warning (see the log)")
    more = f" (+{len(st.warnings) - 1} more)" if len(st.warnings) > 1 else ""
    return f"  ⚠ {label}{more}"


def recovery_summary(recoveries: list[dict[str, Any]]) -> Text:
    """``  ⟳ 2 recoveries, 41s down, $0.03 lost`` (empty without recoveries)."""
    if not recoveries:
        return Text()
    down = sum(float(r.get("downtime_s") or 0) for r in recoveries)
    usd = sum(float(r.get("usd") or 0) for r in recoveries)
    failed = sum(r.get("status") != "ok" for r in recoveries)
    label = f"  ⟳ {len(recoveries)} recover{'y' if len(recoveries) == 1 else 'ies'}"
    return Text.assemble(
        (label, "bold magenta"),
        (f" ({failed} failed)" if failed else "", "red"),
        (f", {fmt_duration(down)} down, {fmt_usd(usd)} lost", "magenta"),
    )

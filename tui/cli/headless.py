"""Headless run display: rich progress (stage, epochs, samples/s, loss, $) and a summary table."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from engine.errors import peer_lost, visible
from remote.run_record import last_evaluated_epoch
from remote.streams import prefixed
from tui.cli.console import tolerant
from tui.format import (
    after_training_line,
    companion_line,
    fmt,
    fmt_billed,
    fmt_usd,
    preprocess_line,
)


class HeadlessProgress:
    """Turns run events into a live rich progress display (thread-safe)."""

    def __init__(self, console: Console, epochs: int) -> None:
        self.console = console
        self._lock = threading.Lock()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[count]}", markup=False),
            TextColumn("{task.fields[info]}", markup=False),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.stage: TaskID = self.progress.add_task("starting", total=None, info="", count="")
        self.epochs: TaskID = self.progress.add_task(
            "epochs", total=max(1, epochs), info="", count=f"0/{epochs}"
        )
        self.epoch_total = epochs
        self.loss: float | None = None
        self.samples_per_s: float | None = None
        self.usd: float | None = None
        self.usd_per_hour: float | None = None
        self.cached_said: set[str] = set()
        """Stages whose summary said they reused a cached result."""

    def __enter__(self) -> HeadlessProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def _info(self) -> str:
        parts = []
        if self.samples_per_s is not None:
            parts.append(f"{self.samples_per_s:,.0f} samples/s")
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4f}")
        if self.usd is not None:
            parts.append(f"{fmt_usd(self.usd)} ({fmt_usd(self.usd_per_hour)}/h)")
        return "  ".join(parts)

    @tolerant
    def on_line(self, node: str, line: str, event: Mapping[str, Any] | None) -> None:
        """Show a node's plain output line (events are shown by :meth:`on_event`)."""
        if event is None and line.strip():
            with self._lock:
                self.console.print(Text(prefixed(node, line), style="dim"))

    @tolerant
    def say(self, line: str) -> None:
        """Print one line of the launcher's own (e.g. what a Ctrl-C does), above the bars."""
        with self._lock:
            self.console.print(Text(line, style="bold yellow"))

    @tolerant
    def on_event(self, event: Mapping[str, Any]) -> None:
        """Update the display for one event."""
        with self._lock:
            self._handle(event)

    def _handle(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "stage_start":
            self.progress.reset(
                self.stage, total=None, description=escape(f"stage: {event.get('stage')}")
            )
            self.progress.update(self.stage, count="", info="")
        elif kind == "progress" and event.get("total"):
            self.progress.update(
                self.stage,
                total=float(event["total"]),
                completed=float(event.get("done") or 0),
                count=f"{float(event.get('done') or 0) / 1e6:,.0f} MB",
                info=_rate(event),
            )
        elif kind == "stage_end":
            status = event.get("status", "ok")
            self.progress.update(self.stage, description=escape(f"{event.get('stage')}: {status}"))
            if event.get("cached") and event.get("stage") not in self.cached_said:
                self.console.print(Text(f"{event.get('stage')}: reused cached result", "dim"))
        elif kind == "step":
            self.loss = event.get("loss", self.loss)
            self.samples_per_s = event.get("samples_per_s", self.samples_per_s)
        elif kind == "epoch":
            done = int(event.get("epoch", 0)) + 1  # events number epochs from 0
            self.progress.update(
                self.epochs, completed=float(done), count=f"{done}/{self.epoch_total}"
            )
            self.console.print(
                Text(
                    f"epoch {done}/{self.epoch_total}:"
                    f"  train loss {fmt(event.get('train_loss'), '.4f')}"
                    f"  test loss {fmt(event.get('test_loss'), '.4f')}"
                    f"  acc {fmt(event.get('accuracy'), '.4f')}  F1 {fmt(event.get('f1'), '.4f')}"
                    f"  {fmt(event.get('seconds'), '.1f')} s"
                )
            )
        elif kind == "summary" and event.get("stage") == "preprocess":
            self.console.print(Text(preprocess_line(event), style="dim"))
            if event.get("cached"):  # "preprocess (cached): …" says it: not again at its end
                self.cached_said.add("preprocess")
        elif kind == "after_training" and event.get("fits"):
            self.console.print(Text(after_training_line(event), style="dim"))
        elif kind == "cost":  # the running figure: accrued (the billed one sits at the minimum)
            self.usd = event.get("accrued_usd", event.get("usd"))
            if event.get("usd_per_hour"):  # the last tick, after teardown, reads 0 $/h
                self.usd_per_hour = event["usd_per_hour"]
        elif kind == "balance":
            shares = ", ".join(f"{s:.2f}" for s in event.get("shares") or [])
            self.console.print(
                Text(f"balance: shares [{shares}] batch sizes {event.get('batch_sizes')}", "cyan")
            )
        elif kind == "node" and _machine_event(event):
            self.console.print(Text(node_line(event), style="cyan"))
        elif kind == "recovery":
            self.console.print(Text(recovery_line(event), style="magenta"))
        elif kind == "error":
            where = event.get("node") or event.get("rank")
            message = str(event.get("message"))
            if peer_lost(message):  # a survivor of another node's loss: not the cause
                first = message.splitlines()[0] if message.strip() else message
                self.console.print(
                    Text(
                        visible(
                            f"{where}: lost its connection to another node ({first[:160]}); "
                            "the node that failed first is named when the run stops"
                        ),
                        "yellow",
                    )
                )
            else:
                self.console.print(Text(visible(f"error ({where}): {message}"), "red"))
        elif kind == "warning":
            self.console.print(Text(visible(f"WARNING: {event.get('message')}"), "bold yellow"))
        self.progress.update(self.epochs, info=self._info())


_MACHINE_STATUSES = {
    "starting", "ready", "terminated", "lost", "dropped", "replaced", "interrupting"
}  # fmt: skip


def _machine_event(event: Mapping[str, Any]) -> bool:
    """A machine that costs money starting, coming up or going (a cloud instance or cluster,
    a lost or replaced node); not the per-stage running/done of a node's processes."""
    return bool(event.get("instance_type")) or event.get("status") in _MACHINE_STATUSES


def node_line(event: Mapping[str, Any]) -> str:
    """``node i-0abc: launching (g5.xlarge on-demand)``; a running instance waits for SSH."""
    status, detail = str(event.get("status") or "?"), event.get("detail")
    line = f"node {event.get('node')}: {status}"
    if detail and detail != status:
        line += f" ({detail})"
    if status == "running" and event.get("instance_type"):
        line += ", billed from now; waiting for SSH"
    return line


def _rate(event: Mapping[str, Any]) -> str:
    """A progress event's rate for people: MB/s for bytes, else units/s."""
    rate, unit = event.get("rate"), event.get("unit", "")
    if isinstance(rate, int | float) and unit == "bytes":
        return f"{rate / 1e6:,.1f} MB/s"
    return f"{fmt(rate, ',.0f')} {unit}/s"


def chosen_on_test(summary: Mapping[str, Any]) -> list[str]:
    """What the run chose by looking at the same held-out split its accuracy is measured on
    (the trainer has no other labelled split): the epoch kept out of several evaluated, and
    the blend of the model's paths. Phrases, [] when neither."""
    train = summary.get("train")
    train = train if isinstance(train, Mapping) else {}
    chosen = []
    best, epochs = summary.get("best_epoch", train.get("best_epoch")), summary.get("epochs")
    if isinstance(best, int) and isinstance(epochs, int) and epochs > 1:
        chosen.append(f"the epoch kept ({best + 1} of {epochs})")
    blend = summary.get("blend") or train.get("blend")
    if isinstance(blend, Mapping) and blend.get("applied"):
        weights = blend.get("weights")
        count = f"{len(weights)} weights" if isinstance(weights, list) else "its weights"
        chosen.append(f"the blend of the model's paths ({count})")
    return chosen


def _stopped_at(summary: Mapping[str, Any], field: str) -> str:
    """' (epoch 1: 0.8175, before the stop)' for a run stopped before its end, whose own figure
    is "—" (the trainer picks its model only at its end), as the Runs screen shows it."""
    found = last_evaluated_epoch(dict(summary))
    value = found[0].get(field) if found else None
    if found is None or not isinstance(value, int | float):
        return ""
    return f" (epoch {found[1]}: {value:.4f}, before the stop)"


def accuracy_cell(summary: Mapping[str, Any], blend_note: bool = True) -> str:
    """The test accuracy with its 95 % Wilson interval over the test reviews it was measured
    on (a small test split cannot tell a point from noise; the figure alone would not say so),
    and what was chosen on that same split (:func:`chosen_on_test`: the figure is then
    slightly in-sample; ``blend_note`` False: the caller says so on a line of its own)."""
    accuracy, n = summary.get("accuracy"), summary.get("n_test")
    if not isinstance(accuracy, int | float) or not isinstance(n, int) or n <= 0:
        return fmt(accuracy, ".4f")
    from engine.sentiment.metrics import wilson_interval

    low, high = wilson_interval(round(accuracy * n), n)
    chosen = chosen_on_test(summary) if blend_note else []
    fitted = ""
    if chosen:
        verb = "were" if len(chosen) > 1 else "was"
        fitted = f"; {' and '.join(chosen)} {verb} chosen on them too"
    return f"{accuracy:.4f} (95 % {low:.4f}-{high:.4f}, {n:,} test reviews{fitted})"


def summary_table(summary: Mapping[str, Any]) -> Table:
    """The end-of-run table."""
    status = str(summary.get("status", "?"))
    warnings = summary.get("warnings") or []
    colour = "green" if status == "ok" else "red"
    if status == "ok" and warnings:  # finished, but its numbers should not be trusted as they are
        status, colour = "finished", "bold yellow"
    title = Text(f"run {summary.get('run')} — ")
    title.append(status, style=colour)
    if warnings:
        title.append(f", {len(warnings)} warning(s)", style="bold yellow")
    table = Table(title=title, show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    ttt = summary.get("time_to_threshold_s")
    rate = summary.get("usd_per_hour")
    rows = [
        ("profile", summary.get("profile")),
        ("world size", summary.get("world_size")),
        ("accuracy", accuracy_cell(summary) + _stopped_at(summary, "accuracy")),
        ("F1", fmt(summary.get("f1"), ".4f") + _stopped_at(summary, "f1")),
        ("epochs", summary.get("epochs")),
        ("wall time", f"{fmt(summary.get('wall_s'), '.1f')} s"),
        ("samples/s", fmt(summary.get("samples_per_s"), ",.0f")),
        ("time to threshold", "not reached" if ttt is None else f"{ttt:.1f} s"),
        (
            "cost",
            f"{fmt_billed(summary.get('usd'), summary.get('accrued_usd'), rate)} at "
            f"{fmt_usd(rate)}/h",
        ),
    ]
    majority = summary.get("majority_rate")
    if isinstance(majority, int | float):
        rows.insert(3, ("majority rate", fmt(majority, ".4f")))
    if summary.get("recoveries") or (summary.get("recovery") or {}).get("failed_recoveries"):
        rows.append(
            (
                "recoveries",
                f"{summary.get('recoveries')} ({fmt(summary.get('downtime_s'), ',.0f')} s down, "
                f"{fmt_usd(summary.get('usd_lost'))} lost)",
            )
        )
    companion = summary.get("companion")
    if isinstance(companion, Mapping):
        rows.append(("linear companion", companion_line(companion)))
    if summary.get("checkpoints"):
        rows.append(("checkpoints", str(summary["checkpoints"])))
    if summary.get("resumed_from"):
        rows.append(("resumed from", f"{summary['resumed_from']} (its last checkpoint)"))
    advice = summary.get("advice")
    if isinstance(advice, Mapping) and advice.get("message"):
        rows.append(("balancer advice", advice["message"]))
    if summary.get("reason"):
        rows.append(("reason", summary["reason"]))
    for name, value in rows:  # text from processes and files: never read as markup
        text = fmt(value, "")
        table.add_row(
            name, Text(text, justify="left" if len(text) > 40 or "\n" in text else "right")
        )
    for warning in warnings:
        message = warning.get("message") if isinstance(warning, Mapping) else warning
        table.add_row(Text("warning", "bold yellow"), Text(str(message), "yellow", justify="left"))
    return table


def recovery_line(event: Mapping[str, Any]) -> str:
    """One line about a `recovery` event (plain text: show it as a Text, never as markup)."""
    lost = ", ".join(str(n) for n in event.get("lost") or []) or "?"
    if event.get("status") != "ok":
        return f"recovery {event.get('attempt')} failed (lost {lost}): {event.get('reason')}"
    return (
        f"recovered from losing {lost} ({event.get('cause')}): {event.get('action')}, now "
        f"{event.get('world_size')} rank(s); {fmt(event.get('downtime_s'), '.0f')} s down, "
        f"{fmt(event.get('redone_s'), '.0f')} s of work redone, {fmt_usd(event.get('usd'))}"
    )

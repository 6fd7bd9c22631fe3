"""`sentitop report`: Markdown (the $/hours table, scaling, the deadline pick) + PNG plots."""

from __future__ import annotations

import errno
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.errors import InputError
from engine.fork_guard import ForkGuard
from engine.procstats import process_alive
from remote.resume_chain import Chain
from remote.review import plots
from remote.review.candidates import hours_text
from remote.review.chains import fold_chains
from remote.review.metrics import (
    UNTRUSTED,
    UNTRUSTED_MARK,
    ConfigMetrics,
    SeriesMetrics,
    cheapest_within,
    median_epoch_s,
    pareto_front,
    series_metrics,
)
from remote.review.money_text import money
from remote.review.outcome import run_outcome
from remote.run_record import RunRecord

PLOTS = {
    "speedup": "speedup_efficiency.png",
    "throughput": "throughput.png",
    "loss": "loss_time_cost.png",
    "cost": "hours_usd.png",
    "pareto": "pareto.png",
}
"""Plot name → file name in the output folder."""
REPORT_FILE = "report.md"
_STAGE_PREFIX = ".report-new-"
"""The stage folder inside the output folder: this prefix and the writing process's id."""


@dataclass(slots=True)
class Report:
    """What `write_report` produced."""

    markdown: Path
    plots: dict[str, Path]
    series: SeriesMetrics
    pick: ConfigMetrics | None


def write_report(
    runs: list[RunRecord],
    output: Path,
    *,
    epochs: int | None = None,
    deadline_h: float | None = None,
    progress: Callable[[Path], None] | None = None,
) -> Report:
    """Write report.md and the PNG plots of ``runs`` (one series) into ``output``; a resumed
    training counts once, as its chain of runs (remote.review.chains.fold_chains).

    The files are written into a hidden stage folder inside ``output``, then moved into place
    together (report.md last, stop signals held meanwhile): a call that fails or is stopped
    (Ctrl-C, SIGTERM) before then leaves ``output`` as it was (an earlier report stays whole)
    and removes a folder it created. ``progress`` gets each file's name once it is in the
    stage; an exception it raises (a stop) ends the call the same way."""
    if not runs:
        raise InputError("no runs to report on", hint="name run folders, run/sweep ids or a CSV")
    runs, chains, folded = fold_chains(runs)
    try:
        series = series_metrics(runs, epochs=epochs)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    series.notes[:0] = folded
    if output.exists() and not output.is_dir():
        raise InputError(f"--output {output} is a file, not a folder", hint="name a folder")
    created = [p for p in (output, *output.parents) if not p.exists()][-1:]  # the outermost
    pick = cheapest_within(series.configs, deadline_h) if deadline_h is not None else None
    published = False
    try:
        try:
            output.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(
                f"{output}: cannot create the output folder ({exc.strerror or exc})"
            ) from None
        try:
            for name in (REPORT_FILE, *PLOTS.values()):  # before the slow plots, and before
                if (output / name).is_dir():  # any file is replaced: never half a new report
                    raise IsADirectoryError(errno.EISDIR, "a folder is in the way", output / name)
            stage = _make_stage(output)
            try:
                _write_files(stage, series, deadline_h, pick, chains, progress)
                with ForkGuard():  # a stop meanwhile is delivered once every file is in place
                    for name in (*PLOTS.values(), REPORT_FILE):  # report.md last
                        os.replace(stage / name, output / name)
                    published = True
            finally:
                shutil.rmtree(stage, ignore_errors=True)
        except OSError as exc:
            where = _named_for_user(exc.filename, output)
            raise InputError(
                f"--output {output}: cannot write {where} ({exc.strerror or exc})",
                hint="name a folder you can write to",
            ) from None
    except BaseException:
        if not published:
            for folder in created:
                shutil.rmtree(folder, ignore_errors=True)
        raise
    files = {key: output / name for key, name in PLOTS.items()}
    return Report(output / REPORT_FILE, files, series, pick)


def _write_files(
    stage: Path,
    series: SeriesMetrics,
    deadline_h: float | None,
    pick: ConfigMetrics | None,
    chains: dict[str, Chain],
    progress: Callable[[Path], None] | None,
) -> None:
    """report.md, then the plots, into ``stage`` (the Markdown first: a folder that cannot take
    it fails before the slow plots); ``progress`` after each."""
    done = progress or (lambda _name: None)
    path = stage / REPORT_FILE
    path.write_text(render_markdown(series, deadline_h, pick, chains), encoding="utf-8")
    done(Path(REPORT_FILE))
    makers: dict[str, Callable[[Path], Path]] = {
        "speedup": lambda to: plots.speedup_plot(series, to),
        "throughput": lambda to: plots.throughput_plot(series, to),
        "loss": lambda to: plots.loss_plot(series, to),
        "cost": lambda to: plots.cost_table_plot(series, to),
        "pareto": lambda to: plots.pareto_plot(series, to, deadline_h, pick),
    }
    for key, make in makers.items():
        make(stage / PLOTS[key])
        done(Path(PLOTS[key]))


def _make_stage(output: Path) -> Path:
    """A fresh hidden stage folder inside ``output`` (those of dead earlier calls removed)."""
    for entry in output.glob(f"{_STAGE_PREFIX}*"):
        pid = entry.name.removeprefix(_STAGE_PREFIX)
        if entry.is_dir() and pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)
    stage = output / f"{_STAGE_PREFIX}{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    return stage


def _named_for_user(filename: str | bytes | None, output: Path) -> Path:
    """The path an error names: for the stage folder ``output``, for a file in it that file's
    place in ``output``."""
    if filename is None:
        return output
    path = Path(os.fsdecode(filename))
    if path.name.startswith(_STAGE_PREFIX):
        return output
    if path.parent.name.startswith(_STAGE_PREFIX):
        return output / path.name
    return path


def _cell(text: str) -> str:
    """Text from a folder, file name or CSV field (a run id, a configuration's instance type or
    GPU model) as one Markdown table cell (a `|` would split it)."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _f(value: float | None, fmt: str = ".2f") -> str:
    return "–" if value is None or not math.isfinite(value) else format(value, fmt)


def _ratio(value: float | None, doubtful: bool) -> str:
    """A speedup or efficiency cell, marked when it is not to be trusted."""
    return f"{UNTRUSTED_MARK} {_f(value)}" if doubtful else _f(value)


def _h(hours: float) -> str:
    """Hours to 0.01 (the old study's precision); 3 significant digits below one hour."""
    return f"{hours:,.2f}" if hours >= 1 else f"{hours:.3g}"


def cost_table(series: SeriesMetrics) -> list[str]:
    """The $/hours table as Markdown lines (an embeddings series': :func:`embeddings_table`)."""
    if series.task == "embeddings":
        return embeddings_table(series)
    n = series.epochs
    head = (
        f"| configuration | workers | hardware | $/h | median epoch s | s for {n} ep "
        f"| h for {n} ep | $ for {n} ep | speedup | efficiency | speedup (threshold) "
        "| eff. (threshold) | samples/s | accuracy | $/acc. point |"
    )
    lines = [head, "|" + "---|" * 15]
    for c in series.configs:
        lines.append(
            f"| {_cell(c.label)} | {c.workers} | {_cell(c.hardware)} | {c.usd_per_hour:.4g} | "
            f"{c.epoch_s:,.1f} | {c.epoch_s * n:,.0f} | {_h(c.hours)} | {money(c.usd)} | "
            f"{_ratio(c.speedup, c.untrusted)} | {_ratio(c.efficiency, c.untrusted)} | "
            f"{_ratio(c.speedup_tts, c.untrusted_tts)} | "
            f"{_ratio(c.efficiency_tts, c.untrusted_tts)} | {_f(c.samples_per_s, ',.0f')} | "
            f"{_f(c.accuracy, '.3f')} | "
            f"{'–' if c.usd_per_point is None else money(c.usd_per_point)} |"
        )
    return lines + _untrusted_legend(series) + _threshold_legend(series)


def _threshold_legend(series: SeriesMetrics) -> list[str]:
    """What "threshold" in the table means (it was never said): the loss and what it holds."""
    levels = sorted(
        {r.loss_threshold for c in series.configs for r in c.runs if r.loss_threshold is not None}
    )
    if not levels:
        return []
    said = " / ".join(f"{x:.4g}" for x in levels)
    return [
        "",
        "(threshold): by time to threshold, the training seconds until the smoothed train "
        f"loss first fell below {said} (the runs' `loss_threshold`), median over a "
        "configuration's runs; unlike the epoch time it holds the first epoch's warm-up, so "
        "one slow start moves it.",
    ]


def embeddings_table(series: SeriesMetrics) -> list[str]:
    """The $/hours table of embeddings runs: their mode, threads, words/s and PIP loss in place
    of the sentiment columns (threshold, samples/s, accuracy) they never fill."""
    n = series.epochs
    head = (
        f"| configuration | mode | processes | threads/rank | hardware | $/h | epochs run "
        f"| median epoch s | s for {n} ep | h for {n} ep | $ for {n} ep | speedup | efficiency "
        "| words/s | PIP loss (start → end) |"
    )
    lines = [head, "|" + "---|" * 15]
    for c in series.configs:
        epochs = sorted({r.epochs for r in c.runs})
        ran = str(epochs[0]) if len(epochs) == 1 else f"{epochs[0]}–{epochs[-1]}"
        lines.append(
            f"| {_cell(c.label)} | {_cell(_mode(c))} | {c.workers} | "
            f"{c.threads or '–'} | {_cell(c.hardware)} | {c.usd_per_hour:.4g} | {ran} | "
            f"{c.epoch_s:,.1f} | {c.epoch_s * n:,.0f} | {_h(c.hours)} | {money(c.usd)} | "
            f"{_ratio(c.speedup, c.untrusted)} | {_ratio(c.efficiency, c.untrusted)} | "
            f"{_f(c.words_per_s, ',.0f')} | {_pip(c.pip_loss_initial, c.pip_loss)} |"
        )
    return lines + _untrusted_legend(series)


def _mode(c: ConfigMetrics) -> str:
    """'sync', 'async (server + 1 worker)': what an embeddings configuration's processes do."""
    if c.embed_mode == "async":
        workers = max(0, c.workers - 1)
        return f"async (server + {workers} worker{'' if workers == 1 else 's'})"
    return c.embed_mode or "–"


def _processes(c: ConfigMetrics) -> str:
    """'3 worker(s)', or for an async embeddings run 'server + 2 workers' as its table says."""
    return (
        _mode(c).removeprefix("async (").removesuffix(")")
        if c.embed_mode == "async"
        else f"{c.workers} worker(s)"
    )


def _pip(start: float | None, end: float | None) -> str:
    """'1.286 → 1.264' (or the end alone when the start is not recorded)."""
    if start is None:
        return _f(end, ".3f")
    return f"{_f(start, '.3f')} → {_f(end, '.3f')}"


def _untrusted_legend(series: SeriesMetrics) -> list[str]:
    """The line under a table that marks untrusted ratios (none when there are none)."""
    if not any(c.untrusted or c.untrusted_tts for c in series.configs):
        return []
    return [
        "",
        f"{UNTRUSTED_MARK} not trustworthy: super-linear by far (efficiency above "
        f"{UNTRUSTED:g}, a speedup per worker no parallel run earns); see the notes.",
    ]


def render_markdown(
    series: SeriesMetrics,
    deadline_h: float | None,
    pick: ConfigMetrics | None,
    chains: dict[str, Chain] | None = None,
) -> str:
    """The report's Markdown text (``chains``: resumed runs' chains by run id)."""
    chains = chains or {}
    embeddings = series.task == "embeddings"
    base = series.baseline
    n = series.epochs
    out = [
        "# Cost / speed review",
        "",
        f"{sum(len(c.runs) for c in series.configs)} run(s), {len(series.configs)} "
        f"configuration(s), {series.mode} scaling; baseline **{base.label}** "
        f"({_processes(base)}). $ and hours are for **{n} epoch{'s' if n != 1 else ''}** "
        "of training "
        "(epoch time = median over the runs' epochs; start-up and preprocessing excluded; "
        "billing: per second with a 60 s minimum, or as the imported source priced it).",
        "",
        "## $ and hours per configuration",
        "",
        *cost_table(series),
        "",
        "![hours and $](" + PLOTS["cost"] + ")",
        "",
        "## Scaling",
        "",
        _scaling_text(series),
        "",
        "![speedup and efficiency](" + PLOTS["speedup"] + ")",
        "",
        "![throughput](" + PLOTS["throughput"] + ")",
        "",
        "## Loss vs time and vs $",
        "",
        "![loss](" + PLOTS["loss"] + ")",
        "",
        "## Pareto frontier of hours vs $",
        "",
        "Frontier (no other configuration is both faster and cheaper): "
        + ", ".join(
            f"{c.label} ({_h(c.hours)} h, {money(c.usd)})" for c in pareto_front(series.configs)
        )
        + ".",
        "",
        _deadline_text(series, deadline_h, pick),
        "",
        "![Pareto frontier](" + PLOTS["pareto"] + ")",
        "",
        "## Runs",
        "",
        *_chains_text(chains),
        "| run | configuration | source | status | epochs | median epoch s | wall s | run $ "
        f"| recoveries | sweep |{' words/s | PIP loss |' if embeddings else ''}",
        "|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if embeddings else ""),
    ]
    for c in series.configs:
        for r in c.runs:
            where = f"{r.path.name}:{r.line}" if r.line else r.path.name
            chain = chains.get(r.run_id)
            out.append(
                f"| {_cell(r.run_id)}{_resumed(chain)} | {_cell(c.label)} | {r.source} "
                f"({_cell(where)}) "
                f"| {run_outcome(r).status} | {r.epochs} | {_f(median_epoch_s(r), ',.1f')} | "
                f"{_wall(r, chain)} | {_run_usd(r, chain)} | {_recoveries(r)} | "
                f"{_cell(r.sweep or '–')} |"
                + (
                    f" {_f(r.words_per_s, ',.0f')} | {_pip(r.pip_loss_initial, r.pip_loss)} |"
                    if embeddings
                    else ""
                )
            )
    lost = [r for c in series.configs for r in c.runs if r.recoveries]
    if lost:
        down = sum(r.downtime_s for r in lost)
        usd = sum(r.usd_lost for r in lost)
        out += [
            "",
            f"{sum(r.recoveries for r in lost)} recovery(ies) from lost nodes in {len(lost)} "
            f"run(s): {down:,.0f} s of downtime and {money(usd)} lost (downtime and redone work "
            "at each run's rate); every recovery is a `recovery` event in the run's events.jsonl.",
        ]
    notes = series.notes + [f"{c.label}: {note}" for c in series.configs for note in c.notes]
    if notes:
        out += ["", "## Notes", "", *[f"- {n}" for n in notes]]
    return "\n".join(out) + "\n"


def _scaling_text(series: SeriesMetrics) -> str:
    if series.mode == "weak":
        rule = (
            "Weak scaling (data ∝ workers): efficiency = T(base) / T; scaled speedup = "
            "efficiency × workers / base workers."
        )
    else:
        rule = "Strong scaling: speedup = T(base) / T; efficiency = speedup / (workers / base)."
    parts = [
        f"{_cell(c.label)}: speedup {_f(c.speedup)}, efficiency {_f(c.efficiency)}"
        + (" (not trustworthy: super-linear by far)" if c.untrusted else "")
        + (
            f" (by time to threshold {_f(c.speedup_tts)} / {_f(c.efficiency_tts)}"
            + ("; not trustworthy" if c.untrusted_tts else "")
            + ")"
            if c.speedup_tts
            else ""
        )
        for c in series.configs
    ]
    return rule + " By epoch time: " + "; ".join(parts) + "."


def _deadline_text(
    series: SeriesMetrics, deadline_h: float | None, pick: ConfigMetrics | None
) -> str:
    if deadline_h is None:
        return "No deadline given (`--deadline H` highlights the cheapest configuration within it)."
    if pick is None:
        fastest = min(series.configs, key=lambda c: c.hours)
        return (
            f"**No configuration meets the {hours_text(deadline_h)} deadline**; the fastest is "
            f"{fastest.label} at {_h(fastest.hours)} h ({money(fastest.usd)})."
        )
    return (
        f"**Cheapest within {hours_text(deadline_h)}: {pick.label}** — {_h(pick.hours)} h, "
        f"{money(pick.usd)} for {series.epochs} epochs."
    )


def _chains_text(chains: dict[str, Chain]) -> list[str]:
    """What a resumed run's row shows (nothing when no run was resumed)."""
    if not chains:
        return []
    return [
        "A resumed training is one row: its wall s and run $ are those of its whole chain of "
        "runs (the run's own in brackets); its epoch time counts only whole epochs trained on "
        "its configuration.",
        "",
    ]


def _resumed(chain: Chain | None) -> str:
    """' (resumes B ← A)': the runs a resumed run continues, newest first."""
    if chain is None:
        return ""
    names = [leg.folder.name for leg in reversed(chain.legs[:-1])]
    names += [f"{chain.missing} (folder gone)"] if chain.missing else []
    return _cell(f" (resumes {' ← '.join(names)})")


def _wall(r: RunRecord, chain: Chain | None) -> str:
    """Wall seconds of the run, or of its whole chain with the run's own in brackets."""
    if chain is None:
        return _f(r.wall_s, ",.1f")
    return f"{chain.wall_s:,.1f} ({_f(r.wall_s, ',.1f')})"


def _run_usd(r: RunRecord, chain: Chain | None) -> str:
    """The run's $, or its whole chain's with the run's own in brackets (and what is missing)."""
    own = "–" if r.usd is None else money(r.usd)
    if chain is None:
        return own
    gone = f"; {_cell(', '.join(chain.unpriced))} not counted" if chain.unpriced else ""
    return f"{money(chain.usd)} ({own}{gone})"


def _recoveries(r: RunRecord) -> str:
    """Recoveries of a run with their downtime and cost, or –."""
    if not r.recoveries:
        return "–"
    return f"{r.recoveries} ({r.downtime_s:,.0f} s, {money(r.usd_lost)})"

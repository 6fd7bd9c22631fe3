"""RunScreen: one run, live or replayed — status, stages, plots, epochs, phases, nodes, log.

An embeddings run (its train `stage_start` says workload=embeddings) shows the same layout with
words/s as throughput, the PIP loss plot in place of the load shares (no balancer there), and
SGNS loss, PIP loss and words/s in the epochs table.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal
from textual.message import Message
from textual.widgets import DataTable, Static
from textual.worker import Worker, get_current_worker

from engine.stop_rules import STOP_CHECKPOINT_S
from tui.format import (
    fmt_ranks,
    fmt_usd,
    format_seconds,
    format_usd,
    nice_number,
)
from tui.model import RunState, Series
from tui.model.dollars import usd_at
from tui.model.earlier_epochs import EarlierEpochs, earlier_epochs
from tui.model.envelope import SeriesEnvelope
from tui.model.rows import ProfileRow
from tui.model.run_views import EMBEDDINGS, REPLAY_STOPPED
from tui.replay import replay_file
from tui.screens.base import SentitopScreen
from tui.screens.modals import ConfirmScreen
from tui.screens.runs import fit_run_id, request_resume
from tui.services import Services
from tui.widgets.braille import PlotLine
from tui.widgets.epochs_table import EPOCH_ROWS, EpochsTable
from tui.widgets.line_plot import LinePlot
from tui.widgets.log_pane import LogPane
from tui.widgets.recovery_marks import recovery_marks
from tui.widgets.run_status import stages_text, status_text
from tui.widgets.tables import phase_table

X_AXES = ("steps", "time", "dollars")
"""X-axis choices of the loss, throughput and load-share plots (`x` cycles them)."""
X_FORMATS = {"steps": nice_number, "time": format_seconds, "dollars": format_usd}
POST_EVERY_S = 0.05
"""Feed workers post at most one EventsIngested per this many seconds."""
DOWN_STATUSES = {"stopped", "terminated", "lost", "failed", "done", "down"}
STOPPED_STATUSES = ("interrupted", "failed", "budget", "unfinished")
"""Run statuses of a run that ended before its end (resumable once it wrote a checkpoint)."""
SHARES_EMPTY = "no load shares yet (they come with the first balance plan or step)"


class Cols(NamedTuple):
    """A series' plotted points (its envelope) copied out of the state; whether t / step ascend."""

    t: np.ndarray
    step: np.ndarray
    y: np.ndarray
    t_sorted: bool
    step_sorted: bool


@dataclass
class EventsIngested(Message):
    """New events reached the run state (only the newest version matters)."""

    version: int
    """RunState.version after the ingest."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EventsIngested)


@dataclass
class FeedEnded(Message):
    """A replay or live run stopped feeding events."""

    source: str
    """replay | live."""
    status: str
    """Run status at the end."""
    resumed_by: str | None = None
    """A replayed run's folder name that has since resumed it (looked up off the UI thread)."""


class RunScreen(SentitopScreen):
    """The live/replay view of one run."""

    MODE = "run"
    CSS_PATH = Path(__file__).with_name("run.tcss")
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012 (textual's type)
    """Under 110 columns the phase table gives way, so the nodes table stays in view."""
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]  # noqa: RUF012 (textual's type)
    """Under 32 rows the tables and log shrink, so the status lines stay in view."""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "stop", "Stop"),
        Binding("c", "resume", "Resume"),
        Binding("t", "teardown", "Tear down"),
        Binding("x", "cycle_x", "X-axis"),
    ]

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services
        self.state = RunState()
        """The run shown (replaced when a new run or replay starts)."""
        self.source = ""
        """What feeds the state: '', 'replay PATH' or 'live PROFILE'."""
        self.x_axis = "steps"
        """X-axis of the loss plot."""
        self.live_row: ProfileRow | None = None
        """Profile of the live run, while one runs."""
        self._stop_event: asyncio.Event | None = None
        self._feed: Worker[Any] | None = None
        self._drawn_version = -1
        self._epoch_rows = 0
        self._envelopes: dict[int, SeriesEnvelope] = {}
        self._shown: dict[str, object] = {}
        """What each slow-to-paint widget shows now, so an unchanged one is not redrawn."""
        self._replayed: Path | None = None
        self._earlier_for: RunState | None = None
        """The resumed run whose earlier runs' epochs were asked for."""
        """The run folder being replayed (None: a live run, or nothing)."""
        self._resumed_by: str | None = None
        """The run that resumed the replayed one, when one did (`c` is not offered then)."""

    # ------------------------------------------------------------------ layout
    def compose_body(self) -> ComposeResult:
        yield Static(id="run-status")
        yield Static(id="run-stages")
        with Grid(id="plots"):
            yield LinePlot("loss", id="plot-loss", floor=0)
            yield LinePlot("samples/s", id="plot-throughput", x_format=format_seconds, y_min=0)
            yield LinePlot("load share per GPU", id="plot-shares", y_min=0, empty=SHARES_EMPTY)
            yield LinePlot(
                "cost", id="plot-cost", x_format=format_seconds, y_format=format_usd, y_min=0
            )
        with Horizontal(id="tables"):
            yield EpochsTable(id="epochs")
            yield Static(id="phases")
            yield DataTable(id="nodes", cursor_type="row")
        yield LogPane("log", id="log")

    def on_mount(self) -> None:
        self.query_one(EpochsTable).reset()
        nodes = self.query_one("#nodes", DataTable)
        nodes.border_title = "nodes"
        for label, width in (
            ("node", 7),
            ("ranks", 4),
            ("status", 7),
            ("device", 8),
            ("last line", 30),
        ):
            nodes.add_column(label, width=width)
        self.query_one("#phases", Static).border_title = "time per phase (s, last epoch)"
        self.refresh_views(force=True)

    def focus_body(self) -> None:
        self.query_one(EpochsTable).focus()

    # ------------------------------------------------------------------- feeds
    def _reset(self, source: str) -> None:
        if self._feed is not None:
            self._feed.cancel()
        self.state = RunState()
        self.source = source
        self._envelopes = {}
        self._shown = {}
        self._drawn_version = -1
        self._epoch_rows = 0
        if self.is_mounted:
            self.query_one(EpochsTable).reset()
            self.refresh_views(force=True)
            self.refresh_bindings()

    def start_replay(self, path: Path, speed: float = 0.0) -> Worker[None]:
        """Play a recorded run through this screen (speed 0 = as fast as possible)."""
        self._resumed_by = None
        self._reset(f"replay {Path(path).name}" + (f" x{speed:g}" if speed > 0 else ""))
        self._replayed = Path(path).parent if Path(path).is_file() else Path(path)
        self._feed = self._replay(Path(path), speed)
        if self.is_mounted:
            self.refresh_bindings()  # `s` stops the replay; `t` is not offered for it
        return self._feed

    @work(thread=True, exclusive=True, exit_on_error=False, group="feed")
    def _replay(self, path: Path, speed: float) -> None:
        worker = get_current_worker()
        state, last = self.state, 0.0
        for batch in replay_file(path, speed, stop=lambda: worker.is_cancelled):
            state.ingest_many(batch)
            now = time.monotonic()
            if now - last >= POST_EVERY_S:
                self.post_message(EventsIngested(state.version))
                last = now
        if worker.is_cancelled:  # `s`: the replay stopped here, whatever the run did after
            state.end_feed(REPLAY_STOPPED, "the replay was stopped here; the recording goes on")
        else:  # read to its end: a run that never ended is not running
            state.end_feed("unfinished", "the recording ends here (no run_end event)")
        self.post_message(EventsIngested(state.version))
        self.post_message(FeedEnded("replay", state.status, self._later_leg()))

    def _later_leg(self) -> str | None:
        """The run that resumed the replayed one since (reads every run's summary: off the UI)."""
        from remote.resume_chain import continued_by

        folder = self._replayed
        later = continued_by(folder) if folder is not None and folder.parent.is_dir() else None
        return later.folder.name if later is not None else None

    def start_live(self, row: ProfileRow) -> Worker[Any]:
        """Run a profile with the runner and watch it."""
        self._reset(f"live {row.name}")
        self._replayed = None
        self.live_row = row
        self._feed = self._live(row)
        if self.is_mounted:
            self.refresh_bindings()  # `s` stops it
        return self._feed

    @work(exclusive=True, exit_on_error=False, group="feed")
    async def _live(self, row: ProfileRow) -> Any:
        stop = self._stop_event = asyncio.Event()
        state = self.state
        last = [0.0]

        def on_event(event: dict[str, Any]) -> None:
            state.ingest(event)
            now = time.monotonic()
            if now - last[0] >= POST_EVERY_S:
                last[0] = now
                self.post_message(EventsIngested(state.version))

        def on_log(node: str, line: str) -> None:
            state.add_log(node, line)

        try:
            more = {"resume_from": row.resume_from} if row.resume_from is not None else {}
            return await self.services.runner()(row.profile, on_event, stop, on_log=on_log, **more)
        except asyncio.CancelledError:
            state.end_feed("interrupted", "the dashboard stopped watching")
            raise
        except Exception as exc:  # shown by the error modal; the run must not read running
            state.end_feed("failed", str(exc) or type(exc).__name__)
            raise
        finally:
            self._stop_event = None
            self.live_row = None
            self.post_message(EventsIngested(state.version))
            self.post_message(FeedEnded("live", state.status))

    @property
    def live(self) -> bool:
        """True while a live run is being driven from this screen."""
        return self.live_row is not None

    def cloud_resources_up(self) -> int:
        """How many cloud nodes of the live run are still up (0 when none or not cloud)."""
        row = self.live_row
        if row is None or row.cluster in ("local", "ssh"):
            return 0
        up = [n for n in self.state.nodes.values() if n.status not in DOWN_STATUSES]
        return len(up) or max(row.nodes, 1)

    async def stop_and_wait(self, timeout: float = 600.0) -> None:
        """Ask the live run to stop (the runner tears down) and wait for it to finish."""
        if self._stop_event is not None:
            self._stop_event.set()
        feed = self._feed
        if feed is not None and self.live:
            await asyncio.wait_for(feed.wait(), timeout)

    # ---------------------------------------------------------------- handlers
    def on_events_ingested(self, message: EventsIngested) -> None:
        self.refresh_views()

    def on_feed_ended(self, message: FeedEnded) -> None:
        self.source = f"{self.source} · {message.source} ended ({message.status})"
        self._resumed_by = message.resumed_by
        if message.resumed_by:  # its recorded "resume continues from it" is history now
            self.source += f" · resumed since by {message.resumed_by}"
        self.refresh_views(force=True)
        self.refresh_bindings()  # a stopped run with a checkpoint offers `c`
        if message.source == "live":
            self.notify(f"run ended: {message.status}", timeout=6, markup=False)

    def action_stop(self) -> None:
        if self.live:
            self.app.push_screen(
                ConfirmScreen(
                    "Stop the run?",
                    "Rank 0 writes a checkpoint at its next step (waiting up to "
                    f"{STOP_CHECKPOINT_S:g} s for it), then the run's processes are stopped and "
                    "its nodes torn down; resuming continues from that checkpoint.",
                    yes="Stop",
                    no="Keep running",
                ),
                self._confirmed_stop,
            )
        elif self._feed is not None and self._feed.is_running:
            self._feed.cancel()
            self.notify("replay stopped")
        else:
            self.notify("nothing is running", severity="warning")

    def _confirmed_stop(self, yes: bool | None) -> None:
        if yes and self._stop_event is not None:
            self._stop_event.set()
            self.notify("stopping… nodes are torn down when the run ends")

    def run_dir(self) -> Path | None:
        """The folder of the run shown: the one replayed, else the live run's in the runs
        folder (None before its `run_start`)."""
        if self._replayed is not None:
            return self._replayed
        return self.services.runs_dir / self.state.run_id if self.state.run_id else None

    def stopped_with_checkpoint(self) -> bool:
        """Whether the run shown stopped before its end after writing a checkpoint."""
        return (
            not self.live
            and self.state.status in STOPPED_STATUSES
            and self.state.last_checkpoint is not None
            and self._resumed_by is None  # resumed already: resuming it again is refused
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`c` (resume) is offered only for a run that stopped with a checkpoint."""
        if action == "resume":
            return self.stopped_with_checkpoint()
        if action == "stop":  # a live run, or a replay still playing
            return self.live or (self._feed is not None and not self._feed.is_finished)
        if action == "teardown":  # a recording's machines are the Runs screen's `t`; a local
            return self._replayed is None and self.cloud_resources_up() > 0  # run has none
        return super().check_action(action, parameters)

    def action_resume(self) -> None:
        """Continue the stopped run from its checkpoint, as `c` on the Runs screen does."""
        folder = self.run_dir()
        if folder is None or not self.stopped_with_checkpoint():
            self.notify("only a run that stopped after a checkpoint can be resumed")
            return
        request_resume(self, folder)

    def action_teardown(self) -> None:
        up = self.cloud_resources_up()
        if not up:
            self.notify("no cloud resources are up", severity="warning")
            return
        self.app.push_screen(
            ConfirmScreen(
                "Tear down now?",
                f"Terminates {up} cloud node(s) of run {self.state.run_id or '?'} now, "
                "without waiting for a checkpoint.",
                yes="Tear down",
                no="Cancel",
            ),
            self._confirmed_teardown,
        )

    def _confirmed_teardown(self, yes: bool | None) -> None:
        if not yes:
            return
        if self._stop_event is not None:
            self._stop_event.set()  # the runner terminates the nodes as it ends
        if self.services.teardown is not None:
            self._teardown(self.state.run_id)
        self.notify("tearing down: the run stops and its nodes are terminated")

    @work(thread=True, exclusive=True, exit_on_error=False, group="teardown")
    def _teardown(self, run_id: str) -> None:
        if self.services.teardown is not None:
            self.services.teardown(run_id)

    def action_cycle_x(self) -> None:
        self.x_axis = X_AXES[(X_AXES.index(self.x_axis) + 1) % len(X_AXES)]
        self.refresh_views(force=True)

    def apply_filter(self, text: str) -> None:
        self.query_one(LogPane).set_filter(text)

    # ------------------------------------------------------------------- views
    def refresh_views(self, force: bool = False) -> None:
        """Redraw every widget from the state (skipped when nothing changed)."""
        st = self.state
        if not force and st.version == self._drawn_version:
            return
        with st.lock:
            self._drawn_version = st.version
            snap = self._snapshot(st)
        self._draw_status(st, snap)
        self._draw_plots(snap)
        self._draw_tables(snap)
        self._ask_earlier(st)
        if self._changed("log", snap["log"]):
            self.query_one(LogPane).set_lines(snap["log"])
        self.set_note(self.source)

    def _ask_earlier(self, st: RunState) -> None:
        """Once a resumed run's plan is known, read the epochs its earlier runs trained."""
        folder = self.run_dir()
        if st.resumed_from and st.train_plan and self._earlier_for is not st and folder:
            self._earlier_for = st
            self._read_earlier(folder, st.train_plan.get("resumed_epoch"), st)

    @work(thread=True, exit_on_error=False, group="earlier")
    def _read_earlier(self, folder: Path, epoch: object, st: RunState) -> None:
        found = earlier_epochs(folder, epoch if isinstance(epoch, int) else 0)
        if found.rows:
            self.app.call_from_thread(self._show_earlier, found, st)

    def _show_earlier(self, found: EarlierEpochs, st: RunState) -> None:
        """The earlier runs' epochs (dim) above the ones this run trained."""
        if st is not self.state or not self.is_mounted:  # another run is shown since
            return
        runs = found.runs
        self.query_one(EpochsTable).add_earlier(found.rows, runs, fit_run_id(runs[0], 24))

    def _changed(self, widget: str, shows: object) -> bool:
        """True (and remembered) when ``widget`` would show something new."""
        if self._shown.get(widget, self) == shows:
            return False
        self._shown[widget] = shows
        return True

    def _snapshot(self, st: RunState) -> dict[str, Any]:
        def cols(s: Series) -> Cols:
            envelope = self._envelopes.get(id(s))
            if envelope is None:
                envelope = self._envelopes[id(s)] = SeriesEnvelope()
            c = envelope.sync(s)
            return Cols(c["t"], c["step"], c["y"], s.t_sorted, s.step_sorted)

        return {
            "workload": st.workload,
            "train_info": dict(st.train_info),
            "pip": cols(st.pip_loss),
            "words": cols(st.word_throughput),
            "phase_names": st.phase_names,
            "train": cols(st.train_loss),
            "test": cols(st.test_loss),
            "throughput": cols(st.throughput),
            "rank_tp": {r: cols(s) for r, s in sorted(st.rank_throughput.items())},
            "shares": {r: cols(s) for r, s in sorted(st.rank_shares.items())},
            "cost": cols(st.cost),
            "epochs": list(st.epochs)[-min(st.epochs_seen - self._epoch_rows, EPOCH_ROWS) :]
            if st.epochs_seen > self._epoch_rows
            else [],
            "nodes": [
                (n.name, fmt_ranks(n.ranks), n.status, n.gpu, n.last_line or n.detail)
                for n in st.nodes.values()
            ],
            "balancer_off": st.balancer_off,
            "usd_per_hour": st.usd_per_hour,
            "epochs_total": st.total_epochs,
            "epochs_seen": st.epochs_seen,
            "epochs_done": st.epochs_done,
            "phases": {r: dict(v) for r, v in st.phase_last.items()},
            "phase_epoch": st.phase_epoch,
            "log": list(st.log)[-200:],
            "stages": [
                (s.name, s.status, s.seconds, s.done, s.total, s.unit) for s in st.stages.values()
            ],
            "eta": st.eta_seconds(),
            "projected": st.projected_cost(),
            "recoveries": [(r["rel"], float(r.get("downtime_s") or 0)) for r in st.recoveries],
        }

    def _draw_status(self, st: RunState, snap: dict[str, Any]) -> None:
        self.query_one("#run-status", Static).update(status_text(st, snap))
        epochs = (snap["epochs_done"], snap["epochs_total"])
        if not self._changed("stages", (snap["stages"], epochs)):
            return
        self.query_one("#run-stages", Static).update(stages_text(snap["stages"], epochs))

    def _line(self, label: str, c: Cols, axis: str, snap: dict[str, Any]) -> PlotLine:
        """A plot line of ``c`` with x in steps, seconds or dollars (sorted flags carried)."""
        if axis == "steps":
            return PlotLine(label, c.step, c.y, presorted=c.step_sorted)
        cost: Cols = snap["cost"]
        if axis == "time" or (cost.t.size == 0 and not snap["usd_per_hour"]):
            return PlotLine(label, c.t, c.y, presorted=c.t_sorted)
        # dollars used by then: they grow with time, so x stays sorted when t is
        x = usd_at(cost.t, cost.y, snap["usd_per_hour"], c.t)
        return PlotLine(label, x, c.y, presorted=c.t_sorted)

    def _draw_plots(self, snap: dict[str, Any]) -> None:
        cost: Cols = snap["cost"]
        axis, x_format = self.x_axis, X_FORMATS[self.x_axis]
        embeddings = snap["workload"] == EMBEDDINGS
        loss = self.query_one("#plot-loss", LinePlot)
        # the x-axis goes under each plot: four titles side by side were cut at 80 columns
        loss.border_title = f"{'SGNS ' if embeddings else ''}loss"
        loss.set_lines([self._line(label, snap[label], axis, snap) for label in ("train", "test")])
        throughput = self.query_one("#plot-throughput", LinePlot)
        shares = self.query_one("#plot-shares", LinePlot)
        for plot in (loss, throughput, shares):
            plot.x_format = x_format
            plot.border_subtitle = f"x: {axis}"
        if embeddings:  # words/s; PIP loss where the (absent) balancer's shares would be
            throughput.border_title = "words/s"
            throughput.set_lines([self._line("total", snap["words"], axis, snap)])
            shares.border_title = "PIP loss vs SPPMI reference"
            shares.empty = "waiting for an epoch…"
            shares.y_min = None  # PIP loss moves little against its size: zoom in on the change
            shares.set_lines([self._line("PIP", snap["pip"], axis, snap)])
        else:
            throughput.border_title = "samples/s"
            shares.border_title = (
                "load shares — balancer off: equal split" if snap["balancer_off"] else "load shares"
            )
            shares.empty, shares.y_min = SHARES_EMPTY, 0
            tp_lines = [self._line("total", snap["throughput"], axis, snap)]
            tp_lines += [self._line(f"r{r}", c, axis, snap) for r, c in snap["rank_tp"].items()]
            throughput.set_lines(tp_lines)
            shares.set_lines(
                [self._line(f"r{r}", c, axis, snap) for r, c in snap["shares"].items()]
            )
        cost_line = self._line("$ used", cost, "time", snap)
        cost_line.color = "#ffd75f"
        cost_plot = self.query_one("#plot-cost", LinePlot)
        cost_plot.y_min = 0.0  # dollars: the axis ran from $-1.00 before any cost accrued
        cost_plot.empty = (  # an ended run that recorded no cost is not waiting for one
            "no cost recorded for this run" if self.state.finished else "waiting for data…"
        )
        cost_plot.set_lines([cost_line, *recovery_marks(snap["recoveries"], cost.t, cost.y)])
        cost_plot.border_title = f"cost {fmt_usd(cost.y[-1] if cost.y.size else None)}"
        cost_plot.border_subtitle = "x: time"

    def _draw_tables(self, snap: dict[str, Any]) -> None:
        epochs = self.query_one(EpochsTable)
        epochs.set_workload(snap["workload"])
        epochs.add_epochs(snap["epochs"])
        self._epoch_rows = snap["epochs_seen"]
        if self._changed("phases", (snap["phases"], snap["phase_names"], snap["phase_epoch"])):
            phases = self.query_one("#phases", Static)
            phases.update(phase_table(snap["phases"], snap["phase_names"]))
            phases.border_title = (  # a new run's panel kept the last run's epoch in its title
                f"time per phase (s, epoch {snap['phase_epoch'] + 1})"
                if snap["phase_epoch"] is not None
                else "time per phase (s, last epoch)"
            )
        if not self._changed("nodes", snap["nodes"]):
            return
        nodes = self.query_one("#nodes", DataTable)
        nodes.clear()
        for name, ranks, status, gpu, last in snap["nodes"]:
            style = "red" if status in ("lost", "failed", "error", "dropped") else ""
            style = "green" if status in ("ready", "running") else style
            style = "magenta" if status in ("interrupting", "replaced") else style  # spot, recovery
            # Text cells: a str cell is read as markup, and node output is foreign text
            row_cells = (Text(name), Text(ranks), Text(status, style=style), Text(gpu), Text(last))
            nodes.add_row(*row_cells, key=name)

    @on(DataTable.RowSelected, "#nodes")
    def _node_selected(self, event: DataTable.RowSelected) -> None:
        name = str(event.row_key.value)
        self.query_one("#filter").value = name  # type: ignore[attr-defined]
        self.action_filter()

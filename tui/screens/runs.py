"""RunsScreen: run history from the runs folder; select several to overlay their loss curves."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import ClassVar

import numpy as np
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.message import Message
from textual.timer import Timer
from textual.widgets import DataTable

from engine.errors import visible
from remote.review.views import CostSpeedData
from tui.format import fmt, fmt_hours, fmt_usd, format_seconds, format_usd, nice_number
from tui.model import RunState
from tui.model.columns import Col
from tui.model.rows import RowCache, RunRow, load_run_rows, read_run_state
from tui.model.run_history import Stamp, runs_stamp
from tui.screens.base import SentitopScreen
from tui.screens.modals import ConfirmScreen
from tui.screens.profiles import RunRequested, shown_path
from tui.services import Services
from tui.widgets.braille import PlotLine
from tui.widgets.cost_speed import CostSpeedView
from tui.widgets.fitted_table import FittedTable
from tui.widgets.line_plot import LinePlot

COLUMNS = (
    Col("", 1),
    Col("run", 22, least=15, most=40),
    Col("profile", 14, least=9, most=32),
    Col("ranks", 6, drop=4),
    Col("epochs", 6, drop=3),
    Col("wall h", 6),
    Col("$", 8),
    Col("acc", 5),
    Col("F1", 5, drop=1),
    Col("samples/s", 9, drop=2),
    Col("status", 14, least=11, most=40, floor=8),
)
"""Table columns: widths at a 120-column terminal (118 cells with the padding), how far run,
profile and status may shrink or grow with the terminal, and which columns a narrow one leaves
out first (F1, samples/s, epochs, ranks). "ranks" are the training processes with what they ran
on ("4 GPU", "2 CPU"), as on the Profiles screen: a CPU run has ranks but no GPUs."""
RUN_WIDTH = next(c.width for c in COLUMNS if c.label == "run")
NO_SUMMARY = (
    "{n} selected run(s) left out: no summary.json (still running, or stopped before writing "
    "it); $ vs hours compares runs with one"
)


def columns_for(rows: list[RunRow]) -> tuple[Col, ...]:
    """COLUMNS with the run column as wide as the longest run id (up to its most): a narrow
    terminal then leaves out F1, samples/s, epochs and ranks before it cuts an id (at 120
    columns ids of longer profile names lost their middle with half the row empty)."""
    need = max((len(r.run) for r in rows), default=RUN_WIDTH)
    return tuple(
        replace(c, width=(fit := max(c.low, min(need, c.high))), least=fit, floor=26)
        if c.label == "run"
        else c
        for c in COLUMNS
    )


def fit_run_id(run: str, width: int = RUN_WIDTH) -> str:
    """A run id cut to ``width`` in the middle: its start (the date and time) and its end (what
    tells runs of the same second apart, e.g. "-2") stay; the table would cut the end off."""
    if len(run) <= width:
        return run
    head = min(15, width - 2)  # "20261127-235049"
    return run[:head] + "…" + run[len(run) - (width - head - 1) :]


NOTHING_SELECTED = "select runs with space to compare their training loss"
"""What the loss plot says before any run is selected."""
X_AXES = ("steps", "time", "dollars")
X_FORMATS = {"steps": nice_number, "time": format_seconds, "dollars": format_usd}
POLL_S = 2.0
"""Seconds between looks at the runs folder (a few stat calls; rows are re-read on change)."""


@dataclass
class RunsLoaded(Message):
    """The runs folder was read."""

    rows: list[RunRow] | None
    """One row per run folder (None: the folder did not change since the last look)."""
    stamp: Stamp
    """The runs folder's stamp when it was read."""


@dataclass
class CostLoaded(Message):
    """The selected runs' cost/speed data was computed (remote.review.views)."""

    data: CostSpeedData
    unreadable: list[str]
    """Selected folders whose summary could not be read (left out of the view)."""


@dataclass
class CurvesLoaded(Message):
    """A run's events were read for the overlay plot."""

    path: str
    """Run folder."""
    state: RunState
    """Its state (small capacity)."""


@dataclass
class ReplayRequested(Message):
    """The user asked to replay a recorded run in the Run screen."""

    path: Path
    """Run folder."""


def curve_x(state: RunState, axis: str) -> tuple[np.ndarray, np.ndarray]:
    """The train-loss curve of a run with x in steps, seconds or dollars."""
    s = state.train_loss
    t = np.frombuffer(s.t, dtype=np.float64).copy()
    y = np.frombuffer(s.y, dtype=np.float64).copy()
    if axis == "steps":
        return np.frombuffer(s.step, dtype=np.float64).copy(), y
    if axis == "time":
        return t, y
    return np.asarray(state.usd_at(t.tolist()), dtype=np.float64), y


def request_resume(screen: SentitopScreen, path: Path) -> None:
    """The `c` key of the Runs and Run screens: check in a thread that the run in ``path`` can
    be resumed and ask the app (a RunRequested from ``screen``) to run it, or say why not."""
    screen.run_worker(
        partial(_resume_request, screen, path), thread=True, exit_on_error=False, group="resume"
    )


def _resume_request(screen: SentitopScreen, path: Path) -> None:
    from engine.errors import SentitopError
    from remote.pricing import load_catalog
    from remote.resume import PROFILE_FILE, resumable_or_torn_down, resume_profile
    from tui.model.rows import profile_row

    try:
        folder = resumable_or_torn_down(path)
        profile = resume_profile(folder, None)
    except SentitopError as exc:
        said = exc.message + (f"\n{exc.hint}" if exc.hint else "")  # no "bad input:": a key
        screen.app.call_from_thread(  # was pressed, nothing was typed in
            screen.notify, said, title="cannot resume", severity="error", markup=False, timeout=10
        )
        return
    row = profile_row(profile, folder / PROFILE_FILE, load_catalog())
    row = replace(row, resume_from=folder)
    screen.app.call_from_thread(screen.post_message, RunRequested(row))


def status_text(row: RunRow, width: int = 40) -> Text:
    """The status cell: a run whose model is no better than the majority rate, or whose summary
    warns, in warning colours, never a bare "ok" ("below majority" alone where "ok, below
    majority 0.800" does not fit ``width``)."""
    shown = row.shown_status or row.status
    if len(shown) > width and row.brief_status:
        shown = row.brief_status
    return Text(shown, style=row.status_style)


def stopped_note(row: RunRow) -> str:
    """What a stopped run's (dimmed) accuracy is, "" for another run."""
    if row.accuracy_epoch is None:
        return ""
    return f"{row.status}: acc of epoch {row.accuracy_epoch}, not a final model"  # whole at 80


def chain_note(row: RunRow) -> str:
    """What a run of a resume chain is (Σ: the chain's whole training), "" for another run."""
    if row.resumed_by:
        return f"{row.status}, resumed by {fit_run_id(row.resumed_by)} (counted in its Σ)"
    if not row.chain_runs:
        return ""
    unpriced = f" · not counted: {', '.join(row.chain_unpriced)}" if row.chain_unpriced else ""
    return (
        f"resumes {fit_run_id(Path(row.resumed_from).name)} · Σ over {row.chain_runs} runs: "
        f"{fmt_usd(row.chain_usd)}, {row.chain_hours or 0:.2f} h{unpriced}"
    )


class RunsScreen(SentitopScreen):
    """History table and an overlay of the selected runs' loss curves."""

    MODE = "runs"
    CSS_PATH = Path(__file__).with_name("runs.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "toggle_run", "Select"),
        Binding("x", "cycle_x", "X-axis"),
        Binding("v", "cycle_view", "$ vs h"),
        Binding("p", "replay", "Replay"),
        Binding("c", "resume", "Resume"),
        Binding("u", "reload", "Reload"),
        Binding("t", "teardown", "Tear down"),
    ]

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services
        self.rows: list[RunRow] = []
        self.shown: list[RunRow] = []
        self.selected: list[str] = []
        """Paths of the runs overlaid, in selection order."""
        self.curves: dict[str, RunState] = {}
        self.x_axis = "steps"
        """Overlay x-axis."""
        self.view = "loss"
        """What the lower pane shows: the selected runs' loss curves, or their $ vs hours."""
        self._stamp: Stamp | None = None
        """The runs folder's stamp at the last read (None: never read)."""
        self._row_cache: RowCache = {}
        """Rows of unchanged run folders, kept between reads (by load workers, under the lock)."""
        self._cache_lock = threading.Lock()
        self._poll: Timer | None = None
        self._count_note = ""
        self._count = ""
        """The run count part of that note ("2 runs", "1 of 5 runs match 'x'")."""
        """The note line when the highlighted run is not part of a resume chain."""

    def compose_body(self) -> ComposeResult:
        yield FittedTable(COLUMNS, id="runs-table", cursor_type="row", zebra_stripes=True)
        yield LinePlot("train loss of selected runs", id="overlay", floor=0, empty=NOTHING_SELECTED)
        cost = CostSpeedView(id="cost-speed")
        cost.display = False
        yield cost

    def on_mount(self) -> None:
        table = self.query_one(FittedTable)
        table.border_title = Content(f"runs in {shown_path(self.services.runs_dir)}")  # not markup
        self.call_after_refresh(self.action_reload)  # paint the first frame, then read

    def focus_body(self) -> None:
        self.query_one(DataTable).focus()

    def action_reload(self) -> None:
        self.set_note("reading runs…")
        self._load(force=True)

    def runs_changed(self) -> None:
        """A run started or ended from the dashboard: look at the runs folder now."""
        if self.is_mounted:
            self._load(force=False)

    def on_screen_resume(self) -> None:
        if self._stamp is not None:  # the first read comes from on_mount
            self._load(force=False)

    def _poll_runs(self) -> None:
        self._poll = None
        if self.is_current:  # hidden: the look comes when the screen shows again
            self._load(force=False)
        else:
            self._arm_poll()

    def _arm_poll(self) -> None:
        """Look again in POLL_S (re-armed after each look, so looks never overlap)."""
        if self._poll is None:
            self._poll = self.set_timer(POLL_S, self._poll_runs)

    @work(thread=True, exclusive=True, exit_on_error=False, group="runs")
    def _load(self, force: bool) -> None:
        """Read the rows when forced (every folder again) or when the runs folder's stamp
        changed (only the changed folders)."""
        runs_dir = self.services.runs_dir
        stamp = runs_stamp(runs_dir)
        if not force and stamp == self._stamp:
            self.post_message(RunsLoaded(None, stamp))
            return
        with self._cache_lock:
            if force:
                self._row_cache.clear()
            rows = load_run_rows(runs_dir, self._row_cache)
        self.post_message(RunsLoaded(rows, stamp))

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        self._arm_poll()
        if message.rows is None:
            return
        self._stamp = message.stamp
        self.rows = message.rows
        self.query_one(FittedTable).cols = columns_for(self.rows)  # refitted in apply_filter
        self.apply_filter(self.filter_text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """A run of a resume chain says what the chain is and cost (Σ: the whole training)."""
        row = self.current()
        problem = visible(row.problem.replace(f"{row.path}/", "")) if row else ""  # fits the bar
        said = (problem or chain_note(row) or stopped_note(row)) if row else ""
        self.set_note(said or self._count_note)

    def apply_filter(self, text: str) -> None:
        needle = text.lower()
        self.shown = [
            r
            for r in self.rows
            if not needle or needle in f"{r.run} {r.profile} {r.shown_status or r.status}".lower()
        ]
        count = f"{len(self.rows)} run" + ("" if len(self.rows) == 1 else "s")
        if needle:  # the note counts what the table shows: "1 of 5 runs match …"
            count = f"{len(self.shown)} of {count} match '{visible(text)}'"
        self._count = count
        self._say_count()
        table = self.query_one(FittedTable)
        self._fill(table, table.cursor_row)
        table.call_after_refresh(table.refit)  # a scroll bar may have come or gone

    def on_fitted_table_refitted(self, message: FittedTable.Refitted) -> None:
        self._fill(message.table, message.cursor)

    def _fill(self, table: FittedTable, cursor: int) -> None:
        """The shown runs as the table's rows, formatted for its widths; the cursor kept."""
        table.clear()
        run_width, status_width = table.width_of("run"), table.width_of("status")
        for row in self.shown:
            mark = (
                Text("●", style="bold green")
                if row.path in self.selected
                else Text("○", style="dim")
            )
            table.add_fitted_row(
                mark,
                Text(fit_run_id(row.run, run_width)),  # folder names and statuses are foreign
                Text(row.profile),
                f"{row.gpus} {row.device}".rstrip() if row.gpus else row.device or "—",
                str(row.epochs),
                (fmt_hours(row.hours) if row.hours else "—")
                if row.chain_hours is None
                else f"Σ{fmt_hours(row.chain_hours)}",
                fmt_usd(row.usd) if row.chain_usd is None else f"Σ{fmt_usd(row.chain_usd)}",
                Text(fmt(row.accuracy), style="dim" if row.accuracy_epoch else ""),
                Text(fmt(row.f1), style="dim" if row.accuracy_epoch else ""),
                nice_number(row.samples_per_s) if row.samples_per_s else "—",
                Text(f"{row.status} ↪", style="dim")  # ↪ resumed by (the note names it)
                if row.resumed_by
                else status_text(row, status_width),
                key=row.path,
            )
        if self.shown:
            table.move_cursor(row=min(max(cursor, 0), len(self.shown) - 1))

    def current(self) -> RunRow | None:
        """The highlighted run."""
        table = self.query_one(DataTable)
        if not self.shown or not 0 <= table.cursor_row < len(self.shown):
            return None
        return self.shown[table.cursor_row]

    def action_toggle_run(self) -> None:
        row = self.current()
        if row is None:
            return
        if row.path in self.selected:
            self.selected.remove(row.path)
        else:
            self.selected.append(row.path)
            if row.path not in self.curves:
                self._load_curve(row.path)
        self.apply_filter(self.filter_text)
        self._draw()

    @work(thread=True, exit_on_error=False, group="curves")
    def _load_curve(self, path: str) -> None:
        self.post_message(CurvesLoaded(path, read_run_state(Path(path))))

    def on_curves_loaded(self, message: CurvesLoaded) -> None:
        self.curves[message.path] = message.state
        self._draw()

    def action_cycle_x(self) -> None:
        self.x_axis = X_AXES[(X_AXES.index(self.x_axis) + 1) % len(X_AXES)]
        self._draw()

    def _say_count(self) -> None:
        """The note of the run count, with what the keys of the pane shown do."""
        keys = "x changes the x-axis" if self.view == "loss" else "v: the loss curves again"
        self._count_note = f"{self._count} · space selects, {keys}"
        self.set_note(self._count_note)

    def action_cycle_view(self) -> None:
        """Swap the lower pane: loss curves, or cost vs speed (the report's review, live)."""
        self.view = "cost" if self.view == "loss" else "loss"
        self.query_one("#overlay", LinePlot).display = self.view == "loss"
        self.query_one("#cost-speed", CostSpeedView).display = self.view == "cost"
        self.refresh_bindings()  # `x` is the loss plot's: not offered beside $ vs hours
        self._say_count()
        self._draw()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`x` (the overlay's x-axis) only while the loss curves show."""
        if action == "cycle_x":
            return self.view == "loss"
        return super().check_action(action, parameters)

    @work(thread=True, exclusive=True, exit_on_error=False, group="cost")
    def _load_cost(self, paths: list[str]) -> None:
        from engine.errors import InputError
        from remote.review.views import cost_speed_data
        from remote.runs_store import load_run

        records, unreadable = [], []
        for path in paths:
            try:
                records.append(load_run(path))
            except (InputError, OSError):  # unfinished (no summary yet) or damaged
                unreadable.append(Path(path).name)
        data = cost_speed_data(records)
        if unreadable and not data.points:  # not "select runs that finished an epoch": they did
            data = replace(data, message=NO_SUMMARY.format(n=len(unreadable)))
        self.post_message(CostLoaded(data, unreadable))

    def on_cost_loaded(self, message: CostLoaded) -> None:
        self.query_one("#cost-speed", CostSpeedView).set_data(message.data)
        if message.unreadable:
            self.notify(
                f"left out of $ vs hours (no readable summary.json): "
                f"{', '.join(message.unreadable)}",
                severity="warning",
                markup=False,
            )

    def action_replay(self) -> None:
        row = self.current()
        if row is None:
            self.notify("no run highlighted", severity="warning")
        else:
            self.post_message(ReplayRequested(Path(row.path)))

    def action_resume(self) -> None:
        row = self.current()
        if row is None:
            self.notify("no run highlighted", severity="warning")
            return
        request_resume(self, Path(row.path))

    def action_teardown(self) -> None:
        row = self.current()
        if row is None:
            self.notify("no run highlighted", severity="warning")
            return
        path = Path(row.path)
        from remote.teardown import no_cloud

        if (said := no_cloud(path)) is not None:  # it asked about EC2 first, then said this
            self.notify(said, markup=False)
            return
        self.app.push_screen(
            ConfirmScreen(
                "Tear down leftovers?",
                f"Terminates every EC2 instance and EMR cluster still tagged with run {row.run} "
                "(runs tear down on every exit path; this is for what a crash left behind).",
                yes="Tear down",
                no="Cancel",
            ),
            lambda yes: self._teardown_if(path, yes),
        )

    def _teardown_if(self, path: Path, yes: bool | None) -> None:
        """The confirm dialog's answer: tear down only on yes."""
        if yes:
            self._teardown(path)

    @work(thread=True, exit_on_error=False, group="teardown")
    def _teardown(self, path: Path) -> None:
        self.app.call_from_thread(self.notify, f"tearing down run {path.name}…")
        said = self.services.teardown_recorded(path)
        self.app.call_from_thread(self.notify, said, timeout=10)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_toggle_run()

    def _draw(self) -> None:
        if self.view == "cost":
            self._load_cost(list(self.selected))
            return
        plot = self.query_one("#overlay", LinePlot)
        plot.x_format = X_FORMATS[self.x_axis]
        plot.border_title = f"train loss of selected runs  (x: {self.x_axis})"
        lines = []
        for path in self.selected:
            state = self.curves.get(path)
            if state is not None:
                x, y = curve_x(state, self.x_axis)
                lines.append(PlotLine(state.run_id or Path(path).name, x, y))
        plot.empty = (
            "the selected runs recorded no training loss" if self.selected else NOTHING_SELECTED
        )
        plot.set_lines(lines)

"""PricesScreen: the instance catalog (GPUs, vCPUs, memory, on-demand/spot $/h, source, age)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.markup import escape
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.message import Message
from textual.widgets import DataTable

from engine.errors import SentitopError
from tui.format import fmt_age, fmt_usd
from tui.model.columns import Col
from tui.model.rows import EpochCosts, PriceList, PriceRow
from tui.screens.base import SentitopScreen
from tui.services import Services
from tui.widgets.fitted_table import FittedTable

COLUMNS: list[tuple[str, int, Callable[[PriceRow], Any]]] = [
    ("instance", 15, lambda r: r.instance),
    ("GPU", 6, lambda r: r.gpu_model),
    ("#GPU", 4, lambda r: r.gpus),
    ("GPU GiB", 7, lambda r: r.gpu_memory_gib),
    ("vCPU", 4, lambda r: r.vcpus),
    ("mem GiB", 7, lambda r: r.memory_gib),
    ("on-demand $/h", 13, lambda r: r.on_demand_usd if r.on_demand_usd is not None else math.inf),
    ("spot $/h", 8, lambda r: r.spot_usd if r.spot_usd is not None else math.inf),
    ("$/epoch", 8, lambda r: r.usd_per_epoch if r.usd_per_epoch is not None else math.inf),
    ("source", 7, lambda r: r.source),
    ("age", 5, lambda r: r.age_s if r.age_s is not None else math.inf),
]
"""Column titles, fixed widths (no jumping as rows arrive) and sort keys."""
LEFT_OUT_FIRST = {"age": 1, "mem GiB": 2, "GPU GiB": 3, "source": 4, "vCPU": 5}
"""Columns a narrow terminal leaves out, in this order (at 80 columns $/epoch was off-screen)."""
FITTED = tuple(Col(title, width, drop=LEFT_OUT_FIRST.get(title, 0)) for title, width, _ in COLUMNS)
SOURCE_STYLE = {"live": "green", "cache": "cyan", "bundled": "yellow", "user": "magenta"}


@dataclass
class PricesLoaded(Message):
    """The catalog was read (or refreshed)."""

    prices: PriceList
    """Every instance type, and warnings (fallbacks, missing prices)."""
    refreshed: bool
    """True when live prices were asked for."""


@dataclass
class EpochCostsLoaded(Message):
    """The planner priced one epoch of the selected profile's workload per GPU type."""

    costs: EpochCosts | None
    """None when it could not (``error`` says why)."""
    error: str = ""


class PricesScreen(SentitopScreen):
    """The catalog table; sort with o or a header click, filter by GPU with /, refresh with u."""

    MODE = "prices"
    CSS_PATH = Path(__file__).with_name("prices.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "sort_next", "Sort"),
        Binding("u", "refresh_prices", "Refresh"),
    ]

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services
        self.rows: list[PriceRow] = []
        """All catalog rows."""
        self.sort_column = 6
        """Index into COLUMNS of the sort key (on-demand price by default)."""
        self.sort_reverse = False
        self.warnings: list[str] = []
        """What the price book said about its sources (shown in the nav bar)."""
        self._told: set[str] = set()
        """Warnings already shown whole in a notice (the nav bar cuts them to its width)."""
        self.costs: EpochCosts | None = None
        """Predicted $ per epoch of the selected profile's workload (planner estimates)."""
        self.costs_for: Path | None = None
        """The profile the costs were asked for."""

    def compose_body(self) -> ComposeResult:
        yield FittedTable(FITTED, id="prices-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.border_title = "instance catalog"
        self.set_note("reading prices…")
        self.call_after_refresh(self._load, False)  # paint the first frame, then read
        self._price_selected()

    def on_screen_resume(self) -> None:
        self._price_selected()

    def _price_selected(self) -> None:
        """Ask the planner for $/epoch when the Profiles screen's selection changed."""
        wanted = self.services.selected_profile
        if wanted is not None and wanted != self.costs_for:
            self.costs_for = wanted
            self._estimate(wanted)

    @work(thread=True, exclusive=True, exit_on_error=False, group="epoch-costs")
    def _estimate(self, profile: Path) -> None:
        try:
            costs = self.services.epoch_costs(profile, self.services.runs_dir)
        except SentitopError as exc:
            self.post_message(EpochCostsLoaded(None, exc.message))
            return
        self.post_message(EpochCostsLoaded(costs))

    def on_epoch_costs_loaded(self, message: EpochCostsLoaded) -> None:
        self.costs = message.costs
        if message.costs is None:
            self.notify(f"$/epoch not predicted: {message.error}", severity="warning", markup=False)
        self._fill()

    def focus_body(self) -> None:
        self.query_one(DataTable).focus()

    @work(thread=True, exclusive=True, exit_on_error=False, group="prices")
    def _load(self, refresh: bool) -> None:
        self.post_message(PricesLoaded(self.services.load_prices(refresh), refresh))

    def action_refresh_prices(self) -> None:
        self.set_note("refreshing prices…")
        self._load(True)

    def on_prices_loaded(self, message: PricesLoaded) -> None:
        self.rows = message.prices.rows
        self.warnings = message.prices.warnings
        for warning in self.warnings:  # whole, once (or again on a refresh the user asked for)
            if message.refreshed or warning not in self._told:
                self.notify(warning, severity="warning", timeout=8, markup=False)
                self._told.add(warning)
        sources: dict[str, int] = {}
        for row in self.rows:
            sources[row.source] = sources.get(row.source, 0) + 1
        mix = ", ".join(f"{n} {s}" for s, n in sorted(sources.items()))
        self.set_note(
            f"{len(self.rows)} types ({mix})"
            + (" · ⚠ " + self.warnings[0] if self.warnings else "")
        )
        self._fill()

    def action_sort_next(self) -> None:
        """Sort by the next column shown (a narrow terminal leaves some out: sorting by one of
        them read "sorted by mem GiB" with no such column on screen)."""
        table = self.query_one(FittedTable)
        for step in range(1, len(COLUMNS) + 1):
            index = (self.sort_column + step) % len(COLUMNS)
            if table.width_of(COLUMNS[index][0]):
                break
        self.sort_column, self.sort_reverse = index, False
        self._fill()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        index = [title for title, _, _ in COLUMNS].index(str(event.label))  # not a shown index
        self.sort_reverse = not self.sort_reverse if index == self.sort_column else False
        self.sort_column = index
        self._fill()

    def apply_filter(self, text: str) -> None:
        self._fill()

    def visible_rows(self) -> list[PriceRow]:
        """Rows after the filter (GPU model or instance name), in sort order."""
        needle = self.filter_text.lower()
        rows = [
            r
            for r in self.rows
            if not needle or needle in r.gpu_model.lower() or needle in r.instance.lower()
        ]
        key = COLUMNS[self.sort_column][2]
        return sorted(rows, key=lambda r: (key(r), r.instance), reverse=self.sort_reverse)

    def on_fitted_table_refitted(self, message: FittedTable.Refitted) -> None:
        self._fill()

    def _fill(self) -> None:
        table = self.query_one(FittedTable)
        table.clear()
        per_epoch = self.costs.usd_per_epoch if self.costs else {}
        for row in self.rows:
            row.usd_per_epoch = per_epoch.get(row.instance)
        for row in self.visible_rows():
            table.add_fitted_row(
                Text(row.instance),  # names from the price source are foreign text
                Text(row.gpu_model or "—"),
                str(row.gpus),
                f"{row.gpu_memory_gib:g}" if row.gpu_memory_gib else "—",
                str(row.vcpus),
                f"{row.memory_gib:g}",
                Text(
                    f"{row.on_demand_usd:.3f}" if row.on_demand_usd is not None else "—",
                    justify="right",
                ),
                Text(f"{row.spot_usd:.3f}" if row.spot_usd is not None else "—", justify="right"),
                Text(_per_epoch(row.usd_per_epoch), justify="right"),
                Text(row.source, style=SOURCE_STYLE.get(row.source, "")),
                fmt_age(row.age_s),
                key=row.instance,
            )
        arrow = "▼" if self.sort_reverse else "▲"
        table.border_subtitle = Content(  # the typed filter is text, not markup ("[b]")
            f"sorted by {COLUMNS[self.sort_column][0]} {arrow}"
            + (f" · filter '{self.filter_text}'" if self.filter_text else "")
        )
        c = self.costs
        table.border_title = (
            f"instance catalog · $/epoch of {escape(c.profile)} (estimate, band ×{c.band:.2g})"
            if c is not None
            else "instance catalog · $/epoch: highlight a profile (Profiles)"
        )


def _per_epoch(usd: float | None) -> str:
    """$/epoch without the $ sign; a cost under a cent keeps two significant digits (0.00012),
    never "0.000", which reads as free."""
    return fmt_usd(usd).removeprefix("$")

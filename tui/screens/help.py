"""HelpScreen: every key of every screen, in one modal."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

KEYS: list[tuple[str, str, str]] = [
    ("everywhere", "?", "this help"),
    ("everywhere", "1 2 3 4", "Profiles, Prices, Run, Runs"),
    ("everywhere", "tab / shift+tab", "next / previous screen"),
    ("everywhere", "/", "filter the list or log of this screen (esc clears)"),
    ("everywhere", "q", "quit (asks first while a run is live: it is stopped, checkpoint first)"),
    ("Profiles", "↑ ↓ / click", "select a profile; details and errors below"),
    (
        "Profiles",
        "r",
        "run the selected profile (opens the Run screen; asks first when it starts paid "
        "EC2 or EMR machines)",
    ),
    ("Profiles", "u", "reload the profiles folder"),
    ("Prices", "o", "sort by the next column (or click a header)"),
    ("Prices", "u", "refresh prices (live, else cache, else bundled)"),
    ("Run", "s", "stop the run (asks first; a checkpoint at its next step, nodes torn down)"),
    ("Run", "t", "tear down cloud resources now (asks first)"),
    ("Run", "x", "x-axis of the plots: steps, wall time, dollars"),
    ("Run", "c", "resume the stopped run from its checkpoint (a new run)"),
    ("Runs", "space / enter / click", "select / unselect a run for the overlay"),
    ("Runs", "x", "overlay x-axis: steps, wall time, dollars"),
    ("Runs", "v", "lower pane: loss curves, or $ vs hours and efficiency of the selected runs"),
    ("Runs", "p", "replay the highlighted run in the Run screen"),
    ("Runs", "c", "resume the highlighted stopped run from its checkpoint (a new run)"),
    ("Runs", "u", "read the runs folder again"),
    ("Runs", "t", "tear down what the highlighted run left in the cloud (asks first)"),
]
"""(screen, keys, what) shown in the help table."""


class HelpScreen(ModalScreen[None]):
    """The key reference."""

    CSS_PATH = Path(__file__).with_name("help.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=True, show_header=True, header_style="bold")
        table.add_column("screen", style="dim", no_wrap=True, width=10)
        table.add_column("key", style="bold cyan", no_wrap=True, width=22)
        table.add_column("does", ratio=1)
        for screen, keys, what in KEYS:
            table.add_row(screen, keys, what)
        with VerticalScroll(id="help-box"):
            yield Label("sentitop keys  (esc to close)", id="help-title")
            yield Static(table, id="help-table")

    def action_close(self) -> None:
        self.dismiss(None)

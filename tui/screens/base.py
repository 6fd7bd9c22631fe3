"""SentitopScreen: the frame every main screen shares (nav bar, body, filter line, footer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input, TextArea
from textual.worker import Worker, WorkerState

from tui.widgets.fit_footer import FitFooter
from tui.widgets.nav import NavBar


@dataclass
class WorkerFailed(Message):
    """A background worker of a screen raised (bubbles to the app, which shows a modal)."""

    worker: Worker[Any]
    """The failed worker (its ``error`` holds the exception)."""


class SentitopScreen(Screen[None]):
    """Base of the four main screens; subclasses implement compose_body and apply_filter."""

    MODE = ""
    """Mode name of this screen (profiles, prices, run, runs)."""
    BINDINGS: ClassVar[list[BindingType]] = [
        # priority: the app runs it before it hands on the next key, so "/gpu-b" typed or
        # pasted in one burst lands in the filter box instead of the widget behind it
        Binding("slash", "filter", "Filter", priority=True),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]
    DEFAULT_CSS = """
    SentitopScreen #filter {
        dock: bottom;
        display: none;
        height: 3;
        border: tall $accent;
    }
    SentitopScreen #filter.visible {
        display: block;
    }
    """

    filter_text: str = ""
    """Current filter (empty = show all)."""

    def compose(self) -> ComposeResult:
        yield NavBar(self.MODE)
        yield from self.compose_body()
        yield Input(placeholder="filter…  (enter keeps it, esc clears)", id="filter")
        yield FitFooter()

    def compose_body(self) -> ComposeResult:
        """Widgets between the nav bar and the footer."""
        yield from ()

    def apply_filter(self, text: str) -> None:
        """Show only what matches ``text`` (case-insensitive substring)."""

    def set_note(self, note: str) -> None:
        """Show a short status note in the nav bar."""
        self.query_one(NavBar).set_note(note)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While a text box has focus, "/" is a character to type, not the filter key."""
        return not (action == "filter" and isinstance(self.focused, (Input, TextArea)))

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("visible")
        self.set_focus(box)  # now, not after a refresh: the keys that follow must reach it

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if not box.has_class("visible") and not self.filter_text:
            return
        box.value = ""
        box.remove_class("visible")
        self.filter_text = ""
        self.apply_filter("")
        self.focus_body()

    def focus_body(self) -> None:
        """Give focus back to the main widget after filtering."""
        self.focus_next()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Worker.StateChanged does not bubble: pass failures up to the app."""
        if event.state == WorkerState.ERROR:
            self.post_message(WorkerFailed(event.worker))

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.filter_text = event.value.strip()
            self.apply_filter(self.filter_text)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value.strip():
                event.input.remove_class("visible")
            self.focus_body()

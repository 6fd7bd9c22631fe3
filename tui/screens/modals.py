"""Small modal screens: yes/no confirmation and the error dialog."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from tui.widgets.nav import SCREENS

ERROR_HINT = "enter/esc close · q quit · 1-4 switch screen"
"""The error dialog's key hint (app keys work there too, after closing it)."""


class ConfirmScreen(ModalScreen[bool]):
    """Ask a yes/no question; dismisses with True for yes."""

    CSS_PATH = Path(__file__).with_name("modals.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, title: str, question: str, yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.title_text = title
        self.question = question
        self.yes_label = yes
        self.no_label = no

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="confirm"):
            yield Label(self.title_text, id="dialog-title")
            yield Static(self.question, id="dialog-body", markup=False)  # names from files
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self.yes_label} (y)", variant="error", id="yes")
                yield Button(f"{self.no_label} (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ErrorScreen(ModalScreen[None]):
    """Show a failure (title, message, hint) until dismissed; `q` and 1-4 dismiss it and then
    quit or switch screen as they do everywhere else (a modal hides the app's own keys)."""

    CSS_PATH = Path(__file__).with_name("modals.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter,o", "close", "Close"),
        Binding("q", "close_and_quit", "Quit"),
        *(
            Binding(str(number), f"close_and_switch({number})", title, show=False)
            for number, (_, title) in enumerate(SCREENS, 1)
        ),
    ]

    def __init__(self, title: str, message: str) -> None:
        super().__init__()
        self.title_text = title
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="error"):
            yield Label(self.title_text, id="dialog-title", markup=False)
            yield Static(self.message, id="dialog-body", markup=False)
            with Horizontal(id="dialog-buttons"):
                yield Static(ERROR_HINT, id="dialog-hint", markup=False)
                yield Button("OK", variant="primary", id="ok")

    def on_mount(self) -> None:
        self.query_one("#ok", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_close_and_quit(self) -> None:
        self._close_then("quit_app")

    def action_close_and_switch(self, number: int) -> None:
        mode = SCREENS[number - 1][0]
        self._close_then(f"switch_mode({mode!r})")

    def _close_then(self, app_action: str) -> None:
        """Dismiss, then run ``app_action`` on the app (once this dialog is off the stack)."""
        app = self.app
        self.dismiss(None)
        app.call_later(app.run_action, app_action)

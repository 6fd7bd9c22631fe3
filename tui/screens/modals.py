"""Small modal screens: yes/no confirmation and the error dialog."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static


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
    """Show a failure (title, message, hint) until dismissed."""

    CSS_PATH = Path(__file__).with_name("modals.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,o", "close", "OK")]

    def __init__(self, title: str, message: str) -> None:
        super().__init__()
        self.title_text = title
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="error"):
            yield Label(self.title_text, id="dialog-title")
            yield Static(self.message, id="dialog-body", markup=False)
            with Horizontal(id="dialog-buttons"):
                yield Button("OK", variant="primary", id="ok")

    def on_mount(self) -> None:
        self.query_one("#ok", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)

"""LogPane: the newest log lines that fit (and match the filter), coloured by level."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.content import Content
from textual.widget import Widget

from tui.format import format_seconds
from tui.model import LogLine

LEVEL_STYLE = {"error": "bold red", "warn": "yellow", "info": ""}


class LogPane(Widget):
    """Shows the tail of a log (already bounded by the model); filter by substring."""

    DEFAULT_CSS = """
    LogPane {
        height: 8;
        border: round $primary 40%;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, title: str = "log", id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = title
        self._lines: list[LogLine] = []
        self.filter_text = ""
        """Only lines containing this (case-insensitive) are shown."""

    def set_lines(self, lines: Sequence[LogLine]) -> None:
        """Replace the lines (the newest last)."""
        self._lines = list(lines)
        self.refresh()

    def set_filter(self, text: str) -> None:
        """Show only lines containing ``text``."""
        self.filter_text = text.lower()
        self.border_subtitle = Content(f"filter: {text}") if text else ""  # typed: not markup
        self.refresh()

    def visible_lines(self) -> list[LogLine]:
        """Lines that pass the filter."""
        if not self.filter_text:
            return self._lines
        needle = self.filter_text
        return [ln for ln in self._lines if needle in f"{ln.source} {ln.text}".lower()]

    def render(self) -> Text:
        height = max(self.content_size.height, 1)
        lines = self.visible_lines()[-height:]
        out = Text(no_wrap=True, overflow="ellipsis")
        for i, line in enumerate(lines):
            if i:
                out.append("\n")
            out.append(f"{format_seconds(line.t):>6} ", style="dim")
            out.append(f"{line.source:<8.8} ", style="cyan")
            out.append(line.text, style=LEVEL_STYLE.get(line.level, ""))
        if not lines:
            out.append("(no matching lines)" if self.filter_text else "(no log yet)", style="dim")
        return out

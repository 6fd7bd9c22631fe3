"""NavBar: the top line naming the screens; click a name (or press its number) to switch."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

SCREENS = (("profiles", "Profiles"), ("prices", "Prices"), ("run", "Run"), ("runs", "Runs"))
"""Mode names and titles, in number-key order (1..4)."""


class NavBar(Static):
    """One line: app name, numbered screen names (active one highlighted), a status note."""

    DEFAULT_CSS = """
    NavBar {
        height: 1;
        background: $panel;
        color: $text-muted;
    }
    """

    def __init__(self, active: str, note: str = "") -> None:
        super().__init__()
        self.active = active
        """Mode name of the screen holding this bar."""
        self.note = note
        self.update(self._content())

    def set_note(self, note: str) -> None:
        """Replace the text shown at the right."""
        if note != self.note:
            self.note = note
            self.update(self._content())

    def _content(self) -> Content:
        parts = [Content.from_markup(" [b $accent]sentitop[/] ")]
        for number, (mode, title) in enumerate(SCREENS, 1):
            label = f" {number} {title} "
            if mode == self.active:
                parts.append(Content.from_markup("[reverse b]$label[/]", label=label))
            else:
                parts.append(
                    Content.from_markup(f"[@click=app.switch_mode('{mode}')]$label[/]", label=label)
                )
        if self.note:
            parts.append(Content.from_markup("  [dim]$note[/]", note=self.note))
        return Content("").join(parts)

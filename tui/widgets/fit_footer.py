"""FitFooter: the key footer made to fit a narrow terminal (compact, then fewer keys)."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

ALWAYS_SHOWN = frozenset({"help", "quit_app"})
"""Actions kept at any width: Help lists every key of the screen, Quit is how out."""
PALETTE_CELLS = 13
"""Cells the command-palette hint takes at the right (`▏^p palette` and its padding)."""


def key_cells(key: FooterKey, compact: bool) -> int:
    """Cells one key takes: `k Desc` plus its padding (wider) or one cell of gap (compact)."""
    return len(key.key_display) + len(key.description) + (2 if compact else 3)


def fit_keys(
    keys: list[FooterKey], width: int, palette: bool
) -> tuple[bool, bool, list[FooterKey]]:
    """(compact, palette hint shown, keys shown) so the footer fits ``width`` cells: padding
    goes first, then the palette hint, then the screen's keys from the last one on."""
    if sum(key_cells(k, False) for k in keys) + (PALETTE_CELLS if palette else 0) <= width:
        return False, palette, keys
    if sum(key_cells(k, True) for k in keys) + (PALETTE_CELLS if palette else 0) <= width:
        return True, palette, keys
    shown = list(keys)
    droppable = [k for k in keys if k.action.removeprefix("app.") not in ALWAYS_SHOWN]
    while droppable and sum(key_cells(k, True) for k in shown) > width:
        shown.remove(droppable.pop())
    return True, False, shown


class FitFooter(Footer):
    """The footer of every main screen: at 80 columns the Runs screen's keys ran off its
    right edge, Help and Quit with them."""

    def compose(self) -> ComposeResult:
        widgets: list[Widget] = list(super().compose())
        keys = [w for w in widgets if isinstance(w, FooterKey)]
        palette = [k for k in keys if k.has_class("-command-palette")]
        plain = [k for k in keys if k not in palette]
        compact, show_palette, shown = fit_keys(plain, self.app.size.width, bool(palette))
        self.compact = compact
        for widget in widgets:
            if widget in shown or (widget in palette and show_palette):
                yield widget
            elif not isinstance(widget, FooterKey):
                yield widget  # a key group: kept whole

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != getattr(self, "_fitted_width", None):
            self._fitted_width = event.size.width
            self.refresh(recompose=True)

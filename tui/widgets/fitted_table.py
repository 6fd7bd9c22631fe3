"""FittedTable: a DataTable whose flexible columns follow its width (tui/model/columns.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from textual import events
from textual.message import Message
from textual.widgets import DataTable

from tui.model.columns import Col, fit_columns


class FittedTable(DataTable[Any]):
    """Columns fixed while rows arrive (nothing jumps), fitted again when the table's width
    changes: a wide terminal shows whole run ids and messages, a narrow one keeps the last
    columns on screen. A refit empties the table and posts :class:`Refitted`; its screen adds
    the rows again, formatted for the new widths (:meth:`width_of`)."""

    @dataclass
    class Refitted(Message):
        """The columns were fitted again and the rows removed: add them again."""

        table: FittedTable
        cursor: int
        """The highlighted row before the refit."""

    def __init__(self, cols: Sequence[Col], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cols = tuple(cols)
        self.widths = [c.width for c in self.cols]

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        for col, width in zip(self.cols, self.widths, strict=True):
            if width:  # 0: left out at this width
                self.add_column(col.label, width=width)

    def action_scroll_home(self) -> None:
        """Home: the first row of a row-cursor table (DataTable's scrolls sideways: nothing
        happened in the Runs table)."""
        if self.cursor_type == "row":
            self.action_scroll_top()
        else:
            super().action_scroll_home()

    def action_scroll_end(self) -> None:
        """End: the last row of a row-cursor table."""
        if self.cursor_type == "row":
            self.action_scroll_bottom()
        else:
            super().action_scroll_end()

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self.refit)

    def width_of(self, label: str) -> int:
        """The current width of the column named ``label`` (0: left out)."""
        return next(w for c, w in zip(self.cols, self.widths, strict=True) if c.label == label)

    def add_fitted_row(self, *cells: Any, key: str) -> None:
        """Add a row given a cell for every column, shown or not."""
        shown = (cell for cell, width in zip(cells, self.widths, strict=True) if width)
        self.add_row(*shown, key=key)

    def refit(self) -> None:
        """Fit the columns to the space inside the borders and scroll bars (a vertical scroll
        bar that appears once rows fill the table takes its cells too); nothing when they fit."""
        available = self.scrollable_content_region.width
        if available <= 0:
            return
        widths = fit_columns(self.cols, available)
        if widths == self.widths:
            return
        cursor = self.cursor_row
        self.widths = widths
        self.clear(columns=True)
        self._add_columns()
        self.post_message(self.Refitted(self, cursor))

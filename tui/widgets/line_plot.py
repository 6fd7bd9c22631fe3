"""LinePlot: a braille line chart widget that redraws only when its data or size changes."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.widget import Widget

from tui.format import nice_number
from tui.widgets.braille import PlotLine, render_plot


class LinePlot(Widget):
    """A titled line chart; call :meth:`set_lines` with new data, it decimates to its width."""

    DEFAULT_CSS = """
    LinePlot {
        height: 1fr;
        min-height: 6;
        border: round $primary 40%;
        border-title-color: $text;
        padding: 0 1 0 0;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    """

    def __init__(
        self,
        title: str = "",
        *,
        x_format: Callable[[float], str] = nice_number,
        y_format: Callable[[float], str] = nice_number,
        y_min: float | None = None,
        y_max: float | None = None,
        floor: float | None = None,
        empty: str = "waiting for data…",
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = title
        self.x_format = x_format
        """Formats x-axis labels."""
        self.y_format = y_format
        """Formats y-axis labels."""
        self.y_min = y_min
        """Lowest y shown at least (e.g. 0 for shares and dollars)."""
        self.y_max = y_max
        """Highest y shown at least (e.g. 1 for shares)."""
        self.floor = floor
        """Lowest y ever shown (0 for a loss: the padding below the data stops there)."""
        self.empty = empty
        """Text shown while there is nothing to draw."""
        self._lines: list[PlotLine] = []
        self._key: object = None
        self._cache: tuple[object, Text] | None = None

    @property
    def lines(self) -> list[PlotLine]:
        """The series drawn now."""
        return self._lines

    def set_lines(self, lines: Sequence[PlotLine], key: object = None) -> None:
        """Replace the data; ``key`` (e.g. a version number) skips work when unchanged."""
        if key is not None and key == self._key:
            return
        self._key = key
        self._lines = list(lines)
        self._cache = None
        self.refresh()

    def render(self) -> Text:
        size = self.content_size
        cache_key = (size.width, size.height, self.x_format, self.y_format)
        if self._cache is not None and self._cache[0] == cache_key:
            return self._cache[1]
        text = render_plot(
            self._lines,
            size.width,
            size.height,
            x_format=self.x_format,
            y_format=self.y_format,
            y_min=self.y_min,
            y_max=self.y_max,
            floor=self.floor,
            empty=self.empty,
        )
        self._cache = (cache_key, text)
        return text

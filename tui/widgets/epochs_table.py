"""EpochsTable: a run's finished epochs, newest last and bounded, with a resumed run's earlier
runs' epochs (dim) above its own."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from tui.model.records import EpochRow
from tui.model.run_views import EMBEDDINGS
from tui.widgets.tables import epoch_cells

EPOCH_ROWS = 500
"""Epoch rows kept in the table (the newest)."""
EPOCH_COLUMNS = {
    "sentiment": (("ep", 2), ("train", 5), ("test", 5), ("acc", 5), ("F1", 5), ("time", 5)),
    "embeddings": (("ep", 2), ("SGNS", 5), ("PIP", 7), ("words/s", 7), ("time", 5)),
}
"""Epochs table columns (label, fixed width) per workload."""


class EpochsTable(DataTable[object]):
    """One row per finished epoch; the cursor follows the newest unless moved up."""

    def __init__(self, **options: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **options)  # type: ignore[arg-type]
        self.border_title = "epochs"
        self._keys: deque[RowKey] = deque()
        self._workload = ""

    def reset(self, workload: str = "sentiment") -> None:
        """Empty, with the columns of ``workload``."""
        self.clear()
        self._keys.clear()
        self.border_subtitle = ""
        self.set_workload(workload)

    def set_workload(self, workload: str) -> None:
        """(Re)build the columns for ``workload`` (fixed widths, so the columns never jump while
        rows stream in)."""
        if workload == self._workload:
            return
        self.clear(columns=True)
        self._keys.clear()
        for label, width in EPOCH_COLUMNS[workload]:
            self.add_column(label, width=width)
        self._workload = workload

    def add_epochs(self, rows: Iterable[EpochRow]) -> None:
        """Append finished epochs (the oldest leave past EPOCH_ROWS)."""
        following = self.row_count == 0 or self.cursor_row >= self.row_count - 1
        added = False
        for row in rows:
            self._keys.append(self.add_row(*epoch_cells(row, embeddings=self._embeddings)))
            added = True
        self._bound()
        if added and following:
            self.move_cursor(row=self.row_count - 1)  # and scrolls it into view

    def add_earlier(self, rows: list[EpochRow], runs: list[str], run_label: str) -> None:
        """Put the epochs earlier runs trained (dim) above the rows shown; ``run_label`` names
        the run they come from for the subtitle."""
        shown = [self.get_row(key) for key in self._keys]
        self.clear()
        self._keys.clear()
        for row in rows:
            dim = (Text(c, style="dim") for c in epoch_cells(row, embeddings=self._embeddings))
            self._keys.append(self.add_row(*dim))
        for cells in shown:
            self._keys.append(self.add_row(*cells))
        self._bound()
        earlier = f"from {run_label}" if len(runs) == 1 else f"from {len(runs)} earlier runs"
        self.border_subtitle = f"dim: {earlier}"
        self.move_cursor(row=self.row_count - 1)

    @property
    def _embeddings(self) -> bool:
        return self._workload == EMBEDDINGS

    def _bound(self) -> None:
        while len(self._keys) > EPOCH_ROWS:
            self.remove_row(self._keys.popleft())

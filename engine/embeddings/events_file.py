"""RUN_DIR/events.jsonl of an embeddings run: a re-run starts it afresh once it takes over."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.events import JsonlFileSink

EVENTS_FILE = "events.jsonl"


class RunEventsFile:
    """An event sink on RUN_DIR/events.jsonl that appends (as :class:`JsonlFileSink`, holding
    its lock) and remembers its events until :meth:`replace`, which empties the file of an
    earlier run's events and writes this run's again. A re-run appended to the earlier run's
    events, and a replay showed both runs mixed; one refused before it takes the folder over
    still leaves the earlier run as it was, its failure after it."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / EVENTS_FILE
        self.inherited_bytes = self.path.stat().st_size if self.path.is_file() else 0
        """The size of what the file held before this run (an earlier run's events)."""
        self.inherited = self.inherited_bytes > 0
        """The file held events before this run (an earlier run's)."""
        self._sink = JsonlFileSink(self.path)
        self._mine: list[Mapping[str, Any]] | None = []
        self._lock = threading.Lock()

    def write(self, event: Mapping[str, Any]) -> None:
        """Append one line (and remember it until :meth:`replace`)."""
        with self._lock:
            if self._mine is not None:
                self._mine.append(event)
            self._sink.write(event)

    def replace(self) -> bool:
        """Leave only this run's events in the file (from now on it only appends); whether an
        earlier run's events were dropped."""
        with self._lock:
            mine, self._mine = self._mine, None
            if mine is None or not self.inherited:
                return False
            os.truncate(self.path, 0)  # the sink appends (O_APPEND): from the new end
            for event in mine:
                self._sink.write(event)
            return True

    def close(self) -> None:
        """Close the file."""
        self._sink.close()

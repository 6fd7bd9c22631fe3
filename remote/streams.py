"""Node output: bytes → lines, events told from log lines, per-node logs and ``events.jsonl``.

Every line a node prints is appended to ``RUN_DIR/logs/<node>.log``; lines that are events
(:func:`engine.events.parse_event_line`) also get the node's name in ``node`` and go to the
run's event sink (``RUN_DIR/events.jsonl`` by default). An event that already names a node
keeps it: rank 0 reports per-rank figures (``phase``, ``balance``) for ranks on other nodes and
names them from their ``SENTITOP_NODE`` environment variable, which every node command gets.
The last lines of each node are kept for error messages. Files are user-only (0600).
"""

from __future__ import annotations

import codecs
import inspect
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

from engine.events import EventSink, JsonlFileSink, make_event, parse_event_line

log = logging.getLogger(__name__)

LineCallback = Callable[[str, str, dict[str, Any] | None], Awaitable[None] | None]
"""``on_line(node, line, event)``: called for every line; ``event`` is None for log lines."""

MAX_LINE_CHARS = 1 << 20
"""Longer lines are cut into pieces of this size (a runaway print never exhausts memory)."""


class LineSplitter:
    """Incremental UTF-8 decoder and line splitter for one byte stream."""

    def __init__(self, max_line: int = MAX_LINE_CHARS) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._max = max_line

    def feed(self, data: bytes) -> list[str]:
        """Complete lines (without line ends) found after adding ``data``."""
        self._buffer += self._decoder.decode(data)
        return self._take(final=False)

    def flush(self) -> list[str]:
        """The rest at end of stream (an unterminated last line)."""
        self._buffer += self._decoder.decode(b"", final=True)
        return self._take(final=True)

    def _take(self, *, final: bool) -> list[str]:
        *complete, rest = self._buffer.split("\n")
        lines = [line.removesuffix("\r") for line in complete]
        while len(rest) > self._max:
            lines.append(rest[: self._max])
            rest = rest[self._max :]
        if final and rest:
            lines.append(rest.removesuffix("\r"))
            rest = ""
        self._buffer = rest
        return lines


def prefixed(node: str, line: str, width: int = 0) -> str:
    """``line`` with the node prefix used by the headless output, e.g. ``[n0] loss 0.3``."""
    return f"[{node}]".ljust(width + 2) + " " + line


def _open_private(path: Path, mode: str = "a") -> IO[str]:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    return os.fdopen(os.open(path, flags, 0o600), mode, encoding="utf-8", buffering=1)


class RunStreams:
    """Routes node lines of one run: logs, events, tails and the caller's ``on_line``."""

    def __init__(
        self, run_dir: str | Path, *, events: EventSink | None = None, tail_lines: int = 40
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._own_sink = events is None
        self.events: EventSink = events or JsonlFileSink(self.run_dir / "events.jsonl")
        self._logs: dict[str, IO[str]] = {}
        self._tails: dict[str, deque[str]] = {}
        self._output_tails: dict[str, deque[str]] = {}
        self._tail_lines = tail_lines
        self.rank0_node: str | None = None
        """The node whose events carry ``rank`` 0 (rank 0 writes checkpoints), once seen."""

    def log_path(self, node: str) -> Path:
        """``RUN_DIR/logs/<node>.log``."""
        return self.run_dir / "logs" / f"{node}.log"

    def _log(self, node: str) -> IO[str]:
        fh = self._logs.get(node)
        if fh is None:
            fh = self._logs[node] = _open_private(self.log_path(node))
        return fh

    async def line(
        self, node: str, line: str, on_line: LineCallback | None = None
    ) -> dict[str, Any] | None:
        """Record one line of ``node``; the event on it (with ``node`` set) or None."""
        self._log(node).write(line + "\n")
        self._tails.setdefault(node, deque(maxlen=self._tail_lines)).append(line)
        event = parse_event_line(line)
        said = line if event is None else _event_said(event)
        if said is not None and said.strip():
            self._output_tails.setdefault(node, deque(maxlen=self._tail_lines)).append(said)
        if event is not None:
            event.setdefault("node", node)
            if event.get("rank") == 0 and event["node"] == node and self.rank0_node is None:
                self.rank0_node = node
            self.events.write(event)
        if on_line is not None:
            result = on_line(node, line, event)
            if inspect.isawaitable(result):
                await result
        return event

    def note(self, node: str, text: str) -> None:
        """A launcher remark in ``node``'s log (``# sentitop: ...``), not shown as output."""
        self._log(node).write(f"# sentitop: {text}\n")

    def emit(self, type_: str, /, **fields: Any) -> dict[str, Any]:
        """Write a launcher event (``node`` state changes, errors) to the run's sink."""
        event = make_event(type_, **fields)
        self.events.write(event)
        return event

    def tail(self, node: str, count: int = 20) -> list[str]:
        """The last ``count`` lines ``node`` printed."""
        lines = list(self._tails.get(node, ()))
        return lines[-count:] if count else []

    def output_tail(self, node: str, count: int = 20) -> list[str]:
        """The last ``count`` lines ``node`` printed that are not events (those are in the run's
        events), with its error and warning events as one line each: what an error shows."""
        lines = list(self._output_tails.get(node, ()))
        return lines[-count:] if count else []

    def close(self) -> None:
        """Close the log files (and the events file when this object opened it)."""
        for fh in self._logs.values():
            fh.close()
        self._logs.clear()
        if self._own_sink:
            self.events.close()


def _event_said(event: dict[str, Any]) -> str | None:
    """An error or warning event as an output line (None: other events)."""
    kind = event.get("type")
    if kind not in ("error", "warning"):
        return None
    rank = event.get("rank")
    who = "" if rank is None else f"[rank {rank}] "
    return f"{who}{kind}: {event.get('message', '')}"

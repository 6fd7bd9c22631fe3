"""The map side shared by every runner: lines → per-worker text→rating-count aggregation."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from engine.preprocess.dedupe import SLOT_BITS, is_test
from engine.preprocess.readers import MapTask, iter_task_blocks
from engine.preprocess.records import RecordSpec, parse_line, parse_titled
from engine.preprocess.text import clean_text

CACHE_ENTRIES = 100_000
"""Raw texts remembered per worker with their cleaned form (cleared when full)."""
MAX_EXAMPLES = 5
"""Example line numbers kept per skip reason."""

Agg = dict[bytes, int]
"""cleaned text → packed rating counts (see engine.preprocess.dedupe)."""
Pending = dict[str, int]
"""raw text → packed rating counts, for texts another worker cleans."""
Cache = dict[str, Any]
"""raw text → (its aggregation, its cleaned text), kept by a worker across blocks (values typed
loosely so callers may pass a plain new dict)."""
Defer = Callable[[str], Pending | None]
"""For a map worker among several (see engine.preprocess.run_local): raw text → the pending
counts of the worker that cleans it, or None to clean it here (only texts that cannot clean to
nothing may be deferred: skips keep their line numbers)."""


@dataclass(slots=True)
class MapStats:
    """Counts of the map side; mergeable across tasks and workers."""

    read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    """reason → (file index, split number, line number within the split): the earliest
    MAX_EXAMPLES seen (so the same for any number of workers and any order of tasks)."""
    file_skips: dict[tuple[int, str], int] = field(default_factory=dict)
    """(file index, reason) → lines of that file skipped for that reason."""
    split_lines: dict[tuple[int, int], int] = field(default_factory=dict)
    """(file index, split number) → lines read in that split."""
    input_bytes: int = 0
    titles: int = 0
    """Title rows added (RecordSpec.title_field): occurrences besides the lines read."""

    def skip(self, reason: str, file_index: int, split_no: int, line_no: int) -> None:
        """Count one skipped line."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        key = (file_index, reason)
        self.file_skips[key] = self.file_skips.get(key, 0) + 1
        examples = self.examples.setdefault(reason, [])
        where = (file_index, split_no, line_no)
        if len(examples) < MAX_EXAMPLES:
            examples.append(where)
        elif where < (last := max(examples)):  # the earliest lines, whatever order tasks ran
            examples[examples.index(last)] = where  # in (largest first, taken by any worker)

    def merge(self, other: MapStats) -> None:
        """Add another worker's counts."""
        self.read += other.read
        self.input_bytes += other.input_bytes
        self.titles += other.titles
        for reason, n in other.skipped.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + n
        for reason, examples in other.examples.items():
            merged = sorted(self.examples.get(reason, []) + examples)
            self.examples[reason] = merged[:MAX_EXAMPLES]
        for key, n in other.split_lines.items():
            self.split_lines[key] = self.split_lines.get(key, 0) + n
        for skip, n in other.file_skips.items():
            self.file_skips[skip] = self.file_skips.get(skip, 0) + n

    def example_lines(self, inputs: list[str]) -> dict[str, list[str]]:
        """reason → up to 5 "file:line" strings (1-based lines), earliest first."""
        offsets: dict[tuple[int, int], int] = {}
        running: dict[int, int] = {}
        for (file_index, split_no), n in sorted(self.split_lines.items()):
            offsets[(file_index, split_no)] = running.get(file_index, 0)
            running[file_index] = running.get(file_index, 0) + n
        out = {}
        for reason, examples in sorted(self.examples.items()):
            lines = sorted((f, offsets.get((f, s), 0) + n) for f, s, n in examples)
            out[reason] = [f"{inputs[f]}:{n}" for f, n in lines[:MAX_EXAMPLES]]
        return out


def map_lines(
    lines: list[bytes],
    too_long: Iterable[int],
    first_line: int,
    task: MapTask,
    spec: RecordSpec,
    max_line_bytes: int,
    agg: Agg,
    stats: MapStats,
    cache: Cache | None = None,
    defer: Defer | None = None,
    cache_entries: int = CACHE_ENTRIES,
) -> None:
    """Parse a block of lines into `agg` (text → packed counts) and `stats`. `first_line` is
    the 1-based number of lines[0] within the task's split. `cache` (raw text → aggregation and
    cleaned text, kept by the caller across blocks) saves cleaning again the many
    exact duplicates (cleared when it holds `cache_entries`). `defer`, when given, hands the raw
    texts another worker cleans to that worker's pending counts instead of `agg`."""
    incs: dict[float, int] = {
        r: 1 << (SLOT_BITS * (r - spec.rating_min))
        for r in range(spec.rating_min, spec.rating_max + 1)
    }
    titled = spec.title_field is not None
    text_field, rating_field = spec.text_field, spec.rating_field
    if cache is None:
        cache = {}
    loads, cache_get = orjson.loads, cache.get
    slow: list[int] = []
    hit: Any  # (Agg, cleaned bytes), or (Pending, raw str) for a deferred text
    if spec.summary_field is not None:  # the text is two fields: the slow path joins them
        slow = list(range(len(lines)))
    elif titled:
        slow = _map_titled(lines, spec, max_line_bytes, agg, stats, cache, incs, cache_entries)
    else:
        for i, line in enumerate(lines):
            # Fast path for the common record: a JSON object, string text, integral rating.
            if len(line) <= max_line_bytes:
                try:
                    obj = loads(line)
                    text = obj[text_field]
                    rating = obj[rating_field]
                    if (type(rating) is float or type(rating) is int) and type(text) is str:
                        inc = incs[rating]
                        hit = cache_get(text)
                        if hit is None:
                            pending = defer(text) if defer else None
                            hit = (agg, clean_text(text)) if pending is None else (pending, text)
                            if len(cache) >= cache_entries:
                                cache.clear()
                            cache[text] = hit
                        target, key = hit
                        if key:
                            target[key] = target.get(key, 0) + inc
                            continue
                except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
                    pass
            slow.append(i)
    stats.read += len(lines)
    long_set = set(too_long)
    for i in slow:
        line_no = first_line + i
        if i in long_set:
            stats.skip("too_long", task.file_index, task.split_no, line_no)
            continue
        if titled:
            parsed, title = parse_titled(lines[i], spec, max_line_bytes)
        else:
            parsed, title = parse_line(lines[i], spec, max_line_bytes), None
        if isinstance(parsed, str):
            stats.skip(parsed, task.file_index, task.split_no, line_no)
        else:
            key, rating = parsed
            agg[key] = agg.get(key, 0) + incs[rating]
            if title is not None:
                agg[title] = agg.get(title, 0) + incs[rating]
                stats.titles += 1


def _map_titled(
    lines: list[bytes],
    spec: RecordSpec,
    max_line_bytes: int,
    agg: Agg,
    stats: MapStats,
    cache: Cache,
    incs: dict[float, int],
    cache_entries: int,
) -> list[int]:
    """map_lines' fast path with title rows (see records.title_of): every text is cleaned here
    (none deferred: a title row needs its review's split); `cache` maps a raw review text or
    title to (cleaned, whether it falls in the training split). Returns the indices of the
    lines left to the slow path."""
    text_field, rating_field, title_field = spec.text_field, spec.rating_field, spec.title_field
    loads, cache_get, fraction = orjson.loads, cache.get, spec.test_fraction
    slow: list[int] = []
    for i, line in enumerate(lines):
        if len(line) <= max_line_bytes:
            try:
                obj = loads(line)
                text = obj[text_field]
                rating = obj[rating_field]
                if (type(rating) is float or type(rating) is int) and type(text) is str:
                    inc = incs[rating]
                    hit = cache_get(text)
                    if hit is None:
                        if len(cache) >= cache_entries:
                            cache.clear()
                        hit = cache[text] = _split_of(text, fraction)
                    key, lends = hit
                    if key:
                        agg[key] = agg.get(key, 0) + inc
                        title = obj.get(title_field) if lends else None
                        if type(title) is str and title:
                            got = cache_get(title)
                            if got is None:
                                if len(cache) >= cache_entries:
                                    cache.clear()
                                got = cache[title] = _split_of(title, fraction)
                            if got[1]:
                                agg[got[0]] = agg.get(got[0], 0) + inc
                                stats.titles += 1
                        continue
            except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
                pass
        slow.append(i)
    return slow


def _split_of(raw: str, test_fraction: float) -> tuple[bytes, bool]:
    """(cleaned text, True when it is non-empty and falls in the training split)."""
    cleaned = clean_text(raw)
    return cleaned, bool(cleaned) and not is_test(cleaned, test_fraction)


def map_task(
    task: MapTask,
    spec: RecordSpec,
    max_line_bytes: int,
    agg: Agg,
    stats: MapStats,
    cache: Cache | None = None,
    progress: Callable[[int, int], None] | None = None,
    defer: Defer | None = None,
    cache_entries: int = CACHE_ENTRIES,
) -> int:
    """Run one task into `agg`/`stats` (with `defer`, see map_lines); returns the number of
    lines read. `progress` gets (input bytes, lines) after every block; its bytes add up to
    task.nbytes."""
    line_no = 1
    cache = {} if cache is None else cache
    cursor, reported = [0], 0
    for lines, too_long in iter_task_blocks(task, max_line_bytes, cursor=cursor):
        map_lines(
            lines, too_long, line_no, task, spec, max_line_bytes, agg, stats, cache, defer,
            cache_entries,
        )  # fmt: skip
        line_no += len(lines)
        if progress:
            progress(cursor[0] - reported, len(lines))
            reported = cursor[0]
    if progress and reported < task.nbytes:
        progress(task.nbytes - reported, 0)
    key = (task.file_index, task.split_no)
    stats.split_lines[key] = stats.split_lines.get(key, 0) + line_no - 1
    stats.input_bytes += task.nbytes
    return line_no - 1

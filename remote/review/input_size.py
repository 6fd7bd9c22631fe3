"""How much a profile's local input files hold, for a plan: their lines (one review each) and
uncompressed bytes, counted, or estimated from a sample of the first bytes when they are large."""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass

from engine.errors import SentitopError

SAMPLE_BYTES = 64 << 20
"""Uncompressed bytes read in all (not per file) before the rest is estimated from them."""
BLOCK = 1 << 20
"""Bytes read at a time; also what is read of the first file of a kind (gzip or plain) met
once SAMPLE_BYTES are spent, so that each kind is estimated from its own."""


@dataclass(frozen=True, slots=True)
class InputSize:
    """Lines and uncompressed bytes of a profile's input files."""

    files: int
    lines: int
    bytes: int
    """Uncompressed: what preprocessing reads."""
    exact: bool
    """False when some of it was estimated from the bytes read before (see SAMPLE_BYTES)."""

    def describe(self) -> str:
        """ "3 input file(s): 13,824 lines, 3.6 MB" (with how it was estimated)."""
        how = "" if self.exact else f", estimated from their first {SAMPLE_BYTES >> 20} MB"
        return f"{self.files} input file(s): {self.lines:,} lines, {self.bytes / 1e6:,.1f} MB{how}"


def measure_inputs(paths: list[str]) -> InputSize | None:
    """The size of ``paths`` (files and folders as data.inputs gives them, relative to the
    current folder); None when there are none, any is remote (s3://) or cannot be read (the
    run's own checks say why)."""
    from engine.preprocess.inputs import expand_folders
    from engine.preprocess.readers import is_gzip

    if not paths or any("://" in p for p in paths):
        return None
    try:
        files = expand_folders([os.path.expanduser(p) for p in paths]).files
        lines = nbytes = 0
        budget = SAMPLE_BYTES
        seen: dict[bool, list[int]] = {}  # gzip? → [lines, bytes read, file bytes consumed]
        rest: list[tuple[bool, int]] = []  # (gzip?, file bytes not read)
        for path in files:
            packed, size = is_gzip(path), os.path.getsize(path)
            unseen = not seen.get(packed, [0, 0, 0])[2]  # gzip and plain differ in ratio
            limit = budget if budget > 0 else (BLOCK if unseen else 0)
            n, read, consumed = _count(path, packed, limit) if limit > 0 else (0, 0, 0)
            budget -= read
            lines, nbytes = lines + n, nbytes + read
            totals = seen.setdefault(packed, [0, 0, 0])
            totals[0], totals[1], totals[2] = totals[0] + n, totals[1] + read, totals[2] + consumed
            if consumed < size:
                rest.append((packed, size - consumed))
        for packed, left in rest:  # at the rate of what was read of the same kind (or any)
            same = seen.get(packed, [0, 0, 0])
            n, read, consumed = same if same[2] else _any(seen)
            if consumed:
                lines, nbytes = lines + left * n // consumed, nbytes + left * read // consumed
    except (OSError, EOFError, zlib.error, SentitopError):
        return None
    return InputSize(len(files), lines, nbytes, not rest)


def _any(seen: dict[bool, list[int]]) -> list[int]:
    """The totals of whichever kind of file was read (all zero when none was)."""
    return next((t for t in seen.values() if t[2]), [0, 0, 0])


def _count(path: str, packed: bool, limit: int) -> tuple[int, int, int]:
    """(lines, uncompressed bytes read, file bytes consumed) of ``path``, read up to about
    ``limit`` uncompressed bytes (the whole file when consumed is its size)."""
    lines = read = consumed = 0
    last = b"\n"
    with open(path, "rb") as raw:
        if not packed:
            while read < limit and (block := raw.read(BLOCK)):
                lines, read, last = lines + block.count(b"\n"), read + len(block), block[-1:]
            consumed = read
        else:  # by hand, so the compressed bytes behind what was read are known exactly
            inflate, pending = zlib.decompressobj(31), b""
            while read < limit:
                if not pending:
                    pending = raw.read(BLOCK)
                    if not pending:
                        break
                    consumed += len(pending)
                block = inflate.decompress(pending, BLOCK)
                pending = inflate.unconsumed_tail
                if inflate.eof:  # one gzip member ended; another may follow
                    pending, inflate = inflate.unused_data + pending, zlib.decompressobj(31)
                if block:
                    lines, read, last = lines + block.count(b"\n"), read + len(block), block[-1:]
            consumed -= len(pending)
    if consumed >= os.path.getsize(path):
        lines += last != b"\n"  # a last line without its newline
    return lines, read, consumed

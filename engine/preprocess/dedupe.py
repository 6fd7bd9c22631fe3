"""De-duplication and split: packed rating counts, mode rating (ties → smaller), stable hashes."""

from __future__ import annotations

import hashlib
from typing import TypeVar

SLOT_BITS = 40
"""Bits per rating in a packed count (a Python int: slot r - rating_min holds rating r's count)."""
_SLOT_MASK = (1 << SLOT_BITS) - 1
_TWO64 = float(1 << 64)
K = TypeVar("K")


def pack_counts(counts: list[int]) -> int:
    """[count of rating_min, count of rating_min+1, ...] → packed int."""
    packed = 0
    for slot, n in enumerate(counts):
        packed |= n << (SLOT_BITS * slot)
    return packed


def add_counts(into: dict[K, int], other: dict[K, int]) -> None:
    """Add `other`'s packed counts into `into` (keys in both are few: summed in Python, the
    rest inserted by one C-level update; `other` is changed: read it no more)."""
    for key in other.keys() & into.keys():
        other[key] += into[key]
    into.update(other)


def unpack_counts(packed: int, slots: int) -> list[int]:
    """Packed int → per-rating counts (rating_min first)."""
    return [(packed >> (SLOT_BITS * s)) & _SLOT_MASK for s in range(slots)]


def mode_rating(packed: int, rating_min: int, rating_max: int) -> tuple[int, int]:
    """(most frequent rating, total occurrences); ties go to the smaller rating."""
    bit = packed.bit_length() - 1
    if packed == 1 << bit and bit % SLOT_BITS == 0:  # seen once: the lowest bit of one slot
        return rating_min + bit // SLOT_BITS, 1
    best, best_n, total = rating_min, -1, 0
    for slot, n in enumerate(unpack_counts(packed, rating_max - rating_min + 1)):
        total += n
        if n > best_n:
            best, best_n = rating_min + slot, n
    return best, total


def text_keys(cleaned: bytes, test_fraction: float) -> tuple[int, int]:
    """(order key, 1 if test else 0) of a cleaned text from one BLAKE2b digest: stable across
    processes, machines and runners, unlike Python's salted hash(). The first 8 bytes fix the
    row order (and the reduce partition), the last 8 the split."""
    digest = hashlib.blake2b(cleaned, digest_size=16).digest()
    test = int.from_bytes(digest[8:], "big") / _TWO64 < test_fraction
    return int.from_bytes(digest[:8], "big"), int(test)


def order_key(cleaned: bytes) -> int:
    """64-bit stable key that fixes the row order of the dataset (and the reduce partition)."""
    return text_keys(cleaned, 0.0)[0]


def is_test(cleaned: bytes, test_fraction: float) -> bool:
    """True when the text belongs to the test split (a stable hash below test_fraction)."""
    return bool(text_keys(cleaned, test_fraction)[1])


def partition_of(order: int, partitions: int) -> int:
    """Reduce partition of an order key: contiguous key ranges, so concatenating partitions in
    order yields the global order whatever the partition count."""
    return (order * partitions) >> 64

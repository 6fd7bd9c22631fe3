"""Write a synthetic McAuley 2014 review file of a given size: the `synth` command's engine."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import zlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, BinaryIO

import numpy as np
import numpy.typing as npt

from engine.errors import InputError, StorageError
from engine.procstats import process_alive
from engine.synth import records, texts
from engine.synth.size import format_size

TARGET_RATINGS = np.array([0.06, 0.05, 0.09, 0.21, 0.59])
"""Share of 1..5-star records, as in the full Amazon 2014 dump."""
DUPLICATE_RATE = 0.85
"""Share of records whose text repeats an earlier record's (142.8 M records, 21.3 M texts)."""
POOL_OFFSET = 0.01
"""Zipf offset of text popularity, as a share of the pool: the top text repeats ~150 times."""
RATING_FLIP_RATE = 0.04
"""Share of records whose rating is redrawn, so copies of one text sometimes disagree."""
LITERAL_RATE = 0.01
"""Share of well-formed lines written as a Python literal (single quotes) instead of JSON."""
BLOCK = 32_768
TEXT_BATCH = 4096
"""New texts generated per vectorised call (bounds the temporary arrays)."""
MIN_GAP = 300
"""Stop filling the file's end once fewer bytes than this are left (a short line's size)."""
GZIP_LEVEL = 1
"""Fast deflate (≈ 60 MB/s here); the text is synthetic, so speed matters more than ratio."""
GZIP_RATIO_FLOOR = 2.0
"""Uncompressed / gzip bytes at GZIP_LEVEL is ≈ 2.3 (2.2 with every text distinct): the free
disk space a gzip file needs is taken as its uncompressed size divided by this."""
MIN_SIZE = 1000
"""Smallest --size accepted (1KB): room for at least one review line."""
MAX_POOL = 2_000_000
"""Most texts kept in memory for repeating (≈ 0.8 GB; the pool a ≈ 10 GB file asks for). A
larger file keeps this pool and gives the rest of its distinct share to one-off texts, so its
memory stays bounded whatever the size."""
_GOLDEN = 0.6180339887498949


def _pool_weights(size: int) -> npt.NDArray[np.float64]:
    ranks = np.arange(size, dtype=np.float64)
    weights = np.reciprocal(ranks + (1.0 + POOL_OFFSET * size))
    return weights / float(weights.sum())


def _pool_distinct(pool: int, records_expected: float) -> float:
    """Expected distinct texts among `records_expected` Zipf draws from a pool of `pool`."""
    return float(np.sum(-np.expm1(-records_expected * _pool_weights(pool))))


def solve_pool_size(
    records_expected: float, duplicate_rate: float = DUPLICATE_RATE, limit: int = MAX_POOL
) -> int:
    """Pool size whose Zipf draws give `duplicate_rate` over `records_expected` records, at
    most `limit` (returned when even that pool gives too few distinct texts)."""
    target = (1.0 - duplicate_rate) * records_expected
    if target <= 1.0:
        return 1
    if target >= limit or (
        60.0 * target > limit and _pool_distinct(limit, records_expected) < target
    ):
        return limit  # the search below allocates up to 7.7 × target floats: keep it bounded
    low, high = target, 60.0 * target
    while high / low > 1.002:
        mid = (low * high) ** 0.5
        distinct = _pool_distinct(int(mid), records_expected)
        low, high = (mid, high) if distinct < target else (low, mid)
    return max(1, round(high))


def plan_pool(
    records_expected: float, distinct: float | None, limit: int = MAX_POOL
) -> tuple[int, float]:
    """(pool size, one-off rate) giving `distinct` (default 1 - DUPLICATE_RATE) of
    `records_expected` records distinct texts, with a pool of at most `limit` texts: past the
    limit more records get one-off texts, so memory is bounded whatever the file's size."""
    one_off_rate = _one_off_rate(distinct)
    if one_off_rate > 0.0:
        pooled = records_expected * (1.0 - one_off_rate)
        pool_size = solve_pool_size(pooled, limit=limit)
        share = 1.0 - DUPLICATE_RATE
    else:
        pooled = records_expected
        share = distinct or 1.0 - DUPLICATE_RATE
        pool_size = solve_pool_size(pooled, 1.0 - share, limit=limit)
    if pool_size < limit or _pool_distinct(limit, pooled) >= share * pooled:
        return pool_size, one_off_rate
    # Capped: find the one-off rate f with distinct(limit, (1 - f) R) + f R = wanted × R.
    wanted = distinct if distinct is not None else 1.0 - DUPLICATE_RATE
    weights = _pool_weights(limit)
    low, high = one_off_rate, 1.0
    for _ in range(40):
        mid = 0.5 * (low + high)
        rest = records_expected * (1.0 - mid)
        got = float(np.sum(-np.expm1(-rest * weights))) + mid * records_expected
        low, high = (mid, high) if got < wanted * records_expected else (low, mid)
    return limit, high


def _one_off_rate(distinct: float | None) -> float:
    """Share of records given a one-off text so that `distinct` of them are distinct: the
    Zipf pool gives 1 - DUPLICATE_RATE of its records distinct texts, one-off texts all."""
    pooled_distinct = 1.0 - DUPLICATE_RATE
    if distinct is None or distinct <= pooled_distinct:
        return 0.0
    return (distinct - pooled_distinct) / (1.0 - pooled_distinct)


def _ratings_of(pool: int, shift: float) -> npt.NDArray[np.int64]:
    """Star rating of each pooled text; low-discrepancy, so every popularity range is calibrated."""
    position = (np.arange(pool, dtype=np.float64) * _GOLDEN + shift) % 1.0
    cdf = np.cumsum(TARGET_RATINGS)
    cdf[-1] = 1.0
    return np.searchsorted(cdf, position, side="right").astype(np.int64) + 1


class _Sink:
    """Buffered file writer; with gzip, compresses on a helper thread (zlib drops the GIL)."""

    def __init__(self, handle: IO[bytes], compress: bool) -> None:
        self.handle = handle
        self.compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31) if compress else None
        self.pool = ThreadPoolExecutor(max_workers=1) if compress else None
        self.pending: list[Future[None]] = []

    def _compress_write(self, data: bytes) -> None:
        assert self.compressor is not None
        self.handle.write(self.compressor.compress(data))

    def write(self, data: bytes) -> None:
        if self.pool is None:
            self.handle.write(data)
            return
        self.pending.append(self.pool.submit(self._compress_write, data))
        while len(self.pending) > 2:
            self.pending.pop(0).result()

    def abort(self) -> None:
        """Drop the blocks not yet compressed and wait for the one being written (the file is
        then removed)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        self.pending.clear()

    def close(self) -> None:
        if self.pool is None or self.compressor is None:
            return
        for future in self.pending:
            future.result()
        self.pool.shutdown()
        self.handle.write(self.compressor.flush())


def _estimate_line_bytes(table: texts.TokenTable, pools: records.Pools, seed: int) -> float:
    """Expected bytes of one line: a pilot of texts for bytes per slot, plus the metadata."""
    rng = np.random.default_rng([seed, 7])
    ratings = np.searchsorted(np.cumsum(TARGET_RATINGS), rng.random(3000), side="right") + 1
    slots = texts.draw_lengths(rng, len(ratings))
    pilot = texts.make_texts(table, rng, np.minimum(ratings, 5).astype(np.int64), slots)
    per_slot = sum(len(t) + 1 for t in pilot) / float(np.sum(slots))
    mean_slots = float(np.mean(texts.draw_lengths(np.random.default_rng([seed, 8]), 200_000)))
    name = float(np.mean([len(n) for n in pools.reviewer_names]))
    summary = float(np.mean([len(s) for group in pools.summaries[1:] for s in group]))
    fixed = len(records.LINE % (b"A" * 14, b"B" * 10, b"", 0, 0, b"", b"5.0", b"", 0, b""))
    return fixed + name + summary + 9 + 10 + 1 + mean_slots * per_slot - 1


def _clear_stale_partials(target: Path) -> None:
    """Remove the partial files of dead synth runs into ``target`` (``.NAME.PID-N.partial``: a
    run killed with SIGKILL, or by the out-of-memory killer, had no chance to remove its own,
    up to the size asked for); a live process's file is left to it."""
    prefix = f".{target.name}."
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        rest = entry.name.removeprefix(prefix).removesuffix(".partial")
        pid, _, attempt = rest.partition("-")
        ours = entry.name.startswith(prefix) and entry.name.endswith(".partial")
        if ours and pid.isdigit() and attempt.isdigit() and not process_alive(int(pid)):
            with contextlib.suppress(OSError):
                entry.unlink()


def _new_partial_file(target: Path) -> tuple[Path, BinaryIO]:
    """A fresh hidden file beside ``target`` to write into and rename over it at the end: its
    own name (never a user's NAME.tmp, which a fixed name would overwrite and delete), the
    umask's permissions. Dead runs' partial files of the same target go first."""
    _clear_stale_partials(target)
    for attempt in range(100):
        tmp = target.with_name(f".{target.name}.{os.getpid()}-{attempt}.partial")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            raise InputError(f"--output: cannot write {str(tmp)!r}: {exc.strerror}") from exc
        return tmp, os.fdopen(fd, "wb", buffering=8 << 20)
    raise InputError(f"--output: cannot find a free temporary name beside {str(target)!r}")


def _check_arguments(
    path: str | Path,
    size_bytes: int,
    seed: int,
    malformed_rate: float,
    distinct: float | None,
    gzip: bool,
) -> Path:
    """The output path, after InputError (exit 2, naming the option) for any bad argument."""
    if size_bytes < MIN_SIZE:
        raise InputError(
            f"--size: {size_bytes:,} bytes is too small for one review line; the minimum is "
            f"{format_size(MIN_SIZE)} ({MIN_SIZE:,} bytes)",
            hint="for example --size 50KB",
        )
    if seed < 0:
        raise InputError(f"--seed: must be >= 0, got {seed}")
    if not 0.0 <= malformed_rate <= 1.0:
        raise InputError(f"--malformed-rate: must be within 0..1, got {malformed_rate}")
    if distinct is not None and not 0.0 < distinct <= 1.0:
        raise InputError(f"--distinct: must be within 0..1 (above 0), got {distinct}")
    text = os.fspath(path)
    target = Path(text)
    if not target.name or text.endswith(("/", os.sep)) or target.is_dir():
        raise InputError(
            f"--output: {text!r} is a folder, not a file",
            hint=f"give a file name such as {os.path.join(text, 'reviews.jsonl')}",
        )
    if not target.parent.is_dir():
        blocker = next((p for p in target.parents if p.exists()), None)
        if blocker is not None and not blocker.is_dir():  # a file where a folder must be
            raise InputError(f"--output: {str(blocker)!r} is a file, not a folder")
        raise InputError(f"--output: folder {str(target.parent)!r} does not exist")
    if target.exists() and not target.is_file():  # /dev/null, a pipe: renaming would replace it
        raise InputError(
            f"--output: {text!r} is not a regular file (a device, pipe or socket); synth writes "
            "a new file and renames it into place, which would replace it",
            hint="give the name of a new or regular file",
        )
    if gzip and not target.name.endswith(".gz"):
        raise InputError(
            f"--gzip: the output name {target.name!r} does not end in .gz",
            hint=f"name it {target.name}.gz (a .gz name alone already means gzip)",
        )
    return target


def _check_free_space(folder: Path, size_bytes: int, gzip: bool) -> None:
    """InputError naming both sizes when `folder`'s disk cannot hold the file."""
    need = size_bytes / GZIP_RATIO_FLOOR if gzip else size_bytes
    free = shutil.disk_usage(folder).free
    if free < need:
        packed = " (gzip, estimated)" if gzip else ""
        raise InputError(
            f"--size: the file needs {format_size(need)}{packed} but {str(folder)!r} has only "
            f"{format_size(free)} free",
            hint="give a smaller --size or an --output on a larger disk",
        )


def generate(
    path: str | Path,
    size_bytes: int,
    *,
    seed: int = 0,
    malformed_rate: float = 0.001,
    distinct: float | None = None,
    gzip: bool = False,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Write about `size_bytes` (uncompressed, never more) of McAuley 2014 reviews to `path`.

    `distinct` is the share of well-formed records whose text is distinct (default: the real
    corpus's 1 - DUPLICATE_RATE = 0.15); above that share the extra distinct texts are one-off
    texts that are never repeated (and never kept in memory). The same arguments give the same
    bytes. The file is gzip exactly when its name ends in .gz (`gzip=True` asks for that name).
    Memory stays bounded (at most MAX_POOL texts are kept), and InputError is raised before
    writing when the disk at the file's folder has less free space than the file needs.
    Anything written is removed when generation fails or is interrupted. Returns counts:
    records, bytes, file_bytes,
    distinct_texts, duplicate_rate, malformed (and by kind), python_literal, ratings (1..5 over
    well-formed records), seconds, mb_per_s. `progress` gets the uncompressed bytes written so far,
    after each block and once more just before the file is put in place; an exception it raises
    (a stop: Ctrl-C, SIGTERM) ends the call with nothing written.
    """
    target = _check_arguments(path, size_bytes, seed, malformed_rate, distinct, gzip)
    gzip = target.name.endswith(".gz")
    _check_free_space(target.parent, size_bytes, gzip)
    started = time.perf_counter()
    seeds = np.random.SeedSequence(seed).spawn(4)  # the first three as with spawn(3)
    meta_rng = np.random.default_rng(seeds[0])
    text_rng = np.random.default_rng(seeds[1])
    rng = np.random.default_rng(seeds[2])

    table = texts.build_table()
    guess = size_bytes / 750.0
    pools = records.make_pools(
        meta_rng, int(np.clip(guess / 5, 50, 200_000)), int(np.clip(guess / 20, 20, 100_000))
    )
    expected_records = size_bytes / _estimate_line_bytes(table, pools, seed)
    pool_size, one_off_rate = plan_pool(expected_records, distinct, MAX_POOL)
    one_off_rng = np.random.default_rng(seeds[3])
    pool_cdf = np.cumsum(_pool_weights(pool_size))
    pool_rating = _ratings_of(pool_size, float(meta_rng.random()))
    pool_text: list[bytes] = [b""] * pool_size
    made = np.zeros(pool_size, dtype=bool)
    seen_valid = np.zeros(pool_size, dtype=bool)
    rating_cdf = np.cumsum(TARGET_RATINGS)

    counts = np.zeros(6, dtype=np.int64)
    by_kind = np.zeros(len(records.MALFORMED_KINDS), dtype=np.int64)
    written = lines_total = literal_total = one_off_valid = 0
    tmp, handle = _new_partial_file(target)
    sink = _Sink(handle, gzip)
    try:
        full = False
        while not full:
            ids = np.minimum(np.searchsorted(pool_cdf, rng.random(BLOCK)), pool_size - 1)
            one_off = np.zeros(BLOCK, dtype=bool)
            if one_off_rate > 0.0:
                one_off = one_off_rng.random(BLOCK) < one_off_rate
            pooled = ids[~one_off]
            fresh = pooled[~made[pooled]]
            if fresh.size:
                unique, first = np.unique(fresh, return_index=True)
                order = unique[np.argsort(first)]
                for at in range(0, len(order), TEXT_BATCH):
                    part = order[at : at + TEXT_BATCH]
                    made_texts = texts.make_texts(table, text_rng, pool_rating[part])
                    for j, text in zip(part.tolist(), made_texts, strict=True):
                        pool_text[j] = text
                made[order] = True
            ratings = pool_rating[ids].copy()
            n_one_off = int(one_off.sum())
            if n_one_off:  # texts used once: appended to the pool for this block only
                drawn = one_off_rng.random(n_one_off)
                one_ratings = np.searchsorted(rating_cdf, drawn, side="right") + 1
                ratings[one_off] = np.minimum(one_ratings, 5)
                ids[one_off] = pool_size + np.arange(n_one_off)
                pool_text.extend(texts.make_texts(table, one_off_rng, ratings[one_off]))
            flip = rng.random(BLOCK) < RATING_FLIP_RATE
            ratings[flip] = np.minimum(
                np.searchsorted(rating_cdf, rng.random(int(flip.sum())), side="right") + 1, 5
            )
            reviewer = rng.integers(0, len(pools.reviewer_ids), BLOCK)
            asin = rng.integers(0, len(pools.asins), BLOCK)
            h_all = rng.geometric(0.62, BLOCK) - 1
            h_yes = rng.binomial(h_all, 0.8)
            day = np.searchsorted(pools.day_weights, rng.random(BLOCK))
            day = np.minimum(day, records.DAYS - 1)
            literal = rng.random(BLOCK) < LITERAL_RATE
            broken = rng.random(BLOCK) < malformed_rate
            kind = rng.integers(0, len(records.MALFORMED_KINDS), BLOCK)
            choice = rng.integers(0, 1 << 30, BLOCK)
            block, kept = _format_block(
                pools, pool_text, ids, ratings, reviewer, asin, h_yes, h_all, day,
                literal, broken, kind, choice, size_bytes - written,
            )  # fmt: skip
            full = bool(np.any(~kept))
            valid = kept & ~broken
            counts += np.bincount(ratings[valid], minlength=6)
            seen_valid[ids[valid & ~one_off]] = True
            one_off_valid += int(np.sum(valid & one_off))
            del pool_text[pool_size:]
            by_kind += np.bincount(kind[kept & broken], minlength=len(by_kind))
            literal_total += int(np.sum(literal & valid))
            lines_total += int(kept.sum())
            written += len(block)
            sink.write(block)
            if progress is not None:
                progress(written)
        sink.close()
        handle.close()
        if lines_total == 0:
            raise InputError(
                f"--size: {size_bytes:,} bytes hold no review line of this seed",
                hint=f"give a larger --size (at least {format_size(MIN_SIZE)} is safe)",
            )
        if progress is not None:  # once more just before the rename: a stop it raises leaves
            progress(written)  # nothing, even one that reached Python after its last call
        os.replace(tmp, target)
    except BaseException as exc:  # Ctrl-C, SIGTERM (see the CLI), a full disk: no partial file
        sink.abort()
        with contextlib.suppress(OSError):  # a full disk fails the flush too
            handle.close()
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise StorageError(
                f"writing {target} failed: {exc}", hint="free space or pick another folder"
            ) from exc
        raise
    seconds = time.perf_counter() - started
    malformed = int(by_kind.sum())
    distinct_texts = int(seen_valid.sum()) + one_off_valid
    well_formed = lines_total - malformed
    return {
        "path": str(target),
        "records": lines_total,
        "bytes": written,
        "file_bytes": target.stat().st_size,
        "distinct_texts": distinct_texts,
        "duplicate_rate": 1.0 - distinct_texts / well_formed if well_formed else 0.0,
        "malformed": malformed,
        "malformed_by_kind": dict(zip(records.MALFORMED_KINDS, by_kind.tolist(), strict=True)),
        "python_literal": literal_total,
        "ratings": {str(r): int(counts[r]) for r in range(1, 6)},
        "seed": seed,
        "distinct_requested": distinct,
        "gzip": gzip,
        "seconds": round(seconds, 3),
        "mb_per_s": round(written / 1e6 / seconds, 2) if seconds > 0 else 0.0,
    }


def _format_block(
    pools: records.Pools,
    pool_text: list[bytes],
    ids: npt.NDArray[np.int64],
    ratings: npt.NDArray[np.int64],
    reviewer: npt.NDArray[np.int64],
    asin: npt.NDArray[np.int64],
    h_yes: npt.NDArray[np.int64],
    h_all: npt.NDArray[np.int64],
    day: npt.NDArray[np.int64],
    literal: npt.NDArray[np.bool_],
    broken: npt.NDArray[np.bool_],
    kind: npt.NDArray[np.int64],
    choice: npt.NDArray[np.int64],
    room: int,
) -> tuple[bytes, npt.NDArray[np.bool_]]:
    """Lines for one block within `room` bytes, and which records were written.

    Once a line does not fit, later lines that still fit fill the gap (the file's last block).
    """
    line_fmt = records.LINE
    rating_text = records.RATING_TEXT
    rids, names, asins = pools.reviewer_ids, pools.reviewer_names, pools.asins
    unix, when, summaries = pools.unix_times, pools.review_times, pools.summaries
    special = np.flatnonzero(literal | broken).tolist()
    special.append(len(ids))
    out: list[bytes] = []
    kept = np.ones(len(ids), dtype=bool)
    size = 0
    columns = enumerate(zip(
        ids.tolist(), ratings.tolist(), reviewer.tolist(), asin.tolist(), h_yes.tolist(),
        h_all.tolist(), day.tolist(), strict=True,
    ))  # fmt: skip
    next_special = special[0]
    cursor = 0
    for index, (j, r, who, item, yes, total, d) in columns:
        group = summaries[r]
        if index == next_special:
            if broken[index]:
                line = records.malformed_line(
                    int(kind[index]),
                    (rids[who], asins[item], names[who], yes, total),
                    (rating_text[r], group[j % len(group)], unix[d], when[d]),
                    pool_text[j],
                    int(choice[index]),
                )
            else:
                line = records.literal_line(
                    pools, who, asins[item], (yes, total), pool_text[j], r,
                    group[j % len(group)], d,
                )  # fmt: skip
            cursor += 1
            next_special = special[cursor]
        else:
            line = line_fmt % (
                rids[who], asins[item], names[who], yes, total, pool_text[j], rating_text[r],
                group[j % len(group)], unix[d], when[d],
            )  # fmt: skip
        if size + len(line) > room:
            kept[index] = False
            if room - size < MIN_GAP:
                kept[index + 1 :] = False
                break
        else:
            size += len(line)
            out.append(line)
    return b"".join(out), kept

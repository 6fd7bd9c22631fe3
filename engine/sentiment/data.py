"""Training data: dataset.h5's layout, the per-rank plan sampler, batch loaders.

Layout read here (written by ``engine.preprocess``): ``/train`` and ``/test`` groups, each with
``tokens`` (N × L, uint16 or int32, right-padded with 0), ``labels`` (uint8 0/1) and ``lengths``;
file attrs ``vocab_size``, ``seq_len``, ``pad_id``, ``unk_id``, ``format_version``.

Training reads rows from the node's memory-mapped copy (:mod:`engine.sentiment.store`);
:func:`load_split` (a split in memory, chunk-aligned reads) remains as the reference those
batches are tested against, and for small tools. The per-epoch sample order depends only on
(seed, epoch) (:mod:`engine.sentiment.order`); a plan (:class:`EpochPlan`, or the balancer's)
cuts each global step's positions into per-rank shares (possibly unequal) that all run the
same number of steps, so the positions done after any step are a prefix of the order whatever
the number of ranks.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from engine.errors import DatasetError
from engine.sentiment.order import EpochOrder, LengthsOf, WindowHook
from engine.sentiment.splits import check_shapes, open_dataset

DATASET_FILE = "dataset.h5"
VOCAB_FILE = "vocab.json"
_BLOCK_ROWS = 1 << 16
"""Rows per read when loading a split (rounded to whole chunks)."""


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    """Attributes and sizes of a dataset.h5."""

    path: Path
    vocab_size: int
    """Embedding rows needed (ids 0..vocab_size-1)."""
    seq_len: int
    train_size: int
    test_size: int
    format_version: int


class Rows(Protocol):
    """A split's rows: :class:`SplitArrays` in memory or a memory-mapped
    :class:`engine.sentiment.store.SplitStore` (the same batches from either)."""

    @property
    def tokens(self) -> np.ndarray:  # (N, L) uint16/int32
        """Token ids, right-padded with 0."""

    @property
    def labels(self) -> np.ndarray:  # (N,) 0/1
        """Labels (uint8 or float32)."""

    @property
    def lengths(self) -> np.ndarray:  # (N,)
        """Tokens before the padding."""


class SplitArrays(NamedTuple):
    """One split held in memory (the reference the streaming store is tested against)."""

    tokens: np.ndarray  # (N, L) uint16/int32
    labels: np.ndarray  # (N,) float32 0/1
    lengths: np.ndarray  # (N,) int64


class Batch(NamedTuple):
    """One batch; ``lengths`` stays on the CPU (packing needs it there)."""

    tokens: torch.Tensor  # (B, T) int32, T = longest length in the batch
    lengths: torch.Tensor  # (B,) int64
    labels: torch.Tensor  # (B,) float32


def dataset_path(data_dir: str | Path) -> Path:
    """The dataset.h5 inside ``data_dir`` (DatasetError when missing)."""
    path = Path(data_dir) / DATASET_FILE
    if not path.is_file():
        raise DatasetError(f"{path} not found", hint="run `sentitop preprocess` first")
    return path


def read_info(data_dir: str | Path) -> DatasetInfo:
    """Validate the layout of ``data_dir/dataset.h5`` and return its attributes and sizes."""
    path = dataset_path(data_dir)
    with open_dataset(path) as fh:
        for split in ("train", "test"):
            check_shapes(path, fh, split)  # one row per review in every array
        version = int(fh.attrs["format_version"])
        # vocab_size counts words (ids 2..vocab_size+1; pad 0, unk 1): the table needs +2 rows.
        return DatasetInfo(
            path=path,
            vocab_size=int(fh.attrs["vocab_size"]) + 2,
            seq_len=int(fh["train/tokens"].shape[1]),
            train_size=int(fh["train/labels"].shape[0]),
            test_size=int(fh["test/labels"].shape[0]),
            format_version=version,
        )


def _read_blocks(dset: h5py.Dataset, stop: int) -> np.ndarray:
    """Rows [0, stop) of ``dset`` read in large chunk-aligned blocks into one array."""
    out = np.empty((stop, *dset.shape[1:]), dtype=dset.dtype)
    chunk_rows = dset.chunks[0] if dset.chunks else _BLOCK_ROWS
    block = max(chunk_rows, (_BLOCK_ROWS // chunk_rows) * chunk_rows)
    for start in range(0, stop, block):
        end = min(stop, start + block)
        dset.read_direct(out, np.s_[start:end], np.s_[start:end])
    return out


def load_split(data_dir: str | Path, split: str, limit: int | None = None) -> SplitArrays:
    """The ``split`` ("train"/"test") of ``data_dir`` in memory (first ``limit`` rows if given)."""
    path = dataset_path(data_dir)
    with h5py.File(path, "r") as fh:
        group = fh[split]
        n = int(group["labels"].shape[0])
        stop = n if limit is None else min(n, limit)
        tokens = _read_blocks(group["tokens"], stop)
        labels = _read_blocks(group["labels"], stop).astype(np.float32)
        lengths = _read_blocks(group["lengths"], stop).astype(np.int64)
    if tokens.dtype not in (np.uint16, np.int32, np.int64):
        raise DatasetError(
            f"{path}: /{split}/tokens has dtype {tokens.dtype}; expected uint16 or int32"
        )
    return SplitArrays(tokens, labels, lengths)


def gather_batch(arrays: Rows, index: np.ndarray) -> Batch:
    """The rows ``index`` of ``arrays`` as tensors, tokens trimmed to the longest length."""
    lengths = np.take(arrays.lengths, index).astype(np.int64, copy=False)
    width = int(min(arrays.tokens.shape[1], max(1, int(lengths.max(initial=1)))))
    rows = np.take(arrays.tokens, index, axis=0)  # (B, L); np.take is ~2x faster than rows[i]
    tokens = rows[:, :width].astype(np.int32)  # (B, T)
    labels = np.take(arrays.labels, index).astype(np.float32, copy=False)
    return Batch(torch.from_numpy(tokens), torch.from_numpy(lengths), torch.from_numpy(labels))


# ---------------------------------------------------------------------------------------------
# Plans and the sampler


class StepPlan(Protocol):
    """A cut of permutation positions ``start .. start + n - 1`` into steps and rank shares.

    Step-major: step ``s`` covers the next ``step_global(s)`` positions after step ``s - 1``,
    and rank ``r`` takes its ``local_size`` of them after the ranks before it. So after ``k``
    steps exactly the positions ``start .. local_range(0, k)[0] - 1`` are consumed, whatever
    the number of ranks or their shares: a checkpoint records one global position and a run
    with another world size continues from it. :class:`EpochPlan` is the even split;
    ``engine.balance.balancer.SplitPlan`` (speed-proportional shares) satisfies the same
    protocol. Every rank must hold an identical plan.
    """

    @property
    def start(self) -> int:
        """First position of the epoch permutation covered."""

    @property
    def n(self) -> int:
        """Positions covered (each exactly once)."""

    @property
    def steps(self) -> int:
        """Steps of this plan, the same on every rank."""

    @property
    def world(self) -> int:
        """Number of ranks."""

    def local_range(self, rank: int, step: int) -> tuple[int, int]:
        """Permutation positions [lo, hi) of ``rank`` at ``step`` (non-empty)."""

    def step_global(self, step: int) -> int:
        """Samples over all ranks at ``step``."""


@dataclass(frozen=True, slots=True)
class EpochPlan:
    """Per-rank sample counts and batch sizes covering positions [start, start + sum(counts)).

    Every rank runs ``steps = max_r ceil(counts[r] / batch_sizes[r])`` steps and spreads its
    ``counts[r]`` samples evenly over them (its step sizes differ by at most one and never
    exceed its batch size), so all ranks meet at every all-reduce and no sample is dropped or
    repeated. Positions are laid out step-major (see :class:`StepPlan`): step ``s`` starts at
    ``start + sum_r floor(s * counts[r] / steps)``.
    """

    counts: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    start: int = 0

    def __post_init__(self) -> None:
        if len(self.counts) != len(self.batch_sizes) or not self.counts:
            raise ValueError(f"plan needs one count and one batch size per rank: {self}")
        if min(self.batch_sizes) < 1:
            raise ValueError(f"every batch size must be >= 1: {self.batch_sizes}")
        if min(self.counts) < self.steps:
            raise ValueError(
                f"every rank needs >= {self.steps} samples (one per step): {self.counts}"
            )

    @property
    def world(self) -> int:
        """Number of ranks."""
        return len(self.counts)

    @property
    def n(self) -> int:
        """Samples covered by the plan."""
        return sum(self.counts)

    @property
    def steps(self) -> int:
        """Steps every rank runs."""
        return max(math.ceil(c / b) for c, b in zip(self.counts, self.batch_sizes, strict=True))

    def step_start(self, step: int) -> int:
        """First position of ``step`` (``start + n`` for ``step == steps``)."""
        return self.start + sum((step * c) // self.steps for c in self.counts)

    def local_range(self, rank: int, step: int) -> tuple[int, int]:
        """Permutation positions [lo, hi) of ``rank`` at ``step``."""
        lo = self.step_start(step) + sum(self.local_size(r, step) for r in range(rank))
        return lo, lo + self.local_size(rank, step)

    def local_size(self, rank: int, step: int) -> int:
        """Samples of ``rank`` at ``step``."""
        if not 0 <= step < self.steps:
            raise IndexError(f"step {step} outside 0..{self.steps - 1}")
        count, steps = self.counts[rank], self.steps
        return ((step + 1) * count) // steps - (step * count) // steps

    def step_global(self, step: int) -> int:
        """Samples over all ranks at ``step``."""
        return sum(self.local_size(r, step) for r in range(self.world))


def even_plan(num_samples: int, world: int, global_batch: int, start: int = 0) -> EpochPlan:
    """Equal shares (±1 sample) of positions [start, start + num_samples) for ``world`` ranks.

    Per-rank batches are about ``global_batch / world``; no sample is lost.
    """
    if num_samples < world:
        raise DatasetError(
            f"{num_samples} training samples cannot feed {world} ranks",
            hint="use fewer processes or more data",
        )
    per_rank_batch = max(1, global_batch // world)
    counts = tuple(num_samples // world + (r < num_samples % world) for r in range(world))
    steps = min(min(counts), max(1, math.ceil(num_samples / (per_rank_batch * world))))
    return EpochPlan(counts, tuple(math.ceil(c / steps) for c in counts), start)


def epoch_permutation(num_samples: int, seed: int, epoch: int) -> np.ndarray:
    """The whole sample order of ``epoch`` (a function of (seed, epoch) only; O(n) memory)."""
    return EpochOrder(num_samples, seed, epoch).full()


class PlanSampler:
    """This rank's batch indices: epoch permutation → a sequence of plans → steps.

    Needs no communication: every rank computes the same permutation and plans. An epoch is
    one plan covering every sample, or several consecutive plans (the load balancer re-plans
    every K steps); each plan starts where the previous one ended. Because plans are laid out
    step-major, the positions consumed after any step form a prefix of the permutation: its
    length (:meth:`position`) is all a resume on a different number of ranks needs
    (:meth:`set_epoch` with ``position``).
    """

    def __init__(
        self,
        num_samples: int,
        seed: int,
        rank: int,
        *,
        on_window: WindowHook | None = None,
        lengths: LengthsOf | None = None,
        group: int = 0,
    ) -> None:
        self.num_samples = num_samples
        self.seed = seed
        self.rank = rank
        self.on_window = on_window
        """Told the row ranges of each order window before it is read (prefetch)."""
        self.lengths, self.group = lengths, group
        """Length buckets of the epoch order (EpochOrder): sample ids → lengths, and rows per
        global batch; none when ``lengths`` is None."""
        self.epoch = -1
        self.plans: list[StepPlan] = []
        self._first_steps: list[int] = []
        self.order = EpochOrder(0, seed, 0)  # no epoch yet
        self._start = (0, 0)  # (position, step) where this epoch's first plan begins

    @property
    def buckets(self) -> int:
        """Rows per length-bucket group of the order (0: no length buckets)."""
        return self.group if self.lengths is not None else 0

    def set_epoch(self, epoch: int, *, position: int = 0, step: int = 0) -> None:
        """Start ``epoch`` (new permutation, no plan yet) at ``position``, numbered ``step``.

        ``position > 0`` continues an epoch that another world size began: the first
        ``position`` samples of the permutation were consumed, the next plan starts there.
        """
        if not 0 <= position <= self.num_samples:
            raise ValueError(f"position {position} outside 0..{self.num_samples}")
        self.epoch = epoch
        self.order = EpochOrder(
            self.num_samples,
            self.seed,
            epoch,
            on_window=self.on_window,
            lengths=self.lengths,
            group=self.group,
        )
        self.plans, self._first_steps = [], []
        self._start = (position, step)

    def add_plan(self, plan: StepPlan) -> None:
        """Append the plan covering the next positions of the epoch."""
        if plan.start != self.covered:
            raise ValueError(f"plan starts at position {plan.start}, expected {self.covered}")
        if plan.start + plan.n > self.num_samples:
            raise ValueError(
                f"plan covers positions up to {plan.start + plan.n}, epoch has {self.num_samples}"
            )
        self._first_steps.append(self.steps)
        self.plans.append(plan)

    @property
    def covered(self) -> int:
        """Positions of the epoch covered by the plans so far."""
        return self.plans[-1].start + self.plans[-1].n if self.plans else self._start[0]

    @property
    def steps(self) -> int:
        """Steps of the plans so far (numbered from the epoch's first step)."""
        return self._first_steps[-1] + self.plans[-1].steps if self.plans else self._start[1]

    def plan_at(self, step: int) -> tuple[StepPlan, int]:
        """The plan in force at epoch step ``step`` and the step's index inside it."""
        for first, plan in zip(reversed(self._first_steps), reversed(self.plans), strict=True):
            if step >= first:
                return plan, step - first
        raise IndexError(f"step {step} has no plan")

    def position(self, step: int) -> int:
        """Samples of the epoch consumed (over all ranks) before epoch step ``step``."""
        if step == self.steps:
            return self.covered
        plan, local = self.plan_at(step)
        return plan.local_range(0, local)[0]

    def indices(self, step: int, rank: int | None = None) -> np.ndarray:
        """Sample ids of ``rank`` (default: this rank) at epoch step ``step``."""
        plan, local = self.plan_at(step)
        lo, hi = plan.local_range(self.rank if rank is None else rank, local)
        return self.order.take(lo, hi)

    def loss_scale(self, step: int) -> float:
        """b_i·W/B of this rank at ``step``: DDP's gradient mean then equals the global mean."""
        plan, local = self.plan_at(step)
        lo, hi = plan.local_range(self.rank, local)
        return (hi - lo) * plan.world / plan.step_global(local)

    def state_dict(self) -> dict[str, Any]:
        """The epoch, where it began and its plans (plain picklable objects) for a checkpoint."""
        return {"epoch": self.epoch, "start": self._start, "plans": list(self.plans)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Rebuild the epoch order saved by :meth:`state_dict` (same world size)."""
        position, step = state.get("start", (0, 0))
        self.set_epoch(int(state["epoch"]), position=int(position), step=int(step))
        for plan in state["plans"]:
            self.add_plan(plan)


# ---------------------------------------------------------------------------------------------
# Loaders


class _StepBatches(Dataset[Batch]):
    """Item i = this rank's batch at step ``first_step + i`` (one fancy-index gather)."""

    def __init__(self, arrays: Rows, sampler: PlanSampler, first: int, stop: int) -> None:
        self.arrays = arrays
        self.sampler = sampler
        self.first_step = first
        self.stop = stop

    def __len__(self) -> int:
        return self.stop - self.first_step

    def __getitem__(self, i: int) -> Batch:
        return gather_batch(self.arrays, self.sampler.indices(self.first_step + i))


def train_loader(
    arrays: Rows,
    sampler: PlanSampler,
    first_step: int,
    stop_step: int,
    *,
    workers: int = 0,
    pin_memory: bool = False,
) -> DataLoader[Batch]:
    """This rank's batches of epoch steps [first_step, stop_step) (resume skips steps)."""
    batches = _StepBatches(arrays, sampler, first_step, stop_step)
    return DataLoader(
        batches, batch_size=None, shuffle=False, num_workers=workers, pin_memory=pin_memory
    )


def shard_bounds(num_samples: int, rank: int, world: int) -> tuple[int, int]:
    """[start, end) of rank's contiguous evaluation shard (sizes differ by at most one)."""
    return (rank * num_samples) // world, ((rank + 1) * num_samples) // world


EVAL_AUTO_SHARE = 0.3
"""Automatic evaluation size, as a share of the training samples: a forward pass costs about a
third of a training step, so scoring 0.3 × n_train samples costs about 10 % of an epoch."""


def eval_size(n_test: int, n_train: int, limit: int | None) -> int:
    """Test samples to evaluate: all, or ``limit`` (automatic when None), whichever is fewer."""
    if limit is None:
        limit = max(1, math.ceil(EVAL_AUTO_SHARE * n_train))
    return min(n_test, limit)


def eval_batches(
    arrays: Rows, count: int, start: int, end: int, batch_size: int
) -> Iterator[Batch]:
    """Batches of the evaluated samples ``start .. end - 1`` of ``count``, gathered lazily.

    Sample ``i`` of ``count`` is row ``i * N // count`` of the N-row split: the whole split in
    order when ``count == N``, else a fixed sample spread evenly over it (systematic sampling:
    no index array to hold, the same rows at every evaluation and on any world size).
    """
    n = len(arrays.labels)
    for lo in range(start, end, batch_size):
        index = np.arange(lo, min(end, lo + batch_size), dtype=np.int64)
        yield gather_batch(arrays, index if count == n else index * n // count)


def to_device(batch: Batch, device: torch.device) -> Batch:
    """Copy tokens and labels to ``device`` (non-blocking from pinned memory on CUDA)."""
    if device.type == "cpu":
        return batch
    return Batch(
        batch.tokens.to(device, non_blocking=True),
        batch.lengths,
        batch.labels.to(device, non_blocking=True),
    )

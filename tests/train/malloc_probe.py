"""A rank that allocates and frees tensor-sized arrays like a training step and prints its page
faults (``python -m tests.train.malloc_probe``)."""

from __future__ import annotations

import resource

import numpy as np


def main() -> None:
    """Thirty rounds of eight arrays of 0.25–47 MB, freed in a random order; print the faults."""
    rng = np.random.default_rng(0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(30):
        held: list[np.ndarray | None] = [
            np.ones(int(rng.integers(1, 48)) * 2**18, dtype=np.float32) for _ in range(8)
        ]
        for i in rng.permutation(len(held)):
            held[i] = None
    print(f"faults {resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}", flush=True)


if __name__ == "__main__":
    main()

"""The settings every preprocessing worker needs (picklable), shared by all runners."""

from __future__ import annotations

from dataclasses import dataclass

from engine.preprocess.records import RecordSpec
from engine.preprocess.reduce import LabelRule
from engine.preprocess.spill import SpillPlan


@dataclass(slots=True)
class JobSettings:
    """What every worker needs to know (picklable)."""

    specs: list[RecordSpec]
    rule: LabelRule
    stop: frozenset[bytes]
    test_fraction: float
    max_line_bytes: int
    vocab_size: int
    seq_len: int
    tmp: str
    memory_budget: int | None = None
    """Bytes the distinct-text state may hold over all workers before spilling (None: no
    limit, for the runners that hand the state to Spark or Hadoop)."""
    input_bytes: int = 0
    spill: SpillPlan | None = None
    """Set by run_local for the worker count it runs with."""

"""Fuzz: arbitrary lines never crash the map/reduce functions and the counts always add up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.config import PreprocessConfig
from engine.errors import InputError
from engine.preprocess import run_preprocess
from engine.preprocess.mapper import MapStats, map_lines
from engine.preprocess.readers import MapTask
from engine.preprocess.records import SKIP_REASONS, RecordSpec
from engine.preprocess.reduce import LabelRule, reduce_texts
from engine.preprocess.text import stopwords

SPEC = RecordSpec()
TASK = MapTask(0, "fuzz", 0, 0, False, 0)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-10, 10)
    | st.floats(allow_nan=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
ratings = st.sampled_from([1, 2, 3, 4, 5, 1.0, 5.0, 0, 6, 4.5, "4", "x", None, True, [], -3])
texts = st.text(max_size=60) | st.sampled_from(["Great!", "great", "GREAT!!", "the", "&amp;", ""])
review_lines = st.builds(
    lambda t, r, drop: json.dumps(
        {k: v for k, v in {"reviewText": t, "overall": r}.items() if k != drop}
    ).encode(),
    texts,
    ratings,
    st.sampled_from([None, None, None, "reviewText", "overall"]),
)
lines = st.one_of(
    review_lines,
    review_lines.map(lambda b: b[: len(b) // 2]),  # truncated JSON
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")),
    st.builds(lambda t: f"{{'reviewText': {t!r}, 'overall': 5.0}}".encode(), texts),  # literal
)


@pytest.mark.slow
@settings(max_examples=110, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lines, min_size=100, max_size=140))
def test_fuzz_counts_add_up(batch: list[bytes]) -> None:
    """110 examples x >= 100 lines: at least 11,000 fuzzed lines per run."""
    agg: dict[bytes, int] = {}
    stats = MapStats()
    map_lines(batch, [], 1, TASK, SPEC, 200, agg, stats)
    part = reduce_texts(agg.items(), LabelRule(1, 5, 3), stopwords(False), 0.2)
    assert set(stats.skipped) <= set(SKIP_REASONS)
    skipped = sum(stats.skipped.values()) + part.counts.only_stopwords
    kept = part.counts.train + part.counts.test
    assert stats.read == len(batch) == kept + skipped + part.counts.duplicates
    assert kept == len(part.rows) == part.counts.positive + part.counts.negative
    assert all(len(examples) <= 5 for examples in stats.examples.values())


@settings(max_examples=3, deadline=None)
@given(st.lists(lines, min_size=300, max_size=400))
def test_fuzz_end_to_end_with_two_workers(tmp_path_factory: object, batch: list[bytes]) -> None:
    base = Path(tmp_path_factory.mktemp("fuzz"))  # type: ignore[attr-defined]
    path = base / "f.jsonl"
    path.write_bytes(b"\n".join(batch) + b"\n")
    try:
        stats = run_preprocess(
            PreprocessConfig(inputs=[str(path)], output=str(base / "o"), workers=2)
        )
    except InputError as exc:  # the quality gate: no usable review, or only one class
        assert str(path) in exc.message
        assert not (base / "o" / "dataset.h5").exists()
        return
    assert stats["positive"] and stats["negative"]
    assert stats["read"] == len(batch)
    assert stats["read"] == stats["kept"] + stats["skipped_total"] + stats["duplicates"]

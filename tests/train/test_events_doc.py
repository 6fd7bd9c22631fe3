"""docs/EVENTS.md documents every event type, and training emits only documented types."""

from __future__ import annotations

import re
from pathlib import Path

from engine.events import EVENT_TYPES

ROOT = Path(__file__).resolve().parents[2]


def test_every_event_type_has_a_row_in_events_md() -> None:
    doc = (ROOT / "docs" / "EVENTS.md").read_text()
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", doc, flags=re.M))
    assert set(EVENT_TYPES) <= rows, sorted(set(EVENT_TYPES) - rows)


def test_training_code_emits_only_indexed_types() -> None:
    emitted: set[str] = set()
    for name in ("sentiment/trainer.py", "sentiment/train.py", "launch.py"):
        text = (ROOT / "engine" / name).read_text()
        emitted |= set(re.findall(r'emit\(\s*"([a-z_]+)"', text))
    assert emitted, "no emit calls found"
    assert emitted <= set(EVENT_TYPES), sorted(emitted - set(EVENT_TYPES))

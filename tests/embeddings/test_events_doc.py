"""docs/EVENTS.md documents the embeddings events: their types and every field they carry."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from engine.events import EVENT_TYPES, read_events

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "tui" / "fixtures" / "embed-runs" / "20261121-embed" / "events.jsonl"
COMMON = {"type", "t", "rank", "node", "run"}
"""Fields of the common table at the top of EVENTS.md."""


def _section() -> str:
    doc = (ROOT / "docs" / "EVENTS.md").read_text()
    match = re.search(r"^## Embeddings.*?(?=^## )", doc, flags=re.M | re.S)
    assert match, "docs/EVENTS.md has no '## Embeddings' section"
    return match.group(0)


def _documented(section: str) -> set[str]:
    return set(re.findall(r"`([a-z_]+)`", section))


def _emit_calls() -> list[tuple[str, set[str]]]:
    """(type, keyword names) of every ``*.emit("type", k=...)`` call in engine/embeddings."""
    calls = []
    for path in (ROOT / "engine" / "embeddings").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "emit"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                calls.append((str(node.args[0].value), {k.arg for k in node.keywords if k.arg}))
    return calls


def test_embeddings_emit_only_indexed_types_with_documented_fields() -> None:
    calls = _emit_calls()
    assert {"stage_start", "step", "epoch", "phase", "summary"} <= {t for t, _ in calls}
    assert {t for t, _ in calls} <= set(EVENT_TYPES)
    documented = _documented(_section()) | COMMON
    fields = set().union(*(keys for _, keys in calls))
    assert fields - documented == set()


def test_every_field_of_a_recorded_run_is_documented() -> None:
    """The recorded dashboard fixture (a real 2-rank run) has only documented fields."""
    documented = _documented(_section()) | COMMON
    seen: set[str] = set()
    for event in read_events(FIXTURE):
        seen |= set(event)
    assert {"words_per_s", "pip_loss", "workload", "compute", "comm", "straggle"} <= seen
    assert seen - documented == set()

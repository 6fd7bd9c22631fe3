"""A node that dies with text full of Rich markup, run for real: one local node process prints a
gloo-style error (as a plain stderr line and inside an `error` event, like a failing rank) and
exits 1. Shared by the headless tests and the dashboard's log-pane tests (see
:func:`write_failing_run` for a run folder the dashboard can replay)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.events import Emitter, FanoutSink, JsonlFileSink, encode_event, make_event
from remote.clusters import Command, LocalCluster
from remote.clusters.base import NodeFailedError

MARKUP_TEXT = (
    "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
    "Connection closed by peer [bold]127.0.0.2[/x] see [link=https://example.invalid/gloo]docs"
)
"""Error text with an unmatched closing tag, an opening tag and a link tag: rendered as markup
it raises rich.errors.MarkupError or loses the brackets."""
MARKUP_PIECES = (
    "[/__w/pytorch/",
    "pair.cc:553]",
    "[bold]",
    "[/x]",
    "[link=https://example.invalid/gloo]",
)
"""Parts of MARKUP_TEXT that must come out verbatim."""

_SCRIPT = """
import sys
text, event = sys.argv[1], sys.argv[2]
print(event, flush=True)
print("Traceback (most recent call last):", file=sys.stderr)
print(text, file=sys.stderr, flush=True)
sys.exit(1)
"""


class _Collect:
    """Event sink that keeps every event."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def write(self, event: Any) -> None:
        self.events.append(dict(event))

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class FailedNode:
    """What a real local cluster reported about the failing node."""

    error: NodeFailedError
    events: list[dict[str, Any]]
    """Every event of the stage (the node's own `error` event and the cluster's)."""
    lines: list[tuple[str, str, dict[str, Any] | None]] = field(default_factory=list)
    """(node, line, event or None) as the cluster passed them to on_line."""

    def summary(self, run: str = "20261124-failing-node") -> dict[str, Any]:
        """The run summary the runner writes for this failure (status failed, reason = error)."""
        return {
            "run": run,
            "profile": "failing-node",
            "provider": "local",
            "status": "failed",
            "reason": self.error.message,
            "world_size": 1,
            "wall_s": 1.0,
            "usd": 0.0,
            "usd_per_hour": 0.0,
            "train": {},
            "warnings": [],
        }


async def _fail(run_dir: Path, sink: Any) -> FailedNode:
    collect = _Collect()
    lines: list[tuple[str, str, dict[str, Any] | None]] = []
    event = encode_event(make_event("error", rank=0, message=MARKUP_TEXT))
    cluster = LocalCluster(["local"])
    async with cluster:
        await cluster.start(run_dir, events=FanoutSink(collect, sink))
        command = Command(
            argv=(sys.executable, "-c", _SCRIPT, MARKUP_TEXT, event), env=cluster.code_env("local")
        )
        try:
            await cluster.run({"local": command}, stage="train", on_line=lambda *a: lines.append(a))
        except NodeFailedError as exc:
            return FailedNode(exc, collect.events, lines)
    raise AssertionError("the failing node did not fail")


def fail_a_node(run_dir: Path) -> FailedNode:
    """Run the failing node once (its logs go under ``run_dir``)."""
    return asyncio.run(_fail(run_dir, _Collect()))


def write_failing_run(runs_dir: Path, run: str = "20261124-failing-node") -> Path:
    """A run folder (events.jsonl with run_start … run_end, summary.json) of a run whose node
    failed with MARKUP_TEXT, recorded from a real local node: for replaying in the dashboard."""
    run_dir = runs_dir / run
    run_dir.mkdir(parents=True, exist_ok=True)
    sink = JsonlFileSink(run_dir / "events.jsonl")
    emitter = Emitter(sink, run=run)
    emitter.emit("run_start", profile="failing-node", provider="local", world_size=1,
                 usd_per_hour=0.0, config={})  # fmt: skip
    emitter.emit("stage_start", stage="train", world_size=1, nodes=["local"])
    failed = asyncio.run(_fail(run_dir, sink))
    summary = failed.summary(run)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    emitter.emit("summary", stage="run", **{k: v for k, v in summary.items() if k != "run"})
    emitter.emit("run_end", status="failed", reason=failed.error.message, t=time.time())
    emitter.close()
    return run_dir

"""Event JSON quoted in node output (a failed stage's last lines) reads as words in the log."""

from __future__ import annotations

import json
from typing import Any

from engine.errors import LaunchError
from engine.events import encode_event
from tests.tui.fakes import build_app
from tests.tui.scenes import SIZE, settle
from tui.model import RunState
from tui.model.event_text import readable_line
from tui.screens.modals import ErrorScreen
from tui.widgets.log_pane import LogPane

T0 = 1_763_800_000.0
START = {"type": "stage_start", "t": T0 + 1, "stage": "preprocess"}
END = {
    "type": "stage_end",
    "t": T0 + 4.2,
    "stage": "preprocess",
    "status": "failed",
    "seconds": 3.2,
}
ODD = '{"type": "mystery", "note": "[bold red]not markup[/]"}'
"""JSON of an unknown event type: stays as it is, and is not read as markup."""


def failing_preprocess_runner() -> Any:
    """A runner whose preprocessing fails the way a node's does: events, then the error with
    the node's last lines (events among them), then the LaunchError quoting them."""

    async def run(profile, on_event, stop, on_log=None):  # type: ignore[no-untyped-def]
        tail = [
            encode_event(START),
            encode_event({"type": "progress", "t": T0 + 2, "stage": "preprocess", "done": 10}),
            "Traceback (most recent call last):",
            "[rank0]: " + json.dumps({"type": "stage_start", "t": T0 + 3, "stage": "tokenize"}),
            "ValueError: reviews.csv: no 'label' column",
            encode_event(END),
        ]
        on_event({"type": "run_start", "t": T0, "run": "r-pre", "profile": profile.name})
        on_event(START)
        if on_log is not None:  # plain output lines, one holding a prefixed event
            on_log("local", "[default0]: " + json.dumps({"type": "error", "message": "bad row"}))
            on_log("local", "[bold red]reading reviews.csv[/]")
            on_log("local", f"[rank0]: {ODD}")
        on_event(END)
        on_event(
            {"type": "error", "t": T0 + 4.3, "node": "local", "message": "exit 1", "tail": tail}
        )
        quoted = "\n".join(f"    | {line}" for line in tail)
        raise LaunchError(f"node local exited with code 1 during preprocess\n{quoted}")

    return run


async def test_failed_preprocess_log_shows_events_in_words_not_json() -> None:
    app = build_app(runner=failing_preprocess_runner())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")  # local-cpu
        await settle(pilot)
        assert isinstance(app.screen, ErrorScreen)
        body = str(app.screen.query_one("#dialog-body").render())
        assert "stage preprocess started" in body and "stage preprocess failed in 3s" in body
        assert '{"type":"stage' not in body and "[rank0]: stage tokenize started" in body
        await pilot.press("enter")
        await settle(pilot)
        pane = app.run_screen.query_one(LogPane)
        texts = [line.text for line in pane.visible_lines()]
        assert not any(text.lstrip().startswith('{"type":"') for text in texts), texts
        assert "stage preprocess started" in texts
        assert "stage preprocess failed in 3s" in texts
        assert "[default0]: error: bad row" in texts and f"[rank0]: {ODD}" in texts
        # the node's last lines: its events were logged already; the traceback and the rest show
        assert [t for t in texts if t.startswith("  ")] == [
            "  Traceback (most recent call last):",
            "  [rank0]: stage tokenize started",
            "  ValueError: reviews.csv: no 'label' column",
        ]
        pane.set_filter("[bold red]")  # foreign text is drawn as it is, never as markup
        shown = pane.render().plain
        assert "[bold red]reading reviews.csv[/]" in shown and "[bold red]not markup[/]" in shown


def test_readable_line_describes_known_events_and_keeps_the_rest() -> None:
    assert readable_line(encode_event(START)) == ("stage preprocess started", "info")
    assert readable_line(json.dumps(END)) == ("stage preprocess failed in 3s", "error")
    assert readable_line('{"type":"error","message":"disk full"}') == ("error: disk full", "error")
    assert readable_line(ODD) == (ODD, None)
    assert readable_line('{"type": "stage_start", "stage": "x"') == (
        '{"type": "stage_start", "stage": "x"',
        None,
    )
    assert readable_line("plain {braces} here") == ("plain {braces} here", None)


def test_plain_log_lines_holding_events_are_readable_in_the_state() -> None:
    state = RunState()
    state.ingest({"type": "run_start", "t": T0, "run": "r"})
    state.add_log("n0", '[rank1]: {"type":"warning","message":"class share 0.9"}')
    state.ingest({"type": "log", "t": T0 + 1, "line": encode_event(START)})
    assert [(ln.text, ln.level) for ln in list(state.log)[1:]] == [
        ("[rank1]: warning: class share 0.9", "warn"),
        ("stage preprocess started", "info"),
    ]


def test_a_survivors_error_after_a_lost_node_is_a_warning_not_the_error() -> None:
    """The node that lost its peer logged a red error (with its traceback) before the node
    that failed; it is now said to be a consequence."""
    state = RunState()
    state.ingest({"type": "run_start", "t": T0, "run": "r"})
    lost = "RuntimeError: [gloo/pair.cc:534] Read error: Connection reset by peer"
    state.ingest({"type": "error", "t": T0 + 1, "node": "node0", "message": lost,
                  "tail": ["Traceback (most recent call last):", "  File x"]})  # fmt: skip
    state.ingest({"type": "error", "t": T0 + 2, "node": "node1", "message": "killed"})
    said = [(ln.source, ln.text, ln.level) for ln in list(state.log)[1:]]
    assert said == [
        ("node0", f"lost its connection to another node (not the cause): {lost}", "warn"),
        ("node1", "killed", "error"),
    ]

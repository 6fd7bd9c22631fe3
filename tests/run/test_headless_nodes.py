"""The headless display says when a machine that costs money starts, runs and is terminated
(an EC2 run waiting minutes for SSH showed only `epochs 0/1 $0.000`), not every stage's node."""

from __future__ import annotations

import io

from rich.console import Console

from tui.cli.headless import HeadlessProgress


def test_cloud_instances_are_shown_from_launch_to_termination() -> None:
    out = io.StringIO()
    console = Console(file=out, width=300, color_system=None, force_terminal=False)
    events = [
        {"type": "node", "node": "local", "status": "running", "stage": "preprocess"},
        {"type": "node", "node": "local", "status": "done", "stage": "preprocess"},
        {"type": "node", "node": "i-0abc", "status": "launching",
         "detail": "g5.xlarge on-demand", "instance_type": "g5.xlarge", "spot": False},
        {"type": "node", "node": "i-0abc", "status": "running", "detail": "54.1.2.3",
         "instance_type": "g5.xlarge", "spot": False},
        {"type": "node", "node": "i-0abc", "status": "terminated", "detail": "[bold]x"},
    ]  # fmt: skip
    with HeadlessProgress(console, epochs=1) as display:
        for event in events:
            display.on_event(event)
    text = out.getvalue()
    assert "node i-0abc: launching (g5.xlarge on-demand)" in text
    assert "node i-0abc: running (54.1.2.3), billed from now; waiting for SSH" in text
    assert "node i-0abc: terminated ([bold]x)" in text
    assert "node local" not in text


def test_a_survivor_of_a_lost_node_is_not_shown_as_the_error() -> None:
    """A node killed mid-run: the survivor's gloo error ("Connection reset by peer") came first,
    in red as "error (node0)", and the node that failed was named only after it."""
    out = io.StringIO()
    console = Console(file=out, width=300, color_system=None, force_terminal=False)
    gloo = (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error "
        "[127.0.0.3]:53412: Connection reset by peer\nsecond line"
    )
    with HeadlessProgress(console, epochs=1) as display:
        display.on_event({"type": "error", "node": "node0", "message": gloo})
        display.on_event({"type": "error", "node": "node1", "message": "CUDA error: \x1b[2J"})
    text = out.getvalue()
    assert "error (node0)" not in text
    assert "node0: lost its connection to another node (RuntimeError: [" in text
    assert "second line" not in text and "named when the run stops" in text
    assert "error (node1): CUDA error: \\x1b[2J" in text  # a cause is still an error

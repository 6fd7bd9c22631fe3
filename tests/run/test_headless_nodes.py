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

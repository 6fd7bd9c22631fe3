"""Snapshots (pytest-textual-snapshot) of every screen, from fixed fakes and a replayed run.

Update after an intended visual change: `pytest tests/tui/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.tui.scenes import SCENES, SIZE


@pytest.mark.parametrize("name", sorted(SCENES))
def test_screen_snapshot(name: str, snap_compare: Any) -> None:
    scene = SCENES[name]
    assert snap_compare(scene.make(), terminal_size=SIZE, run_before=scene.run_before)

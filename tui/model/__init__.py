"""Textual-free run-state model shared by the dashboard, the headless CLI and reports."""

from tui.model.records import EpochRow, LogLine, NodeInfo, StageInfo
from tui.model.run_state import RunState
from tui.model.run_views import PHASES
from tui.model.series import Series

__all__ = ["PHASES", "EpochRow", "LogLine", "NodeInfo", "RunState", "Series", "StageInfo"]

"""Suite-wide pytest hooks: a failing SentitopError shows its hint (a failed rank's last lines)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from engine.errors import SentitopError


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[Any]:
    """Add the hint of a SentitopError to the failure report (pytest shows only its message)."""
    outcome = yield
    report = outcome.get_result()
    exc = call.excinfo.value if call.excinfo is not None else None
    if isinstance(exc, SentitopError) and exc.hint:
        report.sections.append(("sentitop error hint", exc.hint))

"""Suite-wide pytest hooks: SentitopError hints in reports; dataset copies in a temp cache."""

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


@pytest.fixture(autouse=True)
def _dataset_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Training ranks (and their subprocesses) copy datasets into a temporary node cache."""
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path_factory.mktemp("sentitop-cache")))

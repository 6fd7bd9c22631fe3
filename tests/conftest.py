"""Suite-wide pytest hooks: SentitopError hints in reports; dataset copies in a temp cache."""

from __future__ import annotations

import signal
from collections.abc import Generator
from typing import Any

import pytest

from engine.errors import SentitopError


def pytest_configure(config: pytest.Config) -> None:
    """Stop signals the suite was started with ignored (a background job of a script ignores
    SIGINT, nohup SIGHUP) are handled again, so the processes the signal tests start and stop
    inherit the handling a terminal gives them rather than the launcher's."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for number in (signal.SIGHUP, signal.SIGTERM):
        if signal.getsignal(number) is signal.SIG_IGN:
            signal.signal(number, signal.SIG_DFL)


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

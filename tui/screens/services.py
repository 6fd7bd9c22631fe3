"""Services: what the dashboard talks to (profiles, prices, runs folder, the runner).

`make_app` fills it with the real back ends; tests pass fakes. Nothing here imports textual.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import LaunchError
from tui.model.rows import PriceList, ProfileRow, load_price_rows, load_profile_rows

OnEvent = Callable[[dict[str, Any]], None]
RunStarter = Callable[[Any, OnEvent, asyncio.Event], Awaitable[Any]]
"""async (profile, on_event, stop_event) -> result: runs one profile until done or stopped."""
TearDown = Callable[[str], Any]
"""(run_id) -> None: tear down every cloud resource of a run now (called in a thread)."""
PriceLoader = Callable[[bool], PriceList]
"""(refresh) -> the catalog; True fetches live prices first."""


def runner_for(runs_dir: Path) -> RunStarter:
    """A RunStarter that runs profiles with remote.runner.execute_run into ``runs_dir``."""

    async def start(profile: Any, on_event: OnEvent, stop: asyncio.Event) -> Any:
        try:
            from remote.runner import execute_run
        except ImportError as exc:
            raise LaunchError(
                f"the runner (remote.runner) cannot be loaded: {exc}",
                hint="reinstall sentitop, or use `sentitop replay RUN_DIR` to watch a recorded run",
            ) from exc
        outcome = await execute_run(profile, runs_dir=runs_dir, on_event=on_event, stop=stop)
        if outcome.status == "failed" and outcome.error is not None:
            raise outcome.error
        return outcome

    return start


@dataclass(kw_only=True)
class Services:
    """The dashboard's back ends."""

    profiles_dir: Path | None = None
    """Folder of profile YAML files (None: $SENTITOP_PROFILES_DIR, ./profiles or the shipped)."""
    runs_dir: Path = Path("runs")
    """Folder of run folders (events.jsonl, summary.json)."""
    load_profiles: Callable[[Path | None], list[ProfileRow]] = load_profile_rows
    """Reads the profiles folder (runs in a thread worker)."""
    load_prices: PriceLoader = load_price_rows
    """Reads the catalog; True = refresh live prices first (thread worker)."""
    start_run: RunStarter | None = None
    """Runs a profile (async worker); None = remote.runner into ``runs_dir``. The runner tears
    its nodes down on every exit path."""
    teardown: TearDown | None = None
    """Extra teardown of a run's cloud resources (thread worker); None = stopping the run is
    the teardown (remote.runner terminates the nodes when it ends)."""
    now: Callable[[], float] = field(default=time.time)
    """Wall clock (fixed in snapshot tests)."""

    def runner(self) -> RunStarter:
        """The run starter in use."""
        return self.start_run or runner_for(self.runs_dir)

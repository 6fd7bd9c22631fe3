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
from remote.teardown import teardown_recorded_run
from tui.model.rows import (
    EpochCosts,
    PriceList,
    ProfileRow,
    load_epoch_costs,
    load_price_rows,
    load_profile_rows,
)

OnEvent = Callable[[dict[str, Any]], None]
OnLog = Callable[[str, str], None]
"""(node, line): a node's output line that is not an event."""
RunStarter = Callable[..., Awaitable[Any]]
"""async (profile, on_event, stop_event, on_log=None, resume_from=None) -> result: runs one
profile until done or stopped; ``on_log`` gets node output lines that are not events;
``resume_from`` is a stopped run's folder to continue (passed only when set)."""
TearDown = Callable[[str], Any]
"""(run_id) -> None: tear down every cloud resource of a run now (called in a thread)."""
PriceLoader = Callable[[bool], PriceList]
"""(refresh) -> the catalog; True fetches live prices first."""


def runner_for(runs_dir: Path) -> RunStarter:
    """A RunStarter that runs profiles with remote.runner.execute_run into ``runs_dir``."""

    async def start(
        profile: Any,
        on_event: OnEvent,
        stop: asyncio.Event,
        on_log: OnLog | None = None,
        resume_from: Path | None = None,
    ) -> Any:
        try:
            from remote.runner import execute_run
        except ImportError as exc:
            raise LaunchError(
                f"the runner (remote.runner) cannot be loaded: {exc}",
                hint="reinstall sentitop, or use `sentitop replay RUN_DIR` to watch a recorded run",
            ) from exc

        def on_line(node: str, line: str, event: dict[str, Any] | None) -> None:
            if event is None and on_log is not None and line.strip():
                on_log(node, line)

        outcome = await execute_run(
            profile,
            runs_dir=runs_dir,
            on_event=on_event,
            on_line=on_line,
            stop=stop,
            resume_from=resume_from,
        )
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
    teardown_recorded: Callable[[Path], str] = teardown_recorded_run
    """Terminates what a recorded run (its folder) left in the cloud; says what (thread worker)."""
    epoch_costs: Callable[[Path, Path], EpochCosts] = load_epoch_costs
    """(profile file, runs folder) -> predicted $ per epoch per GPU type (thread worker)."""
    selected_profile: Path | None = None
    """The profile highlighted on the Profiles screen (the Prices screen prices its workload)."""
    now: Callable[[], float] = field(default=time.time)
    """Wall clock (fixed in snapshot tests)."""

    def runner(self) -> RunStarter:
        """The run starter in use."""
        return self.start_run or runner_for(self.runs_dir)

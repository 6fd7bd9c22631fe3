"""Deterministic fake back ends for dashboard tests, snapshots and screenshots."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import ProfileError
from engine.events import read_events
from tui.app import SentitopApp, make_app
from tui.model.rows import EpochCosts, PriceList, PriceRow, ProfileRow
from tui.services import OnEvent, Services

FIXTURES = Path(__file__).parent / "fixtures"
RUNS_DIR = FIXTURES / "runs"
FIXTURE_RUN = RUNS_DIR / "20261121-fixture"
SINGLE_RUN = RUNS_DIR / "20261120-single"
NOW = 1_763_800_000.0


@dataclass
class FakeProfile:
    """Stands in for remote.profile.Profile."""

    name: str
    cluster: str
    nodes: int
    gpus: int
    extra: dict[str, Any] = field(default_factory=dict)

    def model_dump(self, exclude_none: bool = True) -> dict[str, Any]:
        return {"name": self.name, "cluster": self.cluster, **self.extra}


def fake_profile_rows(folder: Path | None) -> list[ProfileRow]:
    """Two valid profiles and one that does not validate."""
    folder = folder or Path("profiles")
    ec2 = FakeProfile(
        "two-t4-nodes",
        "ec2",
        2,
        4,
        {
            "instance_type": "g4dn.12xlarge",
            "region": "us-east-1",
            "train": {"epochs": 3, "balance": {"enabled": True, "straggle": {}}},
            "nodes": [{"instance_type": "g4dn.12xlarge", "count": 2, "spot": False}],
        },
    )
    local = FakeProfile("local-cpu", "local", 1, 0, {"epochs": 1, "workers": 2})
    return [
        ProfileRow(
            name="local-cpu",
            path=str(folder / "local-cpu.yaml"),
            cluster="local",
            nodes=1,
            gpus=0,
            usd_per_hour=None,
            ranks=2,
            device="CPU",
            profile=local,
        ),
        ProfileRow(
            name="two-t4-nodes",
            path=str(folder / "two-t4-nodes.yaml"),
            cluster="ec2",
            nodes=2,
            gpus=4,
            usd_per_hour=7.824,
            ranks=4,
            device="4× T4",
            profile=ec2,
        ),
        ProfileRow(
            name="broken",
            path=str(folder / "broken.yaml"),
            errors=["broken.yaml:4: nodes[0].gpus = -1 is not allowed; expected an integer >= 0"],
        ),
    ]


def fake_price_rows(refresh: bool) -> PriceList:
    """A small catalog; ``refresh`` marks the rows live."""
    rows = [
        ("g4dn.xlarge", "T4", 1, 16, 4, 16, 0.526, 0.2104, "bundled", 86400 * 40),
        ("g4dn.12xlarge", "T4", 4, 16, 48, 192, 3.912, 1.5648, "cache", 3600 * 5),
        ("g5.xlarge", "A10G", 1, 24, 4, 16, 1.006, 0.4024, "cache", 3600 * 5),
        ("g5.12xlarge", "A10G", 4, 24, 48, 192, 5.672, None, "bundled", 86400 * 40),
        ("p3.2xlarge", "V100", 1, 16, 8, 61, 3.06, 0.918, "bundled", 86400 * 40),
        ("p4d.24xlarge", "A100", 8, 40, 96, 1152, 32.7726, 9.8318, "user", 86400 * 3),
        ("c5.4xlarge", "", 0, 0, 16, 32, 0.68, 0.272, "bundled", 86400 * 40),
    ]
    prices = [
        PriceRow(
            name,
            gpu,
            n,
            mem,
            vcpu,
            ram,
            od,
            spot,
            "live" if refresh else src,
            60.0 if refresh else float(age),
        )
        for name, gpu, n, mem, vcpu, ram, od, spot, src, age in rows
    ]
    warnings = [] if refresh else ["live prices not fetched: offline mode; using cached prices"]
    return PriceList(prices, warnings)


class FakeRunner:
    """Feeds the fixture run's events; holds after `hold_after` events until stopped."""

    def __init__(self, hold_after: int | None = 12, delay: float = 0.0) -> None:
        self.events = list(read_events(FIXTURE_RUN / "events.jsonl"))
        self.hold_after = hold_after
        self.delay = delay
        self.calls: list[Any] = []
        self.stopped = False
        self.holding = asyncio.Event()

    async def __call__(
        self, profile: Any, on_event: OnEvent, stop: asyncio.Event, on_log: Any = None
    ) -> str:
        self.calls.append(profile)
        if on_log is not None:
            on_log("gpu-a", "a plain log line from a node")
        for i, event in enumerate(self.events):
            if self.hold_after is not None and i == self.hold_after:
                self.holding.set()
                await stop.wait()
            if stop.is_set():
                self.stopped = True
                t = event["t"]
                for node in ("gpu-a", "gpu-b"):
                    on_event({"type": "node", "t": t, "node": node, "status": "stopped"})
                on_event({"type": "run_end", "t": t, "status": "interrupted", "reason": "stopped"})
                return "interrupted"
            on_event(event)
            await asyncio.sleep(self.delay)
        return "ok"


class Teardowns(list[str]):
    """Records the run ids torn down."""

    def __call__(self, run_id: str) -> None:
        self.append(run_id)


def failing_profiles(folder: Path | None) -> list[ProfileRow]:
    """A loader that fails the way a broken profiles folder does."""
    raise ProfileError(f"{folder}/x.yaml: cannot read", hint="check the file permissions")


def fake_epoch_costs(profile: Path, runs_dir: Path) -> EpochCosts:
    """Predicted $/epoch of the fake catalog's GPU types, for the highlighted profile."""
    costs = {"g4dn.xlarge": 0.081, "g5.xlarge": 0.094, "p3.2xlarge": 0.158}
    return EpochCosts(profile.stem, "default model, 100 tokens", costs, 2.2)


def build_app(
    *,
    replay: Path | None = None,
    runner: FakeRunner | None = None,
    teardown: Teardowns | None = None,
    start: str | None = None,
    **overrides: Any,
) -> SentitopApp:
    """The dashboard wired to fakes."""
    services = Services(
        profiles_dir=None,
        runs_dir=overrides.pop("runs_dir", RUNS_DIR),
        load_profiles=overrides.pop("load_profiles", fake_profile_rows),
        load_prices=overrides.pop("load_prices", fake_price_rows),
        epoch_costs=overrides.pop("epoch_costs", fake_epoch_costs),
        start_run=runner or FakeRunner(),
        teardown=teardown if teardown is not None else Teardowns(),
        now=lambda: NOW,
    )
    services.selected_profile = overrides.pop("selected_profile", None)
    if "teardown_recorded" in overrides:
        services.teardown_recorded = overrides.pop("teardown_recorded")
    return make_app(services=services, replay=replay, start=start, **overrides)

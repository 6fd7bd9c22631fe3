"""Cost meter: per-second billing with the 60 s minimum, EMR, spot, ticker events and budgets."""

from __future__ import annotations

import json
import textwrap
import threading
import time
from pathlib import Path

import pytest

from engine.errors import BudgetError, ProfileError
from engine.events import Emitter, JsonlFileSink, read_events
from remote.cost import BILLING_MINIMUM_S, CostLine, CostMeter, CostTicker, check_launch_budget
from remote.pricing import LiveClients, PriceBook, load_bundled_catalog, price_book
from remote.profile import load_profile

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


@pytest.fixture(autouse=True)
def _no_user_prices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's own price cache and override file never leak into these tests."""
    monkeypatch.setenv("SENTITOP_CACHE_DIR", str(tmp_path / "price-cache"))
    monkeypatch.setenv("SENTITOP_PRICES_FILE", str(tmp_path / "no-user-prices.csv"))


def line(name: str = "g", usd: float = 3.6, count: int = 1, emr: float = 0.0) -> CostLine:
    return CostLine(
        name=name,
        field="nodes[0].instance_type",
        instance_type="x.large",
        count=count,
        usd_per_hour=usd,
        emr_usd_per_hour=emr,
    )


def test_minimum_charge_then_per_second() -> None:
    meter = CostMeter(clock=lambda: 0.0)
    meter.start(line(usd=3.6), at=0.0)  # $0.001 per second
    assert meter.usd(now=0.0) == pytest.approx(BILLING_MINIMUM_S * 0.001)
    assert meter.usd(now=59.0) == pytest.approx(0.060)
    assert meter.usd(now=60.0) == pytest.approx(0.060)
    assert meter.usd(now=90.2) == pytest.approx(0.091)  # whole seconds, rounded up
    meter.stop("g", at=120.0)
    assert meter.usd(now=5000.0) == pytest.approx(0.120)  # stopped: no more billing
    assert meter.usd_per_hour() == 0.0


def test_accrued_cost_moves_with_time_under_the_minimum() -> None:
    meter = CostMeter(clock=lambda: 0.0)
    meter.start(line(usd=3.6), at=0.0)  # $0.001 per second
    accrued = [meter.accrued_usd(now=t) for t in (0.0, 5.0, 10.5, 30.0)]
    assert accrued == pytest.approx([0.0, 0.005, 0.0105, 0.030])  # moves while billed is flat
    assert [meter.usd(now=t) for t in (0.0, 5.0, 30.0)] == pytest.approx([0.060] * 3)
    tick = meter.tick(now=20.0)
    assert tick["accrued_usd"] == pytest.approx(0.020) and tick["usd"] == pytest.approx(0.060)
    meter.stop("g", at=40.0)
    assert meter.accrued_usd(now=500.0) == pytest.approx(0.040)


def test_groups_count_emr_surcharge_and_stop_independently() -> None:
    meter = CostMeter()
    meter.start(line("train", usd=1.0, count=4), at=0.0)
    meter.start(line("emr", usd=0.2, count=3, emr=0.06), at=0.0)
    assert meter.usd_per_hour() == pytest.approx(4 * 1.0 + 3 * 0.26)
    meter.stop("emr", at=1800.0)
    assert meter.usd_per_hour() == pytest.approx(4.0)
    assert meter.usd(now=3600.0) == pytest.approx(4.0 + 3 * 0.26 / 2)
    summary = meter.summary(now=3600.0)
    assert summary["usd"] == pytest.approx(meter.usd(now=3600.0))
    assert {x["name"]: x["billed_s"] for x in summary["lines"]} == {"train": 3600, "emr": 1800}
    with pytest.raises(ValueError):
        meter.start(line("train"), at=10.0)


def test_the_hourly_price_of_a_run_is_its_peak_not_every_group_ever_started(
    tmp_path: Path,
) -> None:
    """A lost node and its replacement are never billed at once, nor an EMR cluster that
    finished before training started: summary.json's usd_per_hour is the concurrent peak,
    and the runs table reads the same figure back from the lines' times."""
    from remote.runs_store import load_run

    meter = CostMeter()
    meter.start(line("emr", usd=0.5, count=3), at=0.0)
    meter.stop("emr", at=600.0)
    meter.start(line("nodes[0]", usd=1.0, count=2), at=600.0)
    meter.start(line("node-b", usd=1.0), at=600.0)
    meter.stop("node-b", at=1200.0)  # lost
    meter.start(line("node-b-r1", usd=1.0), at=1250.0)  # its replacement
    assert meter.peak_usd_per_hour(now=3000.0) == pytest.approx(3.0)
    assert meter.usd_per_hour() == pytest.approx(3.0)  # running now: 2 + the replacement
    assert sum(x["usd_per_hour"] for x in meter.summary(now=3000.0)["lines"]) == 5.5  # the old sum
    lines = meter.summary(now=3000.0)["lines"]
    times = {x["name"]: (x["start_s"], x["stop_s"]) for x in lines}
    assert times == {
        "emr": (0, 600),
        "nodes[0]": (600, 3000),
        "node-b": (600, 1200),
        "node-b-r1": (1250, 3000),
    }
    for x in lines:
        x["stage"] = "preprocess" if x["name"] == "emr" else "train"
    folder = tmp_path / "run-1"
    folder.mkdir()
    summary = {"status": "ok", "usd_per_hour": 3.0, "cost": {"lines": lines}}
    (folder / "summary.json").write_text(json.dumps(summary))
    assert load_run(folder).usd_per_hour == pytest.approx(3.0)


def test_would_exceed_looks_ahead() -> None:
    meter = CostMeter()
    meter.start(line(usd=3.6), at=0.0)
    assert not meter.would_exceed(0.5, now=400.0)
    assert meter.would_exceed(0.5, now=400.0, horizon_s=120.0)
    assert meter.projected_usd(now=100.0, remaining_s=400.0) == pytest.approx(0.5)


def test_ticker_emits_cost_events_and_stops_at_budget(tmp_path: Path) -> None:
    clock = {"now": 0.0}
    meter = CostMeter(clock=lambda: clock["now"])
    meter.start(line(usd=36.0), at=0.0)  # $0.01 per second
    sink = JsonlFileSink(tmp_path / "events.jsonl")
    reasons: list[str] = []
    ticker = CostTicker(
        meter,
        Emitter(sink, run="r1"),
        interval_s=5.0,
        max_usd=2.0,
        on_exceeded=reasons.append,
        teardown_s=15.0,
        remaining=lambda: 100.0,
    )
    for now in (0.0, 60.0, 170.0, 185.0, 200.0):
        clock["now"] = now
        ticker.tick_once()
    sink.close()
    events = list(read_events(tmp_path / "events.jsonl"))
    assert [e["type"] for e in events] == ["cost"] * 5
    assert events[-1]["usd"] == pytest.approx(2.0)
    assert events[1]["usd_per_hour"] == pytest.approx(36.0)
    assert events[1]["projected_usd"] == pytest.approx(1.6)  # 60 s + 100 s remaining
    assert events[1]["elapsed_s"] == 60.0
    assert len(reasons) == 1 and "max_usd $2.00" in reasons[0]  # once, at t=185 (185+20 > 200)
    assert ticker.exceeded_reason == reasons[0]


def test_ticker_thread_ticks_and_final_event() -> None:
    meter = CostMeter()
    meter.start(line(usd=1.0))
    seen: list[dict[str, float]] = []
    done = threading.Event()

    def emit(fields: dict[str, float]) -> None:
        seen.append(fields)
        if len(seen) >= 3:
            done.set()

    ticker = CostTicker(meter, emit, interval_s=0.05).start()
    assert done.wait(5)
    meter.stop_all()
    final = ticker.stop()
    assert final["usd_per_hour"] == 0.0 and seen[-1] is final
    count = len(seen)
    time.sleep(0.15)
    assert len(seen) == count  # stopped for good


def test_launch_refused_above_rate_names_profile_rate_and_limit() -> None:
    with pytest.raises(BudgetError) as info:
        check_launch_budget("big", 5.34, max_usd_per_hour=5.0)
    assert "'big'" in info.value.message and "$5.340/h" in info.value.message
    assert "$5.000/h" in info.value.message and info.value.exit_code == 2  # the profile's budget
    with pytest.raises(BudgetError, match="one billed minute"):
        check_launch_budget("big", 120.0, max_usd=1.0)
    check_launch_budget("ok", 2.0, max_usd_per_hour=3.0, max_usd=1.0)
    with pytest.raises(BudgetError) as small:  # a trial read "at least $0.002 … of $0.000"
        check_launch_budget("tiny", 0.096, max_usd=0.0002)
    assert (
        "at least $0.0016 (" in small.value.message and "max_usd of $0.0002;" in small.value.message
    )


def test_profile_rates_come_from_the_catalog(tmp_path: Path) -> None:
    catalog = load_bundled_catalog()
    book = PriceBook.from_catalog(catalog)
    seed = load_profile(PROFILES / "aws-seed-g3.yaml")
    g3, m4 = catalog.get("g3.4xlarge"), catalog.get("m4.xlarge")
    train = 4 * g3.on_demand_usd
    emr = 3 * (m4.on_demand_usd + m4.emr_usd)  # master + 2 core, with the EMR surcharge
    assert seed.hourly_usd(book, stage="train") == pytest.approx(train)
    assert seed.hourly_usd(book, stage="preprocess") == pytest.approx(emr)
    assert seed.hourly_usd(catalog) == pytest.approx(train + emr)
    assert seed.check_launch_budget(book) == pytest.approx(train + emr)
    local = load_profile(PROFILES / "local.yaml")
    assert local.hourly_usd(catalog) == pytest.approx(catalog.get("m5.large").on_demand_usd)
    assert load_profile(PROFILES / "ssh-loopback.yaml").hourly_usd(catalog) == 0.0
    assert seed.instance_types() == ["g3.4xlarge", "m4.xlarge"]
    offline = seed.price_book(live=False)
    assert offline.sources() == {"bundled"} and offline.warnings
    assert seed.hourly_usd(offline) == pytest.approx(train + emr)

    tight = tmp_path / "tight.yaml"
    text = (
        (PROFILES / "aws-g5-2node.yaml")
        .read_text()
        .replace("max_usd_per_hour: 3.0", "max_usd_per_hour: 1.5")
    )
    tight.write_text(text)
    with pytest.raises(BudgetError, match=r"'aws-g5-2node' costs \$2\.012/h.*\$1\.500/h"):
        load_profile(tight).check_launch_budget(book)


def test_spot_groups_use_spot_prices_when_known(tmp_path: Path) -> None:
    class Spot:
        def get_paginator(self, op: str) -> Spot:
            self.op = op
            return self

        def paginate(self, **kwargs: object) -> list[dict[str, object]]:
            if self.op == "get_products":
                return [{"PriceList": []}]
            return [
                {
                    "SpotPriceHistory": [
                        {
                            "InstanceType": "g4dn.xlarge",
                            "AvailabilityZone": "us-east-1a",
                            "SpotPrice": "0.2",
                            "Timestamp": None,
                        }
                    ]
                }
            ]

    fake = Spot()
    book = price_book(
        instance_types=["g4dn.xlarge"],
        clients=LiveClients(fake, fake),
        cache_folder=tmp_path,
        now=10.0,
    )
    mixed = load_profile(PROFILES / "aws-mixed-g4dn-g5.yaml")
    lines = {x.instance_type: x for x in mixed.cost_lines(book)}
    assert lines["g4dn.xlarge"].market == "spot" and lines["g4dn.xlarge"].usd_per_hour == 0.2
    assert lines["g4dn.xlarge"].count == 2
    assert lines["g5.xlarge"].market == "on_demand"


def test_unknown_instance_type_cannot_be_priced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        textwrap.dedent("""
        name: odd
        provider: ec2
        nodes: [{instance_type: zz9.mega}]
        data: {synthetic: {size: 1MB}}
        """)
    )
    profile = load_profile(path)
    with pytest.raises(ProfileError, match=r"nodes\[0\]\.instance_type: no price known"):
        profile.hourly_usd(load_bundled_catalog())
    assert any("not in the price catalog" in w for w in profile.warnings())
    from tui.cli import main

    assert main(["profiles", str(path)]) == 2  # invalid, as `run` refuses it: one error line
    err = capsys.readouterr().err
    assert err.count("zz9.mega") == 1 and err.count(str(path)) == 1, err


def test_a_peak_needs_to_be_held_but_a_short_run_still_has_one() -> None:
    """A replacement's launch time (whole seconds) fell 0.45 s before the line of the node it
    replaced stopped: the run reported three instances' rate where two ever ran together."""
    from remote.cost import peak_rate

    spans = [(0.0, 100.0, 1.0), (0.0, 50.45, 1.0), (50.0, 100.0, 1.0)]  # a node replaced
    assert peak_rate(spans) == pytest.approx(2.0)
    assert peak_rate([(0.0, 100.0, 1.0), (0.0, 100.0, 1.0), (40.0, 60.0, 1.0)]) == 3.0
    assert peak_rate([(0.0, 3.0, 0.5), (1.0, 3.0, 0.25)]) == pytest.approx(0.75)  # 3 s run
    assert peak_rate([]) == 0.0  # no machine ran

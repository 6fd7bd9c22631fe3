"""Recovery policy, its bookkeeping, the spot watcher, spot prices by zone, and where they show."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ProfileError
from engine.events import Emitter
from engine.spot_watch import poll_once, watch
from remote.pricing import PriceBook, load_catalog
from remote.profile import load_profile
from remote.profile_spec import RecoverySpec
from remote.recovery import RecoveryLedger, StoredCheckpoint, classify


class Collect:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def write(self, event: dict[str, Any]) -> None:
        self.events.append(dict(event))

    def close(self) -> None:
        pass


def _ledger(**spec: Any) -> RecoveryLedger:
    return RecoveryLedger(RecoverySpec(**spec), run_started=1000.0)


def _begin(ledger: RecoveryLedger, lost_at: float, rate: float = 3.6) -> None:
    ledger.begin(
        lost=["b"], cause="crashed", action="shrink", detail="exit 1", lost_at=lost_at,
        world_before=2, usd_per_hour=rate,
    )  # fmt: skip
    assert ledger.pending is not None
    ledger.pending.world_after = 1


def test_policy_fail_by_default_then_limits_by_restarts_and_deadline() -> None:
    assert "fail" in _ledger().decide(now=1001)
    ledger = _ledger(on_node_loss="shrink", max_restarts=1, deadline_min=10)
    assert ledger.decide(now=1001) == "shrink"
    assert "deadline" in ledger.decide(now=1000 + 601)
    _begin(ledger, 1001)
    assert "max_restarts (1)" in ledger.decide(now=1002)


def test_a_recovery_event_counts_downtime_redone_work_and_dollars() -> None:
    ledger = _ledger(on_node_loss="shrink")
    ledger.stored(StoredCheckpoint(epoch=1, step=0, global_step=40, t=1100.0))
    ledger.stored(StoredCheckpoint(epoch=1, step=8, global_step=48, t=1110.0))
    ledger.observe({"type": "step", "global_step": 52})
    _begin(ledger, lost_at=1120.0)
    assert ledger.resumed({"type": "stage_start", "stage": "train", "t": 1130}) is None
    fields = ledger.resumed(
        {"type": "train_start", "rank": 0, "t": 1150.0, "resumed_epoch": 1,
         "resumed_step": 8}
    )  # fmt: skip
    assert fields is not None
    assert (fields["downtime_s"], fields["redone_s"], fields["redone_steps"]) == (30.0, 10.0, 4)
    assert fields["usd"] == pytest.approx(3.6 * 40 / 3600)  # (downtime + redone) at $3.6/h
    assert fields["checkpoint"] == {"epoch": 1, "step": 8, "global_step": 48}
    assert (fields["world_size_before"], fields["world_size"]) == (2, 1)
    totals = ledger.summary()
    assert (totals["recoveries"], totals["downtime_s"], totals["usd_lost"]) == (1, 30.0, 0.04)


def test_a_resume_at_the_epoch_start_counts_the_whole_epoch_as_redone() -> None:
    ledger = _ledger(on_node_loss="shrink")
    ledger.stored(StoredCheckpoint(epoch=1, step=0, global_step=40, t=1100.0))
    ledger.stored(StoredCheckpoint(epoch=1, step=8, global_step=48, t=1110.0))
    ledger.observe({"type": "step", "global_step": 50})
    _begin(ledger, lost_at=1120.0)
    fields = ledger.resumed(
        {"type": "train_start", "rank": 0, "t": 1130.0, "resumed_epoch": 1,
         "resumed_step": 0}
    )  # fmt: skip
    assert fields is not None and (fields["redone_s"], fields["redone_steps"]) == (20.0, 10)


def test_a_failed_recovery_is_recorded_with_its_reason() -> None:
    ledger = _ledger(on_node_loss="replace")
    _begin(ledger, lost_at=1120.0)
    fields = ledger.failed("no SSH", now=1180.0)
    assert fields is not None and fields["status"] == "failed" and fields["reason"] == "no SSH"
    assert ledger.summary()["recoveries"] == 0 and ledger.summary()["failed_recoveries"] == 1


def test_causes() -> None:
    assert classify(-255, None, -255) == "connection_lost"
    assert classify(1, None, -255) == "crashed"
    assert classify(-9, "spot interruption notice", -255) == "spot_interruption"
    assert classify(-9, "instance i-1 terminated", -255) == "instance_terminated"


PROFILE = """\
name: p
provider: {provider}
{nodes}
data: {{synthetic: {{size: 1MB}}}}
recovery: {{on_node_loss: {policy}}}
"""
NODES = {
    "ssh": "nodes:\n  - {host: 127.0.0.2}",
    "ec2": "nodes:\n  - {instance_type: g5.xlarge, spot: true, ami: ami-0123456789abcdef0}",
    "local": "",
}


@pytest.mark.parametrize("provider", ["local", "ssh", "ec2"])
@pytest.mark.parametrize("policy", ["fail", "shrink", "replace"])
def test_profiles_accept_policies_except_replace_on_ssh(
    tmp_path: Path, provider: str, policy: str
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(PROFILE.format(provider=provider, nodes=NODES[provider], policy=policy))
    if provider == "ssh" and policy == "replace":
        with pytest.raises(ProfileError, match=r"p.yaml:\d+: recovery.*replace needs provider ec2"):
            load_profile(path)
        return
    assert load_profile(path).recovery.on_node_loss == policy


def test_recovery_defaults_to_fail(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: p\nprovider: local\ndata: {synthetic: {size: 1MB}}\n")
    spec = load_profile(path).recovery
    assert (spec.on_node_loss, spec.max_restarts, spec.deadline_min) == ("fail", 3, None)


class Metadata:
    """IMDS on loopback: 404 until ``notice`` is set; counts token requests."""

    def __init__(self) -> None:
        self.notice: bytes | None = None
        self.tokens = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_PUT(self) -> None:
                owner.tokens += 1
                self._send(200, b"tok")

            def do_GET(self) -> None:
                ok = self.headers.get("X-aws-ec2-metadata-token") == "tok"
                if not ok:
                    self._send(401, b"")
                elif owner.notice is not None:
                    self._send(200, owner.notice)
                else:
                    self._send(404, b"")

            def _send(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def imds() -> Iterator[Metadata]:
    fake = Metadata()
    yield fake
    fake.server.shutdown()


def test_spot_watcher_reads_the_notice_with_an_imdsv2_token(imds: Metadata) -> None:
    assert poll_once(imds.url, "tok") is None
    imds.notice = json.dumps({"action": "terminate", "time": "2026-11-24T04:00:00Z"}).encode()
    assert poll_once(imds.url, "tok") == {"action": "terminate", "time": "2026-11-24T04:00:00Z"}
    sink = Collect()
    assert watch(imds.url, 0.05, Emitter(sink, node="n1")) == 0
    (event,) = sink.events
    assert (event["type"], event["action"], event["node"]) == ("spot_notice", "terminate", "n1")
    assert imds.tokens == 1


def test_a_missing_metadata_service_is_an_oserror_the_watcher_survives() -> None:
    with pytest.raises(OSError):
        poll_once("http://127.0.0.1:9", None)  # discard port: refused


def test_price_book_keeps_spot_prices_by_zone() -> None:
    book = PriceBook.from_catalog(load_catalog(), "us-east-1")
    book.add_spot("g5.xlarge", {"us-east-1a": 0.40, "us-east-1b": 0.35}, now=1000.0)
    assert [p.zone for p in book.spot_prices("g5.xlarge")] == ["us-east-1b", "us-east-1a"]
    price = book.spot_price("g5.xlarge", "us-east-1a")
    assert price is not None and (price.usd_per_hour, price.source) == (0.40, "live")
    assert price.age_s(now=1060.0) == 60.0
    assert book.price("g5.xlarge", spot=True).usd_per_hour == 0.35  # cheapest zone


def test_runs_store_and_run_state_count_recoveries(tmp_path: Path) -> None:
    from remote.runs_store import load_run
    from tui.cli.commands.runs import row
    from tui.model.run_state import RunState

    folder = tmp_path / "20261124-000000-p"
    folder.mkdir()
    summary = {"run": folder.name, "profile": "p", "provider": "local", "status": "ok",
               "recoveries": 2, "downtime_s": 41.5, "usd_lost": 0.03}  # fmt: skip
    (folder / "summary.json").write_text(json.dumps(summary))
    record = load_run(folder)
    assert (record.recoveries, record.downtime_s, record.usd_lost) == (2, 41.5, 0.03)
    assert row(record)["recoveries"] == 2
    state = RunState()
    state.ingest({"type": "run_start", "t": 0.0, "run": "r"})
    state.ingest(
        {"type": "recovery", "t": 5.0, "attempt": 1, "status": "ok", "lost": ["b"],
         "cause": "connection_lost", "action": "shrink", "world_size": 1, "downtime_s": 20,
         "redone_s": 3, "usd": 0.01}
    )  # fmt: skip
    assert len(state.recoveries) == 1
    assert "lost b" in state.log[-1].text and state.log[-1].level == "warn"

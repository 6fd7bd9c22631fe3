"""Replay pacing and the `sentitop replay` command."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import InputError
from tests.tui.fakes import FIXTURE_RUN
from tui.cli import build_parser, main
from tui.replay import events_path, paced_batches, replay_file


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


def events(times: list[float]) -> list[dict[str, float | str]]:
    return [{"type": "step", "t": t} for t in times]


def test_fastest_replay_yields_everything_in_order() -> None:
    batches = list(replay_file(FIXTURE_RUN, 0.0, max_batch=10))
    flat = [e for b in batches for e in b]
    lines = (FIXTURE_RUN / "events.jsonl").read_text().splitlines()
    assert len(flat) == len(lines)
    assert all(len(b) <= 10 for b in batches)
    assert [e["t"] for e in flat] == sorted(e["t"] for e in flat)


def test_speed_scales_waiting_and_caps_gaps() -> None:
    fake = FakeClock()
    evs = events([0.0, 1.0, 2.0, 3.0, 1000.0])
    out = list(paced_batches(evs, 2.0, clock=fake.clock, sleep=fake.sleep, max_wait=5.0))
    assert [e for b in out for e in b] == evs
    # 3 s of recording at 2x = 1.5 s, then the 997 s gap is capped at 5 s
    assert fake.slept == pytest.approx(1.5 + 5.0, abs=0.06)


def test_stop_ends_replay_promptly() -> None:
    fake = FakeClock()
    stop_after = {"n": 0}

    def stop() -> bool:
        stop_after["n"] += 1
        return stop_after["n"] > 3

    out = list(
        paced_batches(events([0, 10, 20, 30]), 1.0, clock=fake.clock, sleep=fake.sleep, stop=stop)
    )
    assert sum(len(b) for b in out) < 4


def test_events_path_errors(tmp_path: Path) -> None:
    assert events_path(FIXTURE_RUN) == FIXTURE_RUN / "events.jsonl"
    with pytest.raises(InputError, match=r"no events\.jsonl"):
        events_path(tmp_path)


def test_replay_command_registered_and_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["replay", str(FIXTURE_RUN), "--speed", "3"])
    assert args.speed == 3.0 and args.func is not None
    assert main(["replay", str(tmp_path)]) == 2
    assert "no run folder with events.jsonl" in capsys.readouterr().err
    assert main(["replay", str(FIXTURE_RUN), "--speed", "-1"]) == 2

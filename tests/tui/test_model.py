"""RunState and Series: what the dashboard and headless CLI derive from events."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine.events import EVENT_TYPES, read_events
from tests.tui.fakes import FIXTURE_RUN
from tui.model import PHASES, RunState, Series

EVENTS = list(read_events(FIXTURE_RUN / "events.jsonl"))


def test_fixture_covers_every_event_type() -> None:
    from tests.tui.test_recovery_view import with_recovery  # the fixture run, with a lost node

    assert set(EVENT_TYPES) <= {e["type"] for e in with_recovery(EVENTS)}


def test_full_run_state() -> None:
    state = RunState()
    assert state.ingest_many(EVENTS) == len(EVENTS)
    assert (state.run_id, state.profile, state.world_size) == (
        "20261121-fixture",
        "two-t4-nodes",
        4,
    )
    assert state.status == "ok" and state.finished
    assert [r.epoch for r in state.epochs] == [0, 1, 2]  # events count from 0
    assert state.total_epochs == 3
    assert state.global_step == 360
    assert len(state.train_loss) == sum(1 for e in EVENTS if e["type"] == "step")
    last_cost = [e for e in EVENTS if e["type"] == "cost"][-1]
    assert state.usd == pytest.approx(last_cost["usd"])
    assert state.spent == pytest.approx(last_cost["accrued_usd"])
    assert state.usd_per_hour == pytest.approx(last_cost["usd_per_hour"])
    assert {s.name: s.status for s in state.stages.values()} == {
        "preprocess": "ok",
        "train": "ok",
        "review": "ok",
    }
    assert {n.status for n in state.nodes.values()} == {"stopped"}
    assert sorted(state.phase_last) == [0, 1, 2, 3] and state.phase_epoch == 2
    assert set(state.phase_last[3]) == set(PHASES)
    assert state.threshold is not None and state.last_checkpoint is not None
    assert state.errors and "NCCL" in state.errors[0]["message"]
    assert state.summary["accuracy"] == pytest.approx(0.93)
    assert state.eta_seconds() is None  # finished


def test_balance_shares_follow_speed() -> None:
    state = RunState()
    state.ingest_many(EVENTS)
    shares = {r: list(s.y) for r, s in state.rank_shares.items()}
    assert sorted(shares) == [0, 1, 2, 3]
    # the straggler (rank 3) loses share over time, the fastest (rank 0) gains
    assert shares[3][-1] < shares[3][0] < 0.25
    assert shares[0][-1] > shares[0][0] > 0.25
    assert sum(state.shares) == pytest.approx(1.0, abs=1e-3)
    assert len(state.rank_throughput) == 4


def test_mid_run_eta_and_projection() -> None:
    state = RunState()
    first_epoch_end = next(i for i, e in enumerate(EVENTS) if e["type"] == "epoch")
    state.ingest_many(EVENTS[: first_epoch_end + 5])
    assert state.status == "running"
    eta = state.eta_seconds()
    assert eta is not None and eta > 0
    assert state.projected_cost() is not None and state.projected_cost() >= state.usd


def test_eta_from_progress_when_no_epochs() -> None:
    state = RunState()
    state.ingest({"type": "stage_start", "t": 0.0, "stage": "preprocess"})
    state.ingest(
        {
            "type": "progress",
            "t": 1.0,
            "stage": "preprocess",
            "done": 250.0,
            "total": 1000.0,
            "unit": "reviews",
            "rate": 50.0,
        }
    )
    assert state.eta_seconds() == pytest.approx(15.0)
    state.ingest({"type": "cost", "t": 1.0, "usd": 1.0, "usd_per_hour": 36.0})
    assert state.projected_cost() == pytest.approx(1.0 + 36.0 * 15.0 / 3600)


def test_unknown_and_malformed_events_are_counted_not_fatal() -> None:
    state = RunState()
    state.ingest({"type": "mystery", "t": 5.0, "x": 1})
    state.ingest({"no_type": True})
    state.ingest({"type": "step", "t": 6.0, "loss": "nan?", "global_step": None})
    assert state.counts == {"mystery": 1, "step": 1}
    assert len(state.train_loss) == 0


def test_usd_at_interpolates_cost() -> None:
    state = RunState()
    state.ingest({"type": "run_start", "t": 100.0, "run": "r"})
    state.ingest({"type": "cost", "t": 110.0, "usd": 1.0, "usd_per_hour": 360.0, "elapsed_s": 10.0})
    state.ingest({"type": "cost", "t": 120.0, "usd": 3.0, "usd_per_hour": 360.0, "elapsed_s": 20.0})
    assert state.usd_at([5.0, 15.0, 20.0, 30.0]) == pytest.approx([0.5, 2.0, 3.0, 4.0])


def test_series_thins_itself_and_keeps_the_ends() -> None:
    s = Series("x", capacity=64)
    for i in range(10_000):
        s.append(float(i), float(i * 2), float(i))
    assert 32 <= len(s) < 64
    assert s.t[0] == 0.0 and s.t[-1] == 9999.0
    assert list(s.t) == sorted(s.t)
    assert s.stride >= 10_000 // 64
    with pytest.raises(ValueError):
        Series("bad", capacity=2)


def test_memory_is_bounded_over_many_events() -> None:
    state = RunState(capacity=1024, log_lines=100)
    for i in range(60_000):
        state._ingest(
            {
                "type": "step",
                "t": float(i),
                "global_step": i,
                "loss": 1.0 / (i + 1),
                "samples_per_s": 100.0,
            }
        )
        if i % 50 == 0:
            state._ingest(
                {
                    "type": "balance",
                    "t": float(i),
                    "step": i,
                    "shares": [0.5, 0.5],
                    "sec_per_sample": [0.01, 0.01],
                }
            )
            state._ingest({"type": "checkpoint", "t": float(i), "epoch": 0, "step": i})
    assert len(state.train_loss) < 1024 and len(state.log) == 100
    assert state.nbytes() < 8 * 3 * 1024 * 8 * 2


def test_log_lines_and_node_last_line() -> None:
    state = RunState(log_lines=3)
    state.ingest({"type": "node", "t": 1.0, "node": "n1", "status": "ready", "gpu": "T4"})
    state.add_log("n1", "epoch 1 step 20 loss 0.5\n")
    assert state.nodes["n1"].last_line == "epoch 1 step 20 loss 0.5"
    for i in range(5):
        state.add_log("run", f"line {i}")
    assert [ln.text for ln in state.log] == ["line 2", "line 3", "line 4"]


def test_model_imports_neither_textual_nor_torch() -> None:
    code = (
        "import sys, tui.model, tui.model.rows, tui.replay; "
        "bad = [m for m in ('textual', 'torch') if m in sys.modules]; print(bad); "
        "sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rank_start_places_ranks_on_their_nodes() -> None:
    state = RunState()
    state.ingest_many(EVENTS)
    assert state.nodes["gpu-a"].ranks == [0, 1] and state.nodes["gpu-b"].ranks == [2, 3]
    state.ingest({"type": "rank_start", "t": 1.0, "rank": 5, "node": "local", "world_size": 6})
    state.ingest({"type": "rank_start", "t": 1.0, "rank": 4, "node": "local", "world_size": 6})
    state.ingest({"type": "rank_start", "t": 1.0, "rank": 9})  # no launcher, no node: ignored
    assert (state.nodes["local"].status, state.nodes["local"].ranks) == ("running", [4, 5])
    assert sum(node.ranks.count(9) for node in state.nodes.values()) == 0


@pytest.mark.parametrize(
    ("ranks", "shown"),
    [([], "—"), ([3], "3"), ([0, 1], "0-1"), ([0, 1, 2, 5, 7, 8], "0-2,5,7-8")],
)
def test_ranks_are_shown_as_ranges(ranks: list[int], shown: str) -> None:
    from tui.format import fmt_ranks

    assert fmt_ranks(ranks) == shown


def test_the_header_rate_ends_as_the_runs_own_figure() -> None:
    """A replay showed the last progress event's 1,722 samples/s while summary.json said 1,737."""
    state = RunState()
    state.ingest({"type": "step", "t": 1.0, "global_step": 1, "loss": 0.5, "samples_per_s": 1722})
    assert state.samples_per_s == 1722
    state.ingest({"type": "summary", "t": 2.0, "stage": "train", "samples_per_s": 1737.0})
    assert state.samples_per_s == 1737.0


def test_a_resumed_run_counts_the_epochs_it_took_over() -> None:
    """A run resumed after 2 of 3 epochs has one epoch event (epoch 2): its status said
    "epoch 2/3" while training the third, and the ETA counted two epochs to go."""
    from tui.widgets.run_status import stages_text, status_text

    state = RunState()
    state.ingest({"type": "run_start", "t": 0.0, "run": "r2", "profile": "tiny", "world_size": 1})
    state.ingest({"type": "train_start", "t": 1.0, "rank": 0, "epochs": 3, "resumed_epoch": 2,
                  "resumed_step": 0, "steps_per_epoch": 10, "total_steps": 30})  # fmt: skip
    assert state.epochs_done == 2
    assert "epoch 3/3" in status_text(state, {"eta": None, "projected": None}).plain
    rows = [(s.name, s.status, s.seconds, s.done, s.total, s.unit) for s in state.stages.values()]
    assert "epoch 3/3" in stages_text(rows, (state.epochs_done, 3)).plain
    state.ingest({"type": "epoch", "t": 31.0, "epoch": 2, "seconds": 30.0, "accuracy": 0.8})
    assert state.epochs_seen == 1 and state.epochs_done == 3
    assert state.eta_seconds() == 0.0


def test_an_epoch_event_without_an_epoch_number_is_left_out_and_said() -> None:
    """A damaged recorded line {"type": "epoch", "epoch": null, "accuracy": "high"} became an
    epochs-table row "1 — — — —" in a replay."""
    state = RunState()
    for epoch in (None, "two", -1, True, 1.5):
        state.ingest({"type": "epoch", "t": 1.0, "epoch": epoch, "accuracy": "high"})
    state.ingest({"type": "epoch", "t": 2.0, "epoch": 0, "accuracy": 0.8})
    assert [(row.epoch, row.accuracy) for row in state.epochs] == [(0, 0.8)]
    said = [line.text for line in state.log if "without an epoch number" in line.text]
    assert len(said) == 5


def test_a_resumed_run_says_so_in_its_log() -> None:
    """The Run screen of a resumed run showed `epoch 1/3  step 0` and never said it resumed."""
    state = RunState()
    state.ingest({"type": "run_start", "t": 1.0, "run": "r2", "profile": "p", "world_size": 2,
                  "resumed_from": "r1"})  # fmt: skip
    state.ingest({"type": "train_start", "t": 2.0, "rank": 0, "total_steps": 300,
                  "steps_per_epoch": 100, "resumed_epoch": 1, "resumed_step": 20})  # fmt: skip
    said = [line.text for line in state.log]
    assert "it resumes run r1 from that run's checkpoint" in said
    assert "training continues from the checkpoint at step 120" in said


def test_a_resumed_run_reads_loading_until_its_trainer_starts() -> None:
    """Until its `train_start` arrived, a run resuming epoch 3 of 3 read `epoch 1/3  step 0`."""
    from tui.widgets.run_status import status_text

    state = RunState()
    state.ingest({"type": "run_start", "t": 1.0, "run": "r2", "profile": "p", "world_size": 1,
                  "resumed_from": "r1", "config": {"epochs": 3}})  # fmt: skip
    shown = status_text(state, {"eta": None, "projected": None}).plain
    assert "epoch —" in shown and "step — (loading the checkpoint)" in shown
    assert "step 0" not in shown
    state.ingest({"type": "train_start", "t": 2.0, "rank": 0, "epochs": 3, "total_steps": 30,
                  "steps_per_epoch": 10, "resumed_epoch": 2, "resumed_step": 0})  # fmt: skip
    shown = status_text(state, {"eta": None, "projected": None}).plain
    assert "epoch 3/3" in shown and "loading" not in shown
    assert "step 20" in shown  # until its first step event it read "step 0" (stage: 20/30)

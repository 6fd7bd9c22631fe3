"""Every number on the Run screen is one a user can trust: progress, epochs, cost, devices,
shares, one stage_end per stage, and foreign text shown verbatim (never read as markup)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from tests.tui.fakes import build_app
from tests.tui.scenes import SIZE, settle
from tui.format import fmt_usd
from tui.model import RunState
from tui.model.dollars import usd_at
from tui.model.records import device_label
from tui.screens.run import RunScreen
from tui.widgets.line_plot import LinePlot
from tui.widgets.log_pane import LogPane

RUN = "r1"


def _start(state: RunState, *, world: int = 2, balancer: bool = False) -> None:
    """A runner-led run whose trainer planned 3 epochs of 10 steps."""
    state.ingest_many(
        [
            {"type": "run_start", "t": 0.0, "run": RUN, "profile": "p", "world_size": world},
            {"type": "stage_start", "t": 1.0, "stage": "train", "world_size": world},
            {
                "type": "train_start",
                "t": 5.0,
                "rank": 0,
                "epochs": 3,
                "steps_per_epoch": 10,
                "total_steps": 30,
                "balancer": balancer,
                "world_size": world,
            },
        ]
    )


def test_train_progress_counts_steps_from_the_first_step() -> None:
    state = RunState()
    _start(state)
    train = state.stages["train"]
    assert (train.status, train.done, train.total, train.unit) == ("running", 0.0, 30.0, "steps")
    state.ingest({"type": "step", "t": 6.0, "epoch": 0, "step": 1, "global_step": 1, "loss": 1})
    assert train.done == 1.0
    state.ingest({"type": "step", "t": 15.0, "epoch": 0, "step": 10, "global_step": 10})
    assert train.done == 10.0
    # ETA from the step rate: 20 steps left at 1 s per step
    assert state.eta_seconds() == pytest.approx(20.0)


def test_epochs_read_from_one_and_checkpoints_say_where_they_resume() -> None:
    state = RunState()
    _start(state)
    state.ingest({"type": "epoch", "t": 9.0, "epoch": 0, "accuracy": 0.8123, "seconds": 4.2})
    state.ingest({"type": "checkpoint", "t": 9.1, "epoch": 1, "step": 0, "global_step": 10})
    state.ingest({"type": "checkpoint", "t": 9.5, "epoch": 1, "step": 4, "global_step": 14})
    state.ingest({"type": "checkpoint", "t": 9.6, "epoch": 1, "step": 5, "global_step": 15,
                  "position": 1280, "epoch_samples": 3200})  # fmt: skip
    state.ingest({"type": "checkpoint", "t": 9.7, "epoch": 1, "step": 10, "global_step": 20,
                  "position": 3200, "epoch_samples": 3200})  # fmt: skip
    state.ingest(
        {
            "type": "threshold",
            "t": 9.6,
            "loss": 0.12996351809798887,
            "epoch": 1,
            "step": 14,
            "seconds": 10.545902729034424,
            "threshold": 0.13,
        }
    )
    texts = [line.text for line in state.log if line.source == "train"]
    assert texts == [
        "epoch 1/3 done, acc 0.812, 4s",
        "checkpoint saved after epoch 1",
        "checkpoint saved in epoch 2 at step 4",  # an event of before the samples were said
        "checkpoint saved in epoch 2 at step 5 (1,280 of its 3,200 samples)",
        "checkpoint saved in epoch 2 at step 10 (all its samples trained, its evaluation not "
        "yet run)",
        "smoothed loss 0.1300 below the threshold 0.13 after 11s, in epoch 2",
    ]


def test_the_log_says_what_is_fitted_after_training_and_what_became_of_it() -> None:
    """The quiet seconds after the last epoch (rank 0 fitting the blend and the companion) are
    explained in the log, and the summary says whether the companion was kept, verbatim."""
    state = RunState()
    _start(state)
    state.ingest({"type": "after_training", "t": 20.0, "rank": 0, "stage": "train", "fits": [],
                  "valid_samples": 500, "companion_rows": 0})  # fmt: skip
    state.ingest({"type": "after_training", "t": 21.0, "rank": 0, "stage": "train",
                  "fits": ["blend", "companion"], "valid_samples": 3333,
                  "companion_rows": 26159})  # fmt: skip
    facts = {"applied": False, "reason": "left out: weight [bold]<= 0"}
    state.ingest({"type": "summary", "t": 60.0, "rank": 0, "stage": "train", "companion": facts})
    texts = [line.text for line in state.log if line.source == "train"]
    assert texts == [
        "after training: fitting the paths' blend and the linear companion on 3,333 validation "
        "samples (companion on 26,159 training rows)",
        "linear companion: left out: weight [bold]<= 0",
    ]
    state.ingest({"type": "summary", "t": 61.0, "stage": "train", "companion": None})
    assert len([line for line in state.log if line.source == "train"]) == 2


def test_a_sentitop_train_recording_ends_with_its_summary() -> None:
    """`sentitop train` has no runner (no run_start, no stage_end): the trainer's summary
    finishes the train stage and the run, so a replay does not stop at the last logged step."""
    state = RunState()
    state.ingest_many(
        [
            {"type": "train_start", "t": 5.0, "rank": 0, "epochs": 1, "steps_per_epoch": 41,
             "total_steps": 41, "world_size": 2},
            {"type": "step", "t": 30.0, "rank": 0, "epoch": 0, "step": 40, "global_step": 40},
        ]
    )  # fmt: skip
    train = state.stages["train"]
    assert (train.status, train.done, state.finished) == ("running", 40.0, False)
    state.ingest({"type": "summary", "t": 41.0, "rank": 0, "stage": "train", "status": "ok",
                  "wall_s": 36.0})  # fmt: skip
    assert (train.status, train.done, train.seconds) == ("ok", 41.0, 36.0)
    assert state.status == "ok" and state.finished
    # a runner-led run is ended by its runner, not by the trainer's summary
    led = RunState()
    _start(led)
    led.ingest({"type": "summary", "t": 41.0, "rank": 0, "stage": "train", "status": "ok"})
    assert led.status == "running" and led.stages["train"].status == "running"


def test_one_stage_end_per_stage_even_for_older_recordings() -> None:
    """Runs recorded before `train_start`: the trainer's own train stage_start/stage_end
    (with a rank) are its plan, not a second stage."""
    state = RunState()
    state.ingest_many(
        [
            {"type": "run_start", "t": 0.0, "run": RUN, "profile": "p", "world_size": 2},
            {"type": "stage_start", "t": 1.0, "stage": "train", "world_size": 2},
            {"type": "stage_start", "t": 5.0, "rank": 0, "stage": "train", "world_size": 2},
            {"type": "stage_end", "t": 30.0, "rank": 0, "stage": "train", "seconds": 25.0},
            {"type": "stage_end", "t": 31.0, "stage": "train", "status": "ok", "seconds": 30.0},
        ]
    )
    ends = [line.text for line in state.log if line.text.startswith("stage train ")]
    assert ends == ["stage train started", "stage train ok in 30s"]
    assert state.stages["train"].seconds == 30.0


def test_nodes_name_their_device() -> None:
    state = RunState()
    for rank, name in enumerate(("CPU", "CPU")):
        state.ingest({"type": "rank_start", "t": 1.0, "rank": rank, "node": "local",
                      "device": "cpu", "device_name": name})  # fmt: skip
    state.ingest({"type": "rank_start", "t": 1.0, "rank": 2, "node": "old", "device": "cuda:0"})
    assert state.nodes["local"].gpu == "CPU"
    assert state.nodes["old"].gpu == "GPU"  # recorded before rank_start named the model
    assert device_label(["NVIDIA A10G", "NVIDIA A10G", "Tesla T4"]) == "2× A10G + T4"
    assert device_label(["NVIDIA A100-SXM4-40GB"]) == "A100"


def test_balancer_off_shows_equal_shares() -> None:
    state = RunState()
    _start(state, world=2, balancer=False)
    assert state.balancer_off
    for gs in (1, 5, 10):
        state.ingest({"type": "step", "t": 5.0 + gs, "epoch": 0, "global_step": gs})
    assert sorted(state.rank_shares) == [0, 1]
    assert {y for s in state.rank_shares.values() for y in s.y} == {0.5}


def test_running_cost_moves_under_the_minimum_charge_and_projects_with_the_eta() -> None:
    state = RunState()
    _start(state)
    for t, accrued in ((10.0, 0.0001), (12.0, 0.00012)):
        state.ingest({"type": "cost", "t": t, "usd": 0.0016, "accrued_usd": accrued,
                      "usd_per_hour": 0.036, "elapsed_s": t})  # fmt: skip
    assert state.spent == pytest.approx(0.00012) and state.usd == pytest.approx(0.0016)
    assert list(state.cost.y) == pytest.approx([0.0001, 0.00012])  # the plot moves
    state.ingest({"type": "step", "t": 6.0, "epoch": 0, "global_step": 1})
    state.ingest({"type": "step", "t": 15.0, "epoch": 0, "global_step": 10})
    eta = state.eta_seconds()
    assert eta == pytest.approx(20.0)
    # the minimum charge is a floor; above it, now + $/h x ETA
    assert state.projected_cost() == pytest.approx(0.0016)
    state.ingest({"type": "cost", "t": 14.0, "usd": 0.0016, "accrued_usd": 0.002,
                  "usd_per_hour": 0.036, "elapsed_s": 14.0})  # fmt: skip
    assert state.projected_cost() == pytest.approx(0.002 + 0.036 * 20.0 / 3600)


def test_dollar_axis_of_a_flat_recorded_cost_uses_the_rate() -> None:
    """Runs recorded with only the billed (flat, one-minute minimum) figure still spread out."""
    x = usd_at(np.array([0.0, 5.0, 10.0]), np.array([0.0016] * 3), 0.096, np.array([1.0, 9.0]))
    assert x[1] > x[0] > 0
    x = usd_at(np.array([10.0, 20.0]), np.array([1.0, 3.0]), 360.0, np.array([5.0, 15.0, 30.0]))
    assert x.tolist() == pytest.approx([0.5, 2.0, 4.0])


def test_small_dollar_figures_keep_two_significant_digits() -> None:
    assert [fmt_usd(v) for v in (0.00037, 0.0016, 0.012, 2.5)] == [
        "$0.00037",
        "$0.0016",
        "$0.012",
        "$2.50",
    ]


NASTY = "gloo pair.cc:553 [/x] closed [bold]peer[/bold] see [link=https://e.x]docs[/link] ["


async def test_node_failure_text_is_shown_verbatim() -> None:
    """Error text from a node holds markup-like brackets: the log pane, the nodes table and
    the status line show it as written, and nothing raises."""

    async def runner(profile: Any, on_event: Any, stop: asyncio.Event, on_log: Any = None) -> str:
        on_event({"type": "run_start", "t": 1.0, "run": RUN, "profile": "p", "world_size": 2})
        on_event({"type": "stage_start", "t": 1.5, "stage": "train", "world_size": 2})
        on_event({"type": "node", "t": 2.0, "node": "gpu-b", "status": "running"})
        if on_log is not None:
            on_log("gpu-b", NASTY)
        on_event({"type": "error", "t": 3.0, "node": "gpu-b", "message": NASTY, "tail": [NASTY]})
        on_event({"type": "node", "t": 3.0, "node": "gpu-b", "status": "failed", "detail": NASTY})
        on_event({"type": "stage_end", "t": 3.5, "stage": "train", "status": "failed"})
        on_event({"type": "run_end", "t": 4.0, "status": "failed", "reason": NASTY})
        return "failed"

    app = build_app(runner=runner)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        screen = app.run_screen
        for _ in range(100):
            await pilot.pause(0.05)
            if not screen.live and screen.state.finished:
                break
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)  # no error modal, no crash
        log = app.screen.query_one(LogPane)
        shown = [line.text for line in log.visible_lines()]
        assert NASTY in shown and f"failed {NASTY}" in shown and f"  {NASTY}" in shown
        assert NASTY in str(log.render())
        status = str(app.screen.query_one("#run-status").render())
        assert "failed" in status and NASTY in status
        table = app.screen.query_one("#nodes")
        assert str(table.get_row("gpu-b")[-1]) == NASTY  # type: ignore[attr-defined]
        app.screen.query_one(LinePlot)  # the screen is still whole


async def test_profiles_screen_names_devices_and_renders_settings() -> None:
    from tui.widgets.nav import NavBar

    app = build_app(start="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        note = app.screen.query_one(NavBar).note
        assert note.startswith("read 3 profile files")  # words first: not a fifth tab
        detail = str(app.screen.query_one("#profile-detail").render())
        assert "2 rank(s) on CPU" in detail and "GPU" not in detail
        await pilot.press("down")
        await settle(pilot)
        detail = str(app.screen.query_one("#profile-detail").render())
        assert "4 rank(s) on 4× T4" in detail
        assert "epochs 3 · balance.enabled true" in detail
        assert "nodes[0]" in detail and "instance_type g4dn.12xlarge · count 2" in detail
        assert "{" not in detail and "straggle" not in detail  # no raw dicts, no empty settings


@pytest.mark.parametrize(
    ("billed", "accrued", "finished", "shown"),
    [
        (0.0016, 0.0004, False, "$0.00040 (min. charge $0.0016)  → projected $0.0016"),
        (0.002187, 0.00215, False, "$0.0022  → projected $0.0022"),  # whole-second rounding
        (0.0016, 0.00087, True, "$0.0016 billed (1-min minimum; $0.00087 used)"),
        (0.00197, 0.00196, True, "$0.0020"),
    ],
)
def test_cost_line_shows_the_minimum_only_while_it_applies(
    billed: float, accrued: float, finished: bool, shown: str
) -> None:
    from tui.widgets.run_status import cost_text

    state = RunState()
    state.ingest({"type": "cost", "t": 1.0, "usd": billed, "accrued_usd": accrued,
                  "usd_per_hour": 0.096, "projected_usd": billed})  # fmt: skip
    if finished:
        state.ingest({"type": "run_end", "t": 2.0, "status": "ok"})
    assert str(cost_text(state, state.projected_cost())) == shown


async def test_runs_table_shows_folder_and_profile_names_verbatim(tmp_path: Any) -> None:
    """A run folder and profile whose names hold markup-like brackets are shown as written."""
    import shutil

    from textual.widgets import DataTable

    from tests.tui.fakes import RUNS_DIR

    name = "20261124-[bold]x"  # no "/" in a folder name
    run = tmp_path / name
    shutil.copytree(RUNS_DIR / "20261120-single", run)
    profile = "[red]p[/red]["
    events = run / "events.jsonl"
    text = events.read_text().replace('"profile":"one-t4"', f'"profile":"{profile}"')
    events.write_text(text.replace('"run":"20261120-single"', f'"run":"{name}"'))
    app = build_app(start="runs", runs_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        # what the table draws: a str cell goes through the markup parser, a Text does not
        from textual.widgets._data_table import default_cell_formatter

        cells = [str(default_cell_formatter(c)) for c in table.get_row_at(0)]
        assert name in cells
        assert any("[red]p[/red][" in c for c in cells), cells

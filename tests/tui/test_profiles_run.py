"""Starting a profile from the Profiles screen: the highlight stays where the user put it, and a
profile that starts paid machines asks first."""

from __future__ import annotations

from textual.widgets import DataTable

from tests.tui.fakes import FakeRunner, build_app
from tests.tui.scenes import SIZE, settle
from tui.screens.modals import ConfirmScreen
from tui.screens.profiles import ProfilesScreen


async def test_a_cloud_profile_asks_before_it_starts_machines() -> None:
    """`r` started the highlighted EC2 profile at once; after a reload had moved the highlight
    to the first row, one key launched instances the user had not picked."""
    runner = FakeRunner()
    app = build_app(runner=runner)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("down", "r")  # two-t4-nodes: 2 EC2 instances
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        body = str(app.screen.query_one("#dialog-body").render())
        assert "two-t4-nodes starts 2 EC2 instance(s)" in body and "/h" in body
        await pilot.press("n")
        await pilot.pause(0.2)
        assert runner.calls == [] and isinstance(app.screen, ProfilesScreen)
        await pilot.press("up", "r")  # local-cpu: this machine, no question
        for _ in range(50):
            if runner.calls:
                break
            await pilot.pause(0.1)
        assert [c.name for c in runner.calls] == ["local-cpu"]


async def test_reload_and_filter_keep_the_highlighted_profile() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ProfilesScreen)
        await pilot.press("down")
        assert screen.selected() is not None and screen.selected().name == "two-t4-nodes"
        await pilot.press("u")
        await settle(pilot)
        assert screen.selected().name == "two-t4-nodes"  # it jumped back to the first row
        await pilot.press("slash", "minus", "enter")  # local-cpu and two-t4-nodes both match
        await settle(pilot)
        assert screen.selected().name == "two-t4-nodes"
        assert screen.query_one(DataTable).row_count >= 2
        await pilot.press("escape")
        await settle(pilot)
        assert screen.selected().name == "two-t4-nodes"


def test_a_profile_details_leave_out_the_emr_cluster_of_a_local_runner() -> None:
    """The local profile's details listed `emr.instance_type m5.xlarge · emr.count 2 · emr.spot
    fals…`: settings of a cluster its runner never starts."""
    from remote.profile import load_profile
    from tui.screens.profiles import _describe

    local = _describe(load_profile("profiles/local.yaml"), 200).plain
    assert "preprocess" in local and "runner local" in local and "emr." not in local
    base = load_profile("profiles/local.yaml")
    emr = base.model_copy(
        update={"preprocess": base.preprocess.model_copy(update={"runner": "emr"})}
    )
    assert "emr.instance_type" in _describe(emr, 400).plain

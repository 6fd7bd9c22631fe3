"""The balancer's drop-a-rank advice priced in dollars from the profile's machines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remote.advice import priced_advice, rank_prices
from remote.pricing import PriceBook, load_catalog
from remote.profile import load_profile
from tests.run.conftest import sentitop

BLOCK = {
    "sec_per_sample": [0.001, 0.004],
    "n": 10_000,
    "global_batch": 256,
    "allreduce_s_per_step": 0.002,
    "other_s_per_step": 0.0,
    "min_share": 0.05,
}


SSH_A_G5_B_P2 = (
    "name: p\nprovider: ssh\ndata: {synthetic: {size: 1MB}}\nnodes:\n"
    "  - {name: a, host: 10.0.0.1, nproc: 1, instance_type: g5.xlarge}\n"
    "  - {name: b, host: 10.0.0.2, nproc: 2, instance_type: p2.xlarge}\n"
)
"""Node a: one rank on a g5.xlarge; node b: two ranks on a p2.xlarge."""


def _book(region: str = "us-east-1") -> PriceBook:
    return PriceBook.from_catalog(load_catalog(), region)


def _profile(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return load_profile(path)


def test_local_machine_price_is_split_over_its_ranks(tmp_path: Path) -> None:
    profile = _profile(
        tmp_path,
        "name: p\nprovider: local\ninstance_type: m5.large\ndata: {synthetic: {size: 1MB}}\n"
        "train: {nproc: 2}\n",
    )
    book = _book()
    hourly = book.price("m5.large").usd_per_hour
    assert rank_prices(profile, book) == pytest.approx([hourly / 2, hourly / 2])


def test_ssh_nodes_give_each_rank_its_own_machine_price(tmp_path: Path) -> None:
    profile = _profile(tmp_path, SSH_A_G5_B_P2)
    book = _book()
    g5, p2 = book.price("g5.xlarge").usd_per_hour, book.price("p2.xlarge").usd_per_hour
    assert rank_prices(profile, book) == pytest.approx([g5, p2 / 2, p2 / 2])


def test_ranks_are_priced_on_the_node_they_reported(tmp_path: Path) -> None:
    """c10d may give node b the low ranks: each rank costs what its own machine costs."""
    profile = _profile(tmp_path, SSH_A_G5_B_P2)
    book = _book()
    g5, p2 = book.price("g5.xlarge").usd_per_hour, book.price("p2.xlarge").usd_per_hour
    assert rank_prices(profile, book, ["b", "b", "a"]) == pytest.approx([p2 / 2, p2 / 2, g5])
    # a node the profile does not name: fall back to the profile's order
    assert rank_prices(profile, book, ["b", "x", "a"]) == pytest.approx([g5, p2 / 2, p2 / 2])
    slow_on_a = {**BLOCK, "sec_per_sample": [0.001, 0.001, 0.004]}
    as_listed = priced_advice(profile, book, {"balance": slow_on_a})
    placed = priced_advice(profile, book, {"balance": slow_on_a}, rank_nodes=["b", "b", "a"])
    assert as_listed is not None and placed is not None
    assert as_listed["drop_rank"] == placed["drop_rank"] == 2
    assert as_listed != placed  # rank 2 is a p2.xlarge rank as listed, the g5.xlarge as placed


def test_ec2_groups_are_priced_by_node_name(tmp_path: Path) -> None:
    profile = load_profile(Path(__file__).resolve().parents[2] / "profiles/aws-mixed-g4dn-g5.yaml")
    book = _book()
    g5 = book.price("g5.xlarge").usd_per_hour
    t4 = book.price("g4dn.xlarge", spot=True).usd_per_hour
    assert rank_prices(profile, book) == pytest.approx([g5, t4, t4])
    assert rank_prices(profile, book, ["t4-1", "a10g-0", "t4-0"]) == pytest.approx([t4, g5, t4])


def test_advice_is_in_dollars_when_prices_are_known(tmp_path: Path) -> None:
    profile = _profile(
        tmp_path,
        "name: p\nprovider: local\ninstance_type: m5.large\ndata: {synthetic: {size: 1MB}}\n"
        "train: {nproc: 2}\n",
    )
    advice = priced_advice(profile, _book(), {"balance": BLOCK})
    assert advice is not None and advice["unit"] == "usd" and advice["drop_rank"] == 1
    unpriced = _profile(
        tmp_path, "name: q\nprovider: local\ndata: {synthetic: {size: 1MB}}\ntrain: {nproc: 2}\n"
    )
    assert priced_advice(unpriced, _book(), {"balance": BLOCK})["unit"] == "rank_hours"
    assert priced_advice(profile, _book(), {}) is None


@pytest.mark.slow
def test_balanced_run_with_a_straggler_reports_priced_advice(write_profile, run_env) -> None:
    path = write_profile(nproc=2, epochs=2)
    text = path.read_text().replace(
        "  threads: 1\n", "  threads: 1\n  balancer:\n    enabled: true\n    straggle: {1: 3.0}\n"
    )
    path.write_text(text)
    result = sentitop("run", str(path), "--json", env=run_env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["advice"]["unit"] == "usd" and summary["advice"]["drop_rank"] == 1
    shares = summary["train"]["balance"]["shares"]
    assert shares[0] > shares[1]  # the straggler (rank 1) was given less of the data
    events = (Path(run_env["SENTITOP_RUNS_DIR"]) / summary["run"] / "events.jsonl").read_text()
    starts = [json.loads(ln) for ln in events.splitlines() if '"rank_start"' in ln]
    assert sorted((e["rank"], e["node"], e["world_size"]) for e in starts) == [
        (0, "local", 2),
        (1, "local", 2),
    ]

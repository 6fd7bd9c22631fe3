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
    profile = _profile(
        tmp_path,
        "name: p\nprovider: ssh\ndata: {synthetic: {size: 1MB}}\nnodes:\n"
        "  - {name: a, host: 10.0.0.1, nproc: 1, instance_type: g5.xlarge}\n"
        "  - {name: b, host: 10.0.0.2, nproc: 2, instance_type: p2.xlarge}\n",
    )
    book = _book()
    g5, p2 = book.price("g5.xlarge").usd_per_hour, book.price("p2.xlarge").usd_per_hour
    assert rank_prices(profile, book) == pytest.approx([g5, p2 / 2, p2 / 2])


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

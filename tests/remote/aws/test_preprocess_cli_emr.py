"""`sentitop preprocess --runner emr --s3 …` end to end against moto's server (EMR, S3, IAM)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.emr.models import emr_backends

from engine.config import PreprocessConfig
from remote import aws
from remote.emr import LIVE_CLUSTER_STATES
from tests.remote.aws.conftest import REGION, live_clusters
from tests.remote.aws.fake_emr import FakeEMR
from tests.remote.aws.test_emr import write_reviews
from tui.cli import main

pytestmark = pytest.mark.aws

SEQ_LEN = PreprocessConfig(inputs=["x"], output="o").seq_len
"""The engine's default sequence length (the CLI passes none)."""

# moto only: its steps have no logs, and polling every 30 s would make each test minutes long
MOTO_MRJOB_ARGS = [
    "--mrjob-arg=--check-cluster-every",
    "--mrjob-arg=0.1",
    "--mrjob-arg=--no-read-logs",
]


def _all_clusters() -> dict[str, tuple[str, Any]]:
    """Every cluster moto holds, in every region it has seen: id → (region, cluster)."""
    found = {}
    for region, backend in list(emr_backends[DEFAULT_ACCOUNT_ID].items()):
        for cluster in list(backend.clusters.values()):
            found[cluster.id] = (region, cluster)
    return found


def _run_id_of(cluster: Any) -> str | None:
    return next((t["Value"] for t in cluster.tags if t["Key"] == aws.RUN_ID_TAG), None)


class CLIFakeEMR(FakeEMR):
    """FakeEMR for the run id the CLI picks itself: it follows clusters created after it began.

    The CLI does not say its run id up front, so the run is recognised by the tag of any new
    cluster; ``run_ids`` records which it saw (and ``regions`` where they were created).
    """

    def __init__(self, *, mode: str = "run") -> None:
        super().__init__("", REGION, mode=mode)
        self.before = set(_all_clusters())
        self.run_ids: set[str] = set()
        self.regions: set[str] = set()

    def _clusters(self) -> list[Any]:
        new = []
        for cluster_id, (region, cluster) in _all_clusters().items():
            run_id = _run_id_of(cluster)
            if cluster_id not in self.before and run_id:
                self.run_ids.add(run_id)
                self.regions.add(region)
                new.append(cluster)
        return new

    def new_live_clusters(self) -> list[str]:
        """Clusters created since this began that are still live (moto's own state)."""
        return [
            cid
            for cid, (_, cluster) in _all_clusters().items()
            if cid not in self.before and cluster.state in LIVE_CLUSTER_STATES
        ]


def _args(src: Path, out: Path, s3: str) -> list[str]:
    return ["preprocess", "--input", str(src), "--output", str(out), "--runner", "emr",
            "--s3", s3, "--json", *MOTO_MRJOB_ARGS]  # fmt: skip


@pytest.mark.slow
def test_preprocess_cli_on_emr_prints_stats_writes_dataset_and_leaves_no_cluster(
    aws_env, bucket, tmp_path: Path, capsys
) -> None:
    src = write_reviews(tmp_path / "reviews.json", n=200)
    out = tmp_path / "out"
    with CLIFakeEMR() as fake:
        code = main(_args(src, out, f"s3://{bucket}/cli"))
    captured = capsys.readouterr()
    assert fake.error is None
    assert code == 0, captured.err
    assert len(fake.run_ids) == 1, fake.run_ids
    (run_id,) = fake.run_ids

    stats = json.loads(captured.out)
    assert stats == json.loads((out / "stats.json").read_text())
    assert stats["read"] == 200 and 0 < stats["distinct"] < 200 and stats["duplicates"] > 0
    assert stats["train"] + stats["test"] == stats["distinct"]
    with h5py.File(out / "dataset.h5") as h5:
        for split in ("train", "test"):
            assert h5[split]["tokens"].shape == (stats[split], SEQ_LEN)  # --seq-len default
            assert h5[split]["labels"].shape == h5[split]["lengths"].shape == (stats[split],)
    assert "Traceback" not in captured.err

    assert fake.new_live_clusters() == []
    assert live_clusters(run_id) == []


@pytest.mark.slow
def test_preprocess_cli_failed_emr_step_exits_1_with_one_message_and_no_cluster(
    aws_env, bucket, tmp_path: Path, capsys
) -> None:
    src = write_reviews(tmp_path / "reviews.json", n=20)
    with CLIFakeEMR(mode="fail") as fake:
        code = main(_args(src, tmp_path / "out", f"s3://{bucket}/cli"))
    captured = capsys.readouterr()
    assert fake.error is None and len(fake.run_ids) == 1
    assert code == 1
    run_id_line, error_line = captured.err.splitlines()[:2]
    assert run_id_line.startswith("EMR run id preprocess-") and "sentitop teardown" in run_id_line
    assert error_line.startswith("cloud error: EMR cluster j-"), captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert not (tmp_path / "out" / "dataset.h5").exists()
    assert fake.new_live_clusters() == []


@pytest.mark.parametrize("s3", ["https://bucket/prefix", "s3://", "bucket/prefix"])
def test_preprocess_cli_bad_s3_value_exits_2_with_one_line_and_starts_nothing(
    aws_env, tmp_path: Path, capsys, s3: str
) -> None:
    src = write_reviews(tmp_path / "reviews.json", n=5)
    before = set(_all_clusters())
    code = main(_args(src, tmp_path / "out", s3))
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.startswith("bad configuration: ") and repr(s3) in captured.err
    assert "Traceback" not in captured.err and len(captured.err.splitlines()) <= 2
    assert set(_all_clusters()) == before  # refused before anything was started


def test_preprocess_cli_bad_s3_message_names_the_flag(aws_env, tmp_path: Path, capsys) -> None:
    src = write_reviews(tmp_path / "reviews.json", n=5)
    assert main(_args(src, tmp_path / "out", "https://bucket/prefix")) == 2
    assert "--s3" in capsys.readouterr().err.splitlines()[0]

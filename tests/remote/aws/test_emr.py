"""EMR preprocessing through mrjob's EMR runner against moto's server (EMR, S3, IAM, EC2)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from engine.config import PreprocessConfig
from engine.errors import CloudError, ConfigError
from engine.events import Emitter, JsonlFileSink, read_events
from remote import aws
from remote.emr import (
    EMRSettings,
    bootstrap_commands,
    mrjob_switches,
    preprocess_on_emr,
    run_emr_preprocess,
    settings_from_profile,
)
from tests.remote.aws.conftest import (
    FAKE_KEY_ID,
    FAKE_SECRET,
    FAKE_TOKEN,
    REGION,
    live_clusters,
)
from tests.remote.aws.fake_emr import FakeEMR

pytestmark = pytest.mark.aws

ROOT = Path(__file__).resolve().parents[3]
GOOD = ["great", "love", "excellent", "perfect", "works", "happy", "recommend", "sturdy", "fast"]
BAD = ["broken", "awful", "refund", "waste", "poor", "cheap", "useless", "returned", "slow"]
OTHER = ["phone", "case", "cable", "battery", "screen", "charger", "color", "size", "box", "price"]


def write_reviews(path: Path, n: int = 400, seed: int = 1) -> Path:
    """McAuley-style JSON lines with some exact duplicates."""
    rng = random.Random(seed)
    with path.open("w") as fh:
        for i in range(n):
            rating = rng.choice([1, 2, 4, 5, 5])
            words = rng.sample(GOOD if rating > 3 else BAD, 3) + rng.sample(OTHER, 3)
            text = " ".join(words) if i % 10 else "great phone case love it"
            fh.write(json.dumps({"reviewText": text, "overall": float(rating)}) + "\n")
    return path


def settings(bucket: str, **kw) -> EMRSettings:
    base = dict(
        s3=f"s3://{bucket}/sentitop",
        region=REGION,
        master_instance_type="m5.xlarge",
        core_instance_type="m5.large",
        core_count=3,
        spot_bid=0.12,
        release_label="emr-7.2.0",
        bootstrap=["echo sentitop-extra-bootstrap"],
        check_every_s=0.1,
        read_logs=False,  # moto has no step logs
    )
    base.update(kw)
    return EMRSettings(**base)


def test_instance_groups_and_switches() -> None:
    st = EMRSettings(
        s3="s3://bkt/p",
        core_count=4,
        spot_bid=0.2,
        core_instance_type="c5.xlarge",
        bootstrap=["echo hi"],
        read_logs=False,
        endpoint="http://127.0.0.1:9",
    )
    master, core = st.instance_groups()
    assert (master["InstanceRole"], master["Market"], master["InstanceCount"]) == (
        "MASTER",
        "ON_DEMAND",
        1,
    )
    assert core == {
        "Name": "core",
        "InstanceRole": "CORE",
        "InstanceType": "c5.xlarge",
        "InstanceCount": 4,
        "Market": "SPOT",
        "BidPrice": "0.200",
    }
    spot_no_bid = EMRSettings(s3="s3://bkt/p", spot=True).instance_groups()[1]
    assert spot_no_bid["Market"] == "SPOT" and "BidPrice" not in spot_no_bid
    assert EMRSettings(s3="s3://bkt/p").instance_groups()[1]["Market"] == "ON_DEMAND"

    args = mrjob_switches(st, run_id="run-1")
    joined = " ".join(args)
    assert json.loads(args[args.index("--instance-groups") + 1])[1]["BidPrice"] == "0.200"
    assert "--no-read-logs" in args and f"--tag {aws.RUN_ID_TAG}=run-1" in joined
    tags = args[args.index("--extra-cluster-param") + 1]
    assert json.loads(tags.split("=", 1)[1]) == [{"Key": aws.RUN_ID_TAG, "Value": "run-1"}]
    assert args[args.index("--cloud-tmp-dir") + 1] == "s3://bkt/p/run-1/tmp/"
    for service in ("emr", "s3", "ec2", "iam"):
        assert args[args.index(f"--{service}-endpoint") + 1] == "http://127.0.0.1:9"
    assert "--emr-endpoint" not in mrjob_switches(EMRSettings(s3="s3://bkt/p"), run_id="r")
    boots = [args[i + 1] for i, a in enumerate(args) if a == "--bootstrap"]
    assert boots == bootstrap_commands(st, None)
    assert boots[-1] == "echo hi" and "pip install" in boots[1]
    with_wheel = bootstrap_commands(st, Path("/tmp/sentitop-0.1.0-py3-none-any.whl"))
    assert any(c.endswith("sentitop-0.1.0-py3-none-any.whl#") for c in with_wheel)
    with pytest.raises(ConfigError, match=r"preprocess\.emr\.s3"):
        EMRSettings(s3="https://not-s3")


def test_hostile_python_value_stays_one_word_in_the_bootstrap() -> None:
    hostile = "python3.11; touch /tmp/pwned $(id) `id`"
    cmds = bootstrap_commands(EMRSettings(s3="s3://bkt/p", python=hostile), None)
    for cmd in cmds:
        for part in cmd.split(" || "):
            words = shlex.split(part)
            assert not {"touch", "$(id)", "`id`", ";"} & set(words), part
    pip_lines = [shlex.split(c) for c in cmds if "-m pip" in c]
    assert pip_lines and all(words[1] == hostile for words in pip_lines)


def test_settings_from_a_profile(tmp_path: Path) -> None:
    from remote.profile import load_profile

    path = tmp_path / "emr.yaml"
    path.write_text(
        "name: emr\nprovider: local\nregion: eu-west-1\n"
        "data: {inputs: [in.json]}\n"
        "preprocess:\n  runner: emr\n"
        "  emr: {s3: 's3://bkt/x', instance_type: m5.large, count: 5, spot: true,"
        " release_label: emr-7.1.0}\n"
    )
    st = settings_from_profile(load_profile(path))
    assert (st.region, st.core_count, st.core_instance_type, st.release_label) == (
        "eu-west-1",
        5,
        "m5.large",
        "emr-7.1.0",
    )
    assert st.instance_groups()[1]["Market"] == "SPOT"


def _dataset(folder: Path) -> dict[str, np.ndarray]:
    with h5py.File(folder / "dataset.h5") as h5:
        out = {}
        h5.visititems(
            lambda name, obj: (
                out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None
            )
        )
    return out


@pytest.mark.slow
def test_emr_preprocessing_end_to_end_equals_inline_and_terminates(
    aws_env, bucket, run_id, tmp_path: Path
) -> None:
    from engine.preprocess.pipeline import run_preprocess

    src = write_reviews(tmp_path / "reviews.json")
    run_dir = tmp_path / run_id
    sink = JsonlFileSink(run_dir / "events.jsonl")
    cfg = PreprocessConfig(inputs=[str(src)], output=str(tmp_path / "emr-out"), runner="emr")
    with FakeEMR(run_id, REGION) as fake:
        stats = preprocess_on_emr(
            cfg, settings(bucket), run_id=run_id, emitter=Emitter(sink), run_dir=run_dir
        )
    sink.close()
    assert fake.error is None

    # the cluster as launched: groups, spot bid, release, applications, tags, bootstrap
    cluster = fake.seen.cluster
    assert cluster["ReleaseLabel"] == "emr-7.2.0"
    assert {a["Name"] for a in cluster["Applications"]} == {"Hadoop"}
    assert {"Key": aws.RUN_ID_TAG, "Value": run_id} in cluster["Tags"]
    groups = {g["InstanceGroupType"]: g for g in fake.seen.instance_groups}
    assert groups["MASTER"]["InstanceType"] == "m5.xlarge"
    assert groups["MASTER"]["Market"] == "ON_DEMAND"
    assert groups["CORE"]["InstanceType"] == "m5.large"
    assert groups["CORE"]["RequestedInstanceCount"] == 3
    assert groups["CORE"]["Market"] == "SPOT" and groups["CORE"]["BidPrice"] == "0.120"
    script = fake.seen.bootstrap_script
    assert "python3.11 -m pip install" in script and "h5py" in script
    assert "echo sentitop-extra-bootstrap" in script
    assert any("python3.11" in " ".join(a) for a in fake.seen.step_args)

    # terminated, and nothing of the run left running
    assert live_clusters(run_id) == []
    state = aws.client("emr", REGION).describe_cluster(ClusterId=cluster["Id"])["Cluster"]
    assert state["Status"]["State"] == "TERMINATED"

    # the same dataset as the inline runner makes from the same file
    inline = run_preprocess(
        PreprocessConfig(inputs=[str(src)], output=str(tmp_path / "inl"), runner="inline")
    )
    for key in (
        "read",
        "kept",
        "distinct",
        "duplicates",
        "positive",
        "negative",
        "train",
        "test",
        "vocab_size",
    ):
        assert stats[key] == inline[key], key
    assert stats["distinct"] > 100 and stats["duplicates"] > 0
    emr_data, inline_data = _dataset(tmp_path / "emr-out"), _dataset(tmp_path / "inl")
    assert emr_data.keys() == inline_data.keys() and emr_data
    for name, values in emr_data.items():
        np.testing.assert_array_equal(values, inline_data[name], err_msg=name)

    # step progress streamed as events; the cluster's end recorded; no credentials anywhere
    events = list(read_events(run_dir / "events.jsonl"))
    steps = [e for e in events if e["type"] == "progress" and e.get("unit") == "steps"]
    assert steps and steps[-1]["done"] == steps[-1]["total"] == 2
    assert {"node": f"emr:{cluster['Id']}", "status": "terminated"}.items() <= next(
        e for e in events if e.get("status") == "terminated"
    ).items()
    assert "Created new cluster" in (run_dir / "logs" / "emr.log").read_text()
    for path in run_dir.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            for secret in (FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN):
                assert secret not in text, f"{secret} leaked into {path}"
            assert (path.stat().st_mode & 0o077) == 0, f"{path} is readable by others"


@pytest.mark.slow
def test_failed_step_is_a_cloud_error_and_terminates(
    aws_env, bucket, run_id, tmp_path: Path
) -> None:
    src = write_reviews(tmp_path / "reviews.json", n=20)
    cfg = PreprocessConfig(inputs=[str(src)], output=str(tmp_path / "out"), runner="emr")
    with FakeEMR(run_id, REGION, mode="fail"), pytest.raises(CloudError, match="EMR cluster j-"):
        preprocess_on_emr(cfg, settings(bucket), run_id=run_id, run_dir=tmp_path / run_id)
    assert live_clusters(run_id) == []


def test_no_credentials_is_said_before_anything_starts(tmp_path: Path) -> None:
    """Without AWS credentials the command said "could not terminate the EMR cluster(s)" with
    mrjob's "ClusterId None" in brackets: now the cause, before a run id or a wheel."""
    empty = tmp_path / "none"
    empty.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"AWS_CONFIG_FILE": str(empty), "AWS_SHARED_CREDENTIALS_FILE": str(empty),
            "AWS_EC2_METADATA_DISABLED": "true"}  # fmt: skip
    src = write_reviews(tmp_path / "reviews.json", n=20)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli", "preprocess", "-i", str(src), "-o", str(out),
         "--runner", "emr", "--s3", "s3://my-bucket/prefix"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    said = "cloud error: could not start an EMR cluster in us-east-1: no AWS credentials found"
    assert done.stderr.startswith(said)
    assert "EMR run id" not in done.stderr and "terminate" not in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


def _wait_for_cluster(run_id: str, alive=lambda: True, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while not (ids := live_clusters(run_id)):
        assert alive(), "the job ended before its cluster started"
        assert time.monotonic() < deadline, "no EMR cluster started"
        time.sleep(0.1)
    return ids[0]


@pytest.mark.slow
async def test_cancelling_the_async_run_terminates_the_cluster(
    aws_env, bucket, run_id, tmp_path: Path
) -> None:
    src = write_reviews(tmp_path / "reviews.json", n=20)
    cfg = PreprocessConfig(inputs=[str(src)], output=str(tmp_path / "out"), runner="emr")
    with FakeEMR(run_id, REGION, mode="hang"):
        task = asyncio.create_task(
            run_emr_preprocess(None, cfg, run_dir=tmp_path / run_id, settings=settings(bucket))
        )
        await asyncio.to_thread(_wait_for_cluster, run_id, lambda: not task.done())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert live_clusters(run_id) == []
    # the mrjob thread unwound through mrjob's own cleanup: its S3 temp files are gone
    log = (tmp_path / run_id / "logs" / "emr.log").read_text()
    assert "Removing s3 temp directory" in log
    listing = aws.client("s3", REGION).list_objects_v2(Bucket=bucket, Prefix=f"sentitop/{run_id}/")
    assert [o["Key"] for o in listing.get("Contents", []) if "/files/" in o["Key"]] == []


SIGINT_SCRIPT = """
import sys
from engine.config import PreprocessConfig
from remote.emr import EMRSettings, preprocess_on_emr

cfg = PreprocessConfig(inputs=[sys.argv[2]], output=sys.argv[3], runner="emr")
st = EMRSettings(s3=sys.argv[4], region="us-east-1", check_every_s=0.1, read_logs=False)
try:
    preprocess_on_emr(cfg, st, run_id=sys.argv[1])
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.slow
def test_sigint_during_emr_leaves_no_cluster(aws_env, bucket, run_id, tmp_path: Path) -> None:
    script = tmp_path / "emr_job.py"
    script.write_text(SIGINT_SCRIPT)
    src = write_reviews(tmp_path / "reviews.json", n=20)
    proc = subprocess.Popen(
        [
            sys.executable,
            str(script),
            run_id,
            str(src),
            str(tmp_path / "out"),
            f"s3://{bucket}/sentitop",
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait_for_cluster(run_id, lambda: proc.poll() is None)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert live_clusters(run_id) == []
    for secret in (FAKE_KEY_ID, FAKE_SECRET, FAKE_TOKEN):
        assert secret not in out


@pytest.mark.slow
def test_sigint_during_emr_in_sentitop_run_leaves_no_cluster(
    aws_env, bucket, tmp_path: Path
) -> None:
    src = write_reviews(tmp_path / "reviews.json", n=20)
    profile = tmp_path / "emr-local.yaml"
    profile.write_text(
        "name: emr-local\nprovider: local\n"
        f"data: {{inputs: ['{src}']}}\n"
        "preprocess:\n  runner: emr\n"
        f"  emr: {{s3: 's3://{bucket}/runs', instance_type: m5.xlarge, count: 2}}\n"
        "train: {nproc: 1, epochs: 1}\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SENTITOP_EMR_CHECK_EVERY_S": "0.2",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tui.cli",
            "run",
            str(profile),
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    emr = aws.client("emr", REGION)
    try:
        deadline = time.monotonic() + 120
        run_id = None
        while run_id is None:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "no EMR cluster started"
            for summary in emr.list_clusters(ClusterStates=["STARTING", "RUNNING", "WAITING"])[
                "Clusters"
            ]:
                tags = emr.describe_cluster(ClusterId=summary["Id"])["Cluster"]["Tags"]
                run_id = next((t["Value"] for t in tags if t["Key"] == aws.RUN_ID_TAG), None)
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert live_clusters(run_id) == []
    summary = json.loads((tmp_path / "runs" / run_id / "summary.json").read_text())
    assert summary["status"] == "interrupted"

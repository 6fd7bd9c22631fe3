"""Identical outputs from the local, inline (mrjob) and spark runners on a real file."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import MUSICAL, assert_same_dataset, needs_spark

Run = Callable[..., dict[str, Any]]
needs_data = pytest.mark.skipif(not MUSICAL.exists(), reason=f"{MUSICAL} not available")
COUNTS = ("read", "kept", "duplicates", "skipped", "skipped_examples", "positive", "negative",
          "train", "test", "input_bytes", "vocab_size")  # fmt: skip


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert_same_dataset(a, b)
    assert {k: a["stats"][k] for k in COUNTS} == {k: b["stats"][k] for k in COUNTS}


@pytest.fixture(scope="module")
def local_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from engine.config import PreprocessConfig
    from engine.preprocess import run_preprocess

    from .conftest import load_dataset

    out = tmp_path_factory.mktemp("local")
    run_preprocess(PreprocessConfig(inputs=[str(MUSICAL)], output=str(out), workers=2))
    return load_dataset(out)


@needs_data
def test_local_one_worker_matches_two(preprocess: Run, local_result: dict[str, Any]) -> None:
    _same(preprocess([MUSICAL], workers=1), local_result)
    assert local_result["stats"]["read"] == 10_261


@needs_data
@pytest.mark.slow
def test_inline_mrjob_matches_local(preprocess: Run, local_result: dict[str, Any]) -> None:
    _same(preprocess([MUSICAL], runner="inline"), local_result)


@needs_data
@pytest.mark.slow
@needs_spark
def test_spark_matches_local(
    preprocess: Run, local_result: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    _same(preprocess([MUSICAL], runner="spark", workers=2), local_result)


def test_engine_zip_is_importable_on_a_bare_node(tmp_path: Path) -> None:
    from engine.preprocess.run_mrjob import engine_zip

    archive = engine_zip(str(tmp_path))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import engine.preprocess.run_mrjob as m; "
        "print(m.__file__)"
    )
    proc = subprocess.run([sys.executable, "-I", "-c", code, archive], capture_output=True,
                          text=True, cwd=tmp_path, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "engine.zip" in proc.stdout


def test_s3_output_needs_a_cluster_runner(tmp_path: Path) -> None:
    from engine.config import PreprocessConfig
    from engine.errors import InputError
    from engine.preprocess import run_preprocess

    path = tmp_path / "a.jsonl"
    path.write_text('{"reviewText": "good", "overall": 5}\n')
    with pytest.raises(InputError, match="s3://"):
        run_preprocess(PreprocessConfig(inputs=[str(path)], output="s3://bucket/out"))
    with pytest.raises(InputError, match="s3://"):
        run_preprocess(PreprocessConfig(inputs=["s3://bucket/in.json.gz"], output=str(tmp_path)))


def test_hadoop_runner_without_hadoop_names_the_missing_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mrjob's FileNotFoundError for the hadoop binary used to read as an unwritable scratch
    folder; it is a configuration error naming the command, and nothing is left behind."""
    from engine.config import PreprocessConfig
    from engine.errors import ConfigError
    from engine.events import Emitter
    from engine.preprocess import run_preprocess

    for name in ("HADOOP_HOME", "HADOOP_PREFIX", "HADOOP_INSTALL", "HADOOP_MAPRED_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no hadoop anywhere on it
    path = tmp_path / "a.jsonl"
    path.write_text('{"reviewText": "good", "overall": 5}\n{"reviewText": "bad", "overall": 1}\n')
    out = tmp_path / "out"
    events: list[dict[str, Any]] = []

    class Sink:
        def write(self, event: dict[str, Any]) -> None:
            events.append(dict(event))

        def close(self) -> None:
            """Nothing to release."""

    sink = Sink()
    cfg = PreprocessConfig(inputs=[str(path)], output=str(out), runner="hadoop")
    with pytest.raises(ConfigError, match="--runner hadoop needs Hadoop's command line") as err:
        run_preprocess(cfg, Emitter(sink))
    assert "HADOOP_HOME" in (err.value.hint or "")
    # said before the job's first progress event (the CLI's bar): it came under an empty bar
    assert not [e for e in events if e["type"] == "progress"]
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


@pytest.mark.slow
@needs_spark
def test_spark_runner_keeps_sparks_start_up_chatter_off_the_terminal(tmp_path: Path) -> None:
    """Spark printed its log4j profile, a default-level notice, a native-library WARN and
    pyspark's pandas FutureWarning before the progress bar; at the default SPARK_LOG_LEVEL
    (ERROR) only the JVM's own one-line module notice may remain."""
    import os
    import time

    path = tmp_path / "a.jsonl"
    lines = [
        f'{{"reviewText": "review {i} good", "overall": {5 if i % 3 else 1}}}' for i in range(50)
    ]
    path.write_text("\n".join(lines) + "\n")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SPARK_LOG_LEVEL", None)
    argv = [sys.executable, "-m", "engine.preprocess", "-i", str(path), "-o", str(tmp_path / "o"),
            "--runner", "spark", "--workers", "1", "--json"]  # fmt: skip
    root = Path(__file__).parents[2]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=root)  # fmt: skip
    scratch: set[str] = set()  # Spark's block manager folders, while the job runs
    while proc.poll() is None:
        scratch |= {str(p.relative_to(tmp_path)) for p in tmp_path.glob(".*/.*/*/blockmgr-*")}
        time.sleep(0.02)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    noise = [ln for ln in err.splitlines()
             if ln.strip() and not ln.startswith("WARNING: Using incubator modules")]  # fmt: skip
    assert noise == []
    # in the job's own scratch folder (removed on every exit path), not /tmp: a Ctrl-C left
    # /tmp/blockmgr-* and /tmp/spark-* behind
    assert scratch and all(".preprocess-tmp-" in p for p in scratch), scratch
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [
        "dataset.h5",
        "stats.json",
        "vocab.json",
    ]

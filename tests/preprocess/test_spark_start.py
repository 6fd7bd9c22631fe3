"""The spark runner: no Java, a Spark that does not start, or huge --workers are clear errors
or just work, never a py4j traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.config import PreprocessConfig
from engine.errors import ConfigError
from engine.preprocess import run_preprocess

from .conftest import needs_spark, review, write_lines

ROOT = Path(__file__).parents[2]


def _reviews(tmp_path: Path) -> Path:
    lines = [review(f"review {i} good", 5 if i % 3 else 1) for i in range(30)]
    return write_lines(tmp_path / "a.jsonl", lines)


@pytest.mark.parametrize("java_home", [None, "/nonexistent-jdk"])
def test_spark_without_java_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, java_home: str | None
) -> None:
    """pyspark printed "JAVA_HOME is not set" and a JAVA_GATEWAY_EXITED traceback (exit 1)."""
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no java on it
    if java_home:
        monkeypatch.setenv("JAVA_HOME", java_home)
    else:
        monkeypatch.delenv("JAVA_HOME", raising=False)
    out = tmp_path / "out"
    cfg = PreprocessConfig(inputs=[str(_reviews(tmp_path))], output=str(out), runner="spark")
    with pytest.raises(ConfigError, match="--runner spark needs Java") as err:
        run_preprocess(cfg)
    assert (java_home or "--runner local") in f"{err.value.message} {err.value.hint}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def _cli(tmp_path: Path, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "engine.preprocess", "-i", str(_reviews(tmp_path)),
            "-o", str(tmp_path / "out"), "--runner", "spark", "--json", *extra]  # fmt: skip
    env = {**{k: v for k, v in os.environ.items() if k != "SPARK_MASTER"}, **env}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=300, env=env,
                          check=False)  # fmt: skip


@needs_spark
@pytest.mark.slow
def test_a_spark_that_does_not_start_is_a_launch_error(tmp_path: Path) -> None:
    """A mistyped SPARK_MASTER ended in a pyspark traceback."""
    done = _cli(tmp_path, SPARK_MASTER="sparkk://nowhere:7077")
    assert done.returncode == 1, done.stderr
    assert "launch failed: could not start Spark (master sparkk://nowhere:7077)" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


@needs_spark
@pytest.mark.slow
def test_spark_with_more_workers_than_tasks_runs(tmp_path: Path) -> None:
    """--workers 100000 asked Spark for local[100000]: the JVM could not create the threads
    and the run ended in a py4j OutOfMemoryError traceback."""
    done = _cli(tmp_path, "--workers", "100000")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "out" / "dataset.h5").exists()


CTRL_C_WRAPPER = """
import sys
from pyspark.core.rdd import RDD
from tui.cli import main

real = RDD.collect

def collect(self):
    print("COLLECTING", flush=True)  # the test sends SIGINT to the group now
    return real(self)

RDD.collect = collect
sys.exit(main(sys.argv[1:]))
"""


@needs_spark
@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 1.0])
def test_ctrl_c_during_a_spark_job_is_interrupted_in_one_line(tmp_path: Path, delay: float) -> None:
    """A terminal's Ctrl-C while the job ran: its Python workers took it too and died first
    ("Python worker exited unexpectedly", or exit 1 with py4j tracebacks), or it landed in a
    py4j finalizer and was lost (exit 0, output written). Now: exit 130, "interrupted"."""
    import signal
    import time

    src = tmp_path / "big.jsonl"
    lines = [review(f"review {i} of the sturdy stand {i % 977}", 5 if i % 3 else 1)
             for i in range(200_000)]  # fmt: skip
    write_lines(src, lines)
    out = tmp_path / "out"
    argv = [sys.executable, "-c", CTRL_C_WRAPPER, "preprocess", "-i", str(src), "-o", str(out),
            "--runner", "spark", "--json"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "COLLECTING\n"
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    said = [ln for ln in err.splitlines() if "incubator modules" not in ln]
    assert proc.returncode == 130, err[-3000:]
    assert said == ["interrupted"], err[-3000:]
    assert not out.exists()

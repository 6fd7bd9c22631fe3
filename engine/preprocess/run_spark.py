"""The `spark` runner: the same map/reduce functions on pyspark (local[N] here, any master via
SPARK_MASTER); the driver encodes and writes HDF5 like the mrjob runners."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import signal
import sys
import threading
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from operator import add
from typing import Any

from engine import errors
from engine.errors import ConfigError, LaunchError, SentitopError
from engine.fork_guard import ForkGuard
from engine.preprocess.job import JobSettings
from engine.preprocess.mapper import MapStats, map_task
from engine.preprocess.pool_worker import Progress
from engine.preprocess.readers import MapTask
from engine.preprocess.reduce import ReducedPart, reduce_one, select_vocab
from engine.preprocess.run_local import LocalResult
from engine.preprocess.writer import encode_part

STATS_KEY = ("S", b"")
ERROR_KEY = ("E", b"")
"""Key of a user error a map task met (a damaged gzip): (class name, message, hint), raised
by the driver as itself. Raised in the task, it ended the run in 170 lines of Java and Python
tracebacks and exit 1."""


def _map_partition(tasks: Iterable[MapTask], job: JobSettings) -> Iterator[tuple[Any, Any]]:
    agg: dict[bytes, int] = {}
    stats = MapStats()
    cache: dict[str, bytes] = {}
    try:
        for task in tasks:
            map_task(task, job.specs[task.file_index], job.max_line_bytes, agg, stats, cache)
    except SentitopError as exc:
        yield ERROR_KEY, (type(exc).__name__, exc.message, exc.hint)
        return
    for text, packed in agg.items():
        yield ("T", text), packed
    yield STATS_KEY, stats


def _raise_task_error(found: tuple[str, str, str | None]) -> None:
    """Raise the user error a map task reported, as its own class."""
    name, message, hint = found
    kind = getattr(errors, name, SentitopError)
    raise kind(message, hint=hint)


def _combine(a: Any, b: Any) -> Any:
    if isinstance(a, tuple) and isinstance(a[0], str):  # ERROR_KEY: the first error said
        return a
    if isinstance(a, MapStats):
        merged = MapStats()
        merged.merge(a)
        merged.merge(b)
        return merged
    return a + b


def _reduce(item: tuple[Any, Any], job: JobSettings) -> tuple[Any, Any]:
    key, value = item
    if key in (STATS_KEY, ERROR_KEY):
        return key, value
    return key, reduce_one(key[1], value, job.rule, job.stop, job.test_fraction)


def _train_words(item: tuple[Any, Any]) -> list[bytes]:
    key, value = item
    if key in (STATS_KEY, ERROR_KEY) or value[0] is None or value[0][3]:
        return []
    words: list[bytes] = value[2]
    return words


LOG_CONFIG = """\
rootLogger.level = {level}
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{{1}}: %m%n
logger.shell.name = org.apache.spark.api.python.PythonGatewayServer
logger.shell.level = {level}
"""
"""Spark's log4j2 settings: messages at ``level`` and above on stderr, no start-up banner (pyspark's
gateway, Spark's "shell" logger, at the same level: no "Setting default log level" notice)."""


def quiet_log_config(folder: str, level: str) -> str:
    """Write :data:`LOG_CONFIG` for ``level`` (SPARK_LOG_LEVEL) into ``folder``; its path."""
    path = os.path.join(folder, "spark-log4j2.properties")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(LOG_CONFIG.format(level=level.lower()))
    return path


def check_java() -> None:
    """ConfigError when pyspark cannot find the Java it starts Spark with (it printed "JAVA_HOME
    is not set" and a traceback of JAVA_GATEWAY_EXITED)."""
    home = os.environ.get("JAVA_HOME")
    if home and not os.access(os.path.join(home, "bin", "java"), os.X_OK):
        raise ConfigError(
            f"--runner spark needs Java: JAVA_HOME={home} holds no bin/java",
            hint="point JAVA_HOME at a JDK or JRE 17 or later, or unset it to use the java on PATH",
        )
    if not home and shutil.which("java") is None:
        raise ConfigError(
            "--runner spark needs Java 17 or later: no java on PATH and JAVA_HOME is not set",
            hint="install a JRE (e.g. apt-get install openjdk-17-jre-headless) or set "
            "JAVA_HOME; without Java use --runner local (all cores of this machine)",
        )


class _Py4JRootRecords(logging.Filter):
    """Drops what py4j logs on the root logger (``logging.exception``: "KeyboardInterrupt while
    sending command" with a traceback, at every Ctrl-C during a JVM call); the error raised
    says what failed."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for py4j's records."""
        return f"{os.sep}py4j{os.sep}" not in record.pathname


def _start_context(conf: Any, master: str) -> Any:
    """The SparkContext for ``conf``, with Python's own Ctrl-C back in place: a Ctrl-C while
    the JVM starts is held and raised once it is up (then stopped), and pyspark's SIGINT
    handler, which calls into the JVM from inside the handler, is replaced (a Ctrl-C in the
    middle of another JVM call printed py4j's "reentrant call" tracebacks)."""
    from py4j.protocol import Py4JError
    from pyspark import SparkContext
    from pyspark.errors import PySparkException

    started: list[Any] = []
    try:
        with ForkGuard():  # on leaving: the handlers from before pyspark's, and a held Ctrl-C
            started.append(SparkContext._active_spark_context or _new_context(conf))
    except KeyboardInterrupt:
        for sc in started:
            _stop_quietly(sc)
        raise
    except (Py4JError, PySparkException) as exc:  # the JVM did not start (threads, memory)
        said = [ln.strip(": \t") for ln in str(exc).splitlines() if ln.strip(": \t")]
        cause = next((ln for ln in said if ln.startswith(("java.", "org.", "["))), None)
        raise LaunchError(
            f"could not start Spark (master {master}): {cause or (said or [repr(exc)])[0]}",
            hint="SPARK_LOG_LEVEL=WARN shows Spark's own log; without Spark use --runner local",
        ) from exc
    return started[0]


def _new_context(conf: Any) -> Any:
    """A SparkContext whose JVM (and the Python workers it forks) runs in a session of its own:
    a terminal's Ctrl-C reaches the driver only, which stops the context. Its workers took
    the Ctrl-C too (pyspark restores SIGINT in them) and died first, so the run ended in
    "Python worker exited unexpectedly" errors, or exit 1, instead of "interrupted". The JVM
    still exits when the driver does (it watches its stdin pipe)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    fresh = not SparkContext._gateway
    kwargs = {"start_new_session": True}
    gateway = launch_gateway(conf, popen_kwargs=kwargs) if fresh else None  # type: ignore[no-untyped-call]
    return SparkContext(conf=conf, gateway=gateway)


def _stop_quietly(sc: Any) -> None:
    """Stop a context after a Ctrl-C: the JVM (in the terminal's process group) may be gone
    already, and py4j logged each failed call with a traceback."""
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.suppress(Exception):
            sc.setLogLevel("OFF")  # the tasks the stop kills are not errors to show
        sc.stop()
    except Exception:  # the JVM went with the Ctrl-C: nothing left to stop
        pass
    finally:
        logging.disable(logging.NOTSET)


def run_spark(
    tasks: list[MapTask], job: JobSettings, workers: int, progress: Progress | None
) -> LocalResult:
    """Run the job on Spark (master from SPARK_MASTER, default local[N]: N = workers, at most
    one thread per map task; more only cost threads, and --workers 100000 made the JVM fail
    to create them). ``workers`` is also the number of reduce partitions."""
    check_java()
    if "SPARK_MASTER" not in os.environ:
        workers = max(1, min(workers, len(tasks)))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this venv's packages
    # pyspark warns about pandas once its SQL types load; the job sends no pandas data
    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
    from pyspark import SparkConf

    master = os.environ.get("SPARK_MASTER", f"local[{workers}]")
    level = os.environ.get("SPARK_LOG_LEVEL", "ERROR")
    log_config = quiet_log_config(job.tmp, level)
    java_options = f"-Dlog4j2.configurationFile=file:{log_config}"
    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName("sentitop-preprocess")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", "2g"))
    )
    if "SPARK_MASTER" not in os.environ:  # a cluster's nodes keep their own local dirs
        scratch = os.path.join(job.tmp, "spark-local")  # removed with the job's folder on every
        os.makedirs(scratch, exist_ok=True)  # exit path: a Ctrl-C left /tmp/blockmgr-* behind
        conf.set("spark.local.dir", scratch)  # (SPARK_LOCAL_DIRS, when set, still wins)
        java_options += f" -Djava.io.tmpdir={scratch}"
    conf.set("spark.driver.extraJavaOptions", java_options)
    quiet, ctrl_c = _Py4JRootRecords(), _CtrlC()
    logging.getLogger().addFilter(quiet)
    py4j_logger = logging.getLogger("py4j")  # its own loggers' records skip the root's filter:
    py4j_level = py4j_logger.level  # "ERROR:py4j.clientserver ... BrokenPipeError" at a Ctrl-C
    py4j_logger.setLevel(logging.CRITICAL + 1)
    try:
        with ctrl_c:
            result = _run_job(tasks, job, workers, progress, conf, master, level)
    except Exception:
        if ctrl_c.pressed:  # py4j turned it into "Answer from Java side is empty"
            raise KeyboardInterrupt from None
        raise
    finally:
        logging.getLogger().removeFilter(quiet)
        py4j_logger.setLevel(py4j_level)
    if ctrl_c.pressed:  # it landed where Python ignores exceptions (a py4j finalizer)
        raise KeyboardInterrupt
    return result


class _CtrlC:
    """``with _CtrlC() as c:`` raises KeyboardInterrupt on SIGINT as Python does, and notes it
    in ``c.pressed``: one that lands in a py4j object's finalizer is printed as "Exception
    ignored" and lost, and the run went on to write its output (exit 0)."""

    def __init__(self) -> None:
        self.pressed = False
        self._previous: Any = None

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._raise)
        return self

    def _raise(self, signum: int, frame: Any) -> None:
        self.pressed = True
        raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def _run_job(
    tasks: list[MapTask],
    job: JobSettings,
    workers: int,
    progress: Progress | None,
    conf: Any,
    master: str,
    level: str,
) -> LocalResult:
    """Start the context, run the map/reduce steps, encode the part here."""
    sc = _start_context(conf, master)
    sc.setLogLevel(level)
    try:
        rows = (
            sc.parallelize(tasks, max(1, len(tasks)))
            .mapPartitions(lambda it: _map_partition(it, job))
            .reduceByKey(_combine, numPartitions=workers)
            .map(lambda item: _reduce(item, job))
            .cache()
        )
        words = Counter(
            dict(rows.flatMap(_train_words).map(lambda w: (w, 1)).reduceByKey(add).collect())
        )
        collected = rows.collect()
    except BaseException as exc:  # a Ctrl-C (as itself or as a py4j error), a failed task
        _stop_quietly(sc)
        if type(exc).__name__ == "Py4JJavaError" and "No space left on device" in str(exc):
            raise OSError(errno.ENOSPC, "No space left on device (Spark's scratch)") from None
        raise
    sc.stop()
    part = ReducedPart()
    stats = MapStats()
    for key, value in collected:
        if key == ERROR_KEY:
            _raise_task_error(value)
    for key, value in collected:
        if key == STATS_KEY:
            stats.merge(value)
        else:
            part.add(value[0], value[1])
    part.finish()
    part.train_words = Counter()
    if progress:
        progress(stats.input_bytes, stats.read)
    vocab = select_vocab(words, job.vocab_size)
    return LocalResult(stats, part.counts, vocab, [encode_part(part, vocab, job, 0)])

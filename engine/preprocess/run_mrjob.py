"""The mrjob runners (inline, hadoop, emr): de-duplication and vocabulary counting as MRJob
steps over the same pure functions as the local runner; the driver encodes and writes HDF5.

Steps: (1) map each raw file (mapper_raw, in-mapper combining) → text → rating counts; reduce
by text → mode rating, label, split, content words. (2) map rows → training word counts
(in-mapper combining), reduce → word totals; rows and stats pass through. On hadoop/emr the
`engine` package must be importable on the nodes (e.g. `--py-files sentitop.zip` or a bootstrap
action that installs sentitop); s3:// inputs are read by mrjob."""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import posixpath
import shutil
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from mrjob.job import MRJob
from mrjob.parse import is_uri
from mrjob.step import MRStep

from engine.errors import ConfigError, InputError
from engine.preprocess.dedupe import order_key, pack_counts, unpack_counts
from engine.preprocess.mapper import MapStats, map_task
from engine.preprocess.readers import MapTask, is_gzip
from engine.preprocess.records import RecordSpec
from engine.preprocess.reduce import LabelRule, ReducedPart, reduce_one, select_vocab
from engine.preprocess.text import content_words

if TYPE_CHECKING:
    from engine.config import PreprocessConfig
    from engine.preprocess.job import JobSettings
    from engine.preprocess.pool_worker import Progress
    from engine.preprocess.run_local import LocalResult

Key = list[str]


def stats_to_json(stats: MapStats) -> dict[str, Any]:
    """MapStats as plain JSON values."""
    return {
        "read": stats.read,
        "skipped": stats.skipped,
        "examples": {k: [list(e) for e in v] for k, v in stats.examples.items()},
        "split_lines": [[f, s, n] for (f, s), n in stats.split_lines.items()],
        "file_skips": [[f, r, n] for (f, r), n in stats.file_skips.items()],
        "input_bytes": stats.input_bytes,
        "titles": stats.titles,
    }


def stats_from_json(data: dict[str, Any]) -> MapStats:
    """Inverse of stats_to_json."""
    return MapStats(
        read=data["read"],
        skipped=dict(data["skipped"]),
        examples={k: [(e[0], e[1], e[2]) for e in v] for k, v in data["examples"].items()},
        split_lines={(f, s): n for f, s, n in data["split_lines"]},
        file_skips={(f, r): n for f, r, n in data.get("file_skips", [])},
        input_bytes=data["input_bytes"],
        titles=data.get("titles", 0),
    )


class PreprocessJob(MRJob):  # type: ignore[misc]
    """De-duplicate reviews and count training words (settings in --settings as JSON)."""

    def configure_args(self) -> None:
        """--settings: inputs, specs, stopwords, test_fraction, max_line_bytes as JSON."""
        super().configure_args()
        self.add_passthru_arg("--settings", default="{}", help="job settings as JSON")

    def load_args(self, args: Any) -> None:
        """Decode --settings once per task."""
        super().load_args(args)
        settings = json.loads(self.options.settings)
        self.inputs: list[str] = settings.get("inputs", [])
        self.uris: list[list[str]] = settings.get("uris", [[p] for p in self.inputs])
        self.specs = [RecordSpec(**s) for s in settings.get("specs", [])]
        self.stop = frozenset(w.encode() for w in settings.get("stopwords", []))
        self.test_fraction = float(settings.get("test_fraction", 0.1))
        self.max_line_bytes = int(settings.get("max_line_bytes", 1 << 20))

    def steps(self) -> list[MRStep]:
        """Dedupe (per-file map, per-text reduce), then vocabulary counting."""
        return [
            MRStep(mapper_raw=self.map_file, reducer=self.reduce_text),
            MRStep(
                mapper_init=self.init_words,
                mapper=self.map_row,
                mapper_final=self.final_words,
                reducer=self.reduce_words,
            ),
        ]

    def _file_index(self, uri: str) -> int:
        """The input a mapper's file is, by the URIs mrjob may hand over for it (never by a
        bare file name: folders often hold files of the same name)."""
        for index, names in enumerate(self.uris):
            if uri in names:
                return index
        uploaded = posixpath.basename(uri)  # a copy on HDFS/S3 keeps mrjob's upload name
        for index, names in enumerate(self.uris):
            if uploaded in names[1:2]:
                return index
        raise ValueError(f"mrjob handed over {uri!r}, which is none of the inputs {self.inputs}")

    def map_file(self, path: str, uri: str) -> Iterator[tuple[Key, Any]]:
        """One raw file → (["T", text], per-rating counts) per distinct text, and its stats."""
        index = self._file_index(uri)
        spec = self.specs[index]
        if path in self.uris[index][ESCAPED_FROM:]:  # inline hands over the escaped name
            path = self.uris[index][2]  # the file's absolute path (the task runs elsewhere)
        agg: dict[bytes, int] = {}
        stats = MapStats()
        task = MapTask(index, path, 0, os.path.getsize(path), is_gzip(path), 0)
        map_task(task, spec, self.max_line_bytes, agg, stats)
        slots = spec.rating_max - spec.rating_min + 1
        for text, packed in agg.items():
            yield ["T", text.decode()], unpack_counts(packed, slots)
        yield ["S", ""], stats_to_json(stats)

    def reduce_text(self, key: Key, values: Iterator[Any]) -> Iterator[tuple[Key, Any]]:
        """Sum counts of one text → its row; merge stats."""
        if key[0] == "S":
            merged = MapStats()
            for value in values:
                merged.merge(stats_from_json(value))
            yield key, stats_to_json(merged)
            return
        totals: list[int] = []
        for counts in values:
            totals = [a + b for a, b in zip(totals, counts, strict=True)] if totals else counts
        spec = self.specs[0]
        rule = LabelRule.of(spec)
        row, duplicates, _ = reduce_one(
            key[1].encode(), pack_counts(totals), rule, self.stop, self.test_fraction
        )
        if row is None:
            yield ["R", key[1]], [None, None, duplicates]
        else:
            yield ["R", key[1]], [row[2], row[3], duplicates]

    def init_words(self) -> None:
        """Start in-mapper word counts."""
        self.words: Counter[str] = Counter()

    def map_row(self, key: Key, value: Any) -> Iterator[tuple[Key, Any]]:
        """Count the words of training rows; pass everything through."""
        if key[0] == "R" and value[0] is not None and not value[1]:
            self.words.update(w.decode() for w in content_words(key[1].encode(), self.stop))
        yield key, value

    def final_words(self) -> Iterator[tuple[Key, Any]]:
        """Emit this mapper's word counts."""
        for word, n in self.words.items():
            yield ["W", word], n

    def reduce_words(self, key: Key, values: Iterator[Any]) -> Iterator[tuple[Key, Any]]:
        """Sum word counts; rows and stats pass through."""
        if key[0] == "W":
            yield key, sum(values)
        else:
            for value in values:
                yield key, value


def engine_zip(folder: str) -> str:
    """A zip of the `engine` package for the nodes' PYTHONPATH (mrjob --py-files); the nodes
    also need numpy, orjson and mrjob (e.g. --bootstrap 'sudo python3 -m pip install ...')."""
    root = Path(__file__).resolve().parents[1]
    target = Path(folder) / "engine.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, Path("engine") / path.relative_to(root))
    return str(target)


def upload_output(local_dir: str, uri: str) -> None:
    """Copy the finished dataset files to an s3:// folder (through mrjob's S3 filesystem)."""
    from mrjob.fs.s3 import S3Filesystem

    fs = S3Filesystem()
    for name in ("vocab.json", "stats.json", "dataset.h5"):  # dataset last: it marks completion
        fs.put(os.path.join(local_dir, name), uri.rstrip("/") + "/" + name)


class _NoConfigNotice(logging.Filter):
    """Drops mrjob's "No configs specified for inline runner" (without an mrjob.conf, the usual
    case, it is noise, and with no logging set up Python printed it on the terminal) and its
    "Error while reading from FILE:" between blank lines (the error raised names the file)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for those notices; every other record passes."""
        said = record.getMessage().strip()
        return not said.startswith(("No configs specified for ", "Error while reading from "))


QUIETED_LOGGERS = ("mrjob.conf", "mrjob.inline", "mrjob.local")
"""mrjob's loggers that :class:`_NoConfigNotice` filters."""


@contextlib.contextmanager
def _no_config_notice() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in QUIETED_LOGGERS]
    quiet = _NoConfigNotice()
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)


ESCAPED_FROM = 4
"""Index of the first glob-escaped name in an input's input_uris() list (computed in the
calling process: an inline task runs in another working folder)."""


def escaped_names(path: str) -> set[str]:
    """How mrjob may name a local input run_mrjob gave it glob-escaped (``[`` → ``[[]``, so
    mrjob's glob finds a name with glob characters as itself): as given, or made absolute."""
    escaped = glob.escape(path)
    return {escaped, os.path.abspath(escaped), glob.escape(os.path.abspath(path))}


def input_uris(inputs: list[str]) -> list[list[str]]:
    """Per input, what mrjob may name it in a mapper: the path as given (an s3:// URI stays
    itself) and, for a local file, the name mrjob's upload manager gives its copy on HDFS/S3
    (``reviews-1.jsonl`` for a second ``reviews.jsonl``), its absolute path (inline) and
    ``file://`` URI, and for a name with glob characters (``[``, ``*``, ``?``) the escaped
    forms mrjob was given."""
    from mrjob.parse import to_uri
    from mrjob.setup import name_uniquely

    uploaded: dict[str, str] = {}
    result = []
    for path in inputs:
        if is_uri(path):
            result.append([path])
            continue
        if path not in uploaded:
            uploaded[path] = name_uniquely(path, set(uploaded.values()), unhide=True)
        names = [path, uploaded[path], os.path.abspath(path), to_uri(path)]
        result.append(names + sorted(escaped_names(path) - {path}))
    return result


def conf_paths(extra_args: list[str]) -> list[str]:
    """The mrjob config files named in ``--mrjob-arg`` values (--conf-path X, =X, -c X)."""
    paths = []
    for i, arg in enumerate(extra_args):
        if arg.startswith("--conf-path="):
            paths.append(arg.split("=", 1)[1])
        elif arg in ("--conf-path", "-c") and i + 1 < len(extra_args):
            paths.append(extra_args[i + 1])
    return paths


def check_conf_paths(extra_args: list[str]) -> None:
    """InputError naming a --conf-path that is no readable file (mrjob's own failure read
    "cannot write to the scratch folder")."""
    for path in conf_paths(extra_args):
        if not os.path.isfile(path):
            why = "is a folder" if os.path.isdir(path) else "does not exist"
            raise InputError(
                f"--mrjob-arg --conf-path: {path} {why}",
                hint="give the path of an mrjob.conf file, or leave --conf-path out",
            )


def hadoop_missing(command: str) -> ConfigError:
    """The error for --runner hadoop without Hadoop's command line."""
    return ConfigError(
        f"--runner hadoop needs Hadoop's command line: {command!r} was not found",
        hint="install Hadoop and put its bin/ on PATH or set HADOOP_HOME (or pass "
        "--mrjob-arg=--hadoop-bin=PATH); without a Hadoop cluster use --runner local "
        "(one machine), spark, or emr",
    )


def check_mrjob_run(cfg: PreprocessConfig, extra_args: list[str]) -> None:
    """What refuses an mrjob run before it starts (and before its progress bar): an input name
    the upload cannot find, a --conf-path that is no file, Hadoop's missing command."""
    if cfg.runner in ("hadoop", "emr"):
        globbed = [p for p in cfg.inputs if not is_uri(p) and glob.escape(p) != p]
        if globbed:  # mrjob's upload reads the escaped name as a file name: not found
            raise InputError(
                f"{globbed[0]}: --runner {cfg.runner} cannot upload a file whose name holds "
                "glob characters ([, *, ?)",
                hint="rename or link it without them, or use --runner local / inline / spark",
            )
    check_conf_paths(extra_args)
    if cfg.runner == "hadoop":
        check_hadoop(extra_args)


def check_hadoop(extra_args: list[str]) -> None:
    """ConfigError before the job starts when mrjob would not find `hadoop` (as it looks: the
    HADOOP_* folders, then PATH) and no --hadoop-bin is given: it was said under an empty
    progress bar, after the job's set-up."""
    if any(arg.startswith("--hadoop-bin") for arg in extra_args):
        return
    from mrjob.fs.hadoop import HadoopFilesystem

    found = HadoopFilesystem().get_hadoop_bin()
    if found == ["hadoop"] and shutil.which("hadoop") is None:  # mrjob's last resort
        raise hadoop_missing("hadoop")


def _make_runner(mr: PreprocessJob, extra_args: list[str]) -> Any:
    """mr.make_runner(), with an mrjob.conf that is no YAML named as bad input."""
    try:
        return mr.make_runner()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        named = conf_paths(extra_args)
        raise InputError(
            f"{named[-1] if named else 'mrjob.conf'}: not a valid mrjob config "
            f"({getattr(exc, 'problem', None) or 'YAML error'}{where})",
            hint="an mrjob.conf is YAML or JSON: "
            "https://mrjob.readthedocs.io/en/latest/guides/configs-basics.html",
        ) from None


def run_mrjob(
    cfg: PreprocessConfig, job: JobSettings, progress: Progress | None, extra_args: list[str]
) -> LocalResult:
    """Run PreprocessJob on cfg.runner (inline/hadoop/emr) and hand its output to the
    combine step as one HDF5 part (its caller ran :func:`check_mrjob_run` first)."""
    from engine.preprocess.run_local import LocalResult
    from engine.preprocess.writer import encode_part

    settings = {
        "inputs": cfg.inputs,
        "uris": input_uris(cfg.inputs),
        "specs": [s.to_dict() for s in job.specs],
        "stopwords": sorted(w.decode() for w in job.stop),
        "test_fraction": job.test_fraction,
        "max_line_bytes": job.max_line_bytes,
    }
    args = ["-r", cfg.runner, "--settings", json.dumps(settings), *extra_args]
    if cfg.runner in ("hadoop", "emr"):
        args += ["--py-files", engine_zip(job.tmp)]
    args += [path if is_uri(path) else glob.escape(path) for path in cfg.inputs]  # mrjob globs
    try:
        mr = PreprocessJob(args=args)
    except ValueError as exc:  # mrjob's argument parser: "unrecognized arguments: --foo"
        raise InputError(
            f"--mrjob-arg: mrjob refused {' '.join(extra_args)}: {exc}",
            hint=f"`python -m engine.preprocess.run_mrjob --help -r {cfg.runner}` lists the "
            "options mrjob takes; pass each as --mrjob-arg=--OPTION=VALUE",
        ) from None
    part = ReducedPart()
    words: Counter[bytes] = Counter()
    stats = MapStats()
    with _no_config_notice(), _make_runner(mr, extra_args) as runner:
        try:
            try:
                runner.run()
            except BaseException:  # mrjob keeps a failed job's scratch (cleanup_on_failure
                runner.cleanup(mode=["LOCAL_TMP"])  # NONE): copies of the input, 3x its size
                raise
        except FileNotFoundError as exc:  # not the scratch folder's fault: a missing command
            command = os.path.basename(str(exc.filename or ""))
            if cfg.runner != "hadoop" or not command.startswith("hadoop"):
                raise
            raise hadoop_missing(str(exc.filename)) from None
        for key, value in mr.parse_output(runner.cat_output()):
            if key[0] == "W":
                words[key[1].encode()] = value
            elif key[0] == "S":
                stats.merge(stats_from_json(value))
            else:
                text = key[1].encode()
                label, test, duplicates = value
                part.add(
                    None if label is None else (order_key(text), text, label, test), duplicates
                )
    part.finish()
    part.train_words = Counter()
    if progress:
        progress(stats.input_bytes, stats.read)
    vocab = select_vocab(words, job.vocab_size)
    return LocalResult(stats, part.counts, vocab, [encode_part(part, vocab, job, 0)])


if __name__ == "__main__":
    PreprocessJob.run()

"""The data stage of a run: synthetic reviews made once, preprocessed datasets cached by key."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import PreprocessConfig, config_to_dict
from engine.errors import InputError
from engine.events import Emitter, parse_event_line
from remote.clusters import Command, LocalCluster
from remote.clusters.base import NodeFailedError
from remote.profile import Profile
from remote.security import write_private_file


def cache_root() -> Path:
    """Where generated data and preprocessed datasets are kept between runs."""
    env = os.environ.get("SENTITOP_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("sentitop"))


@dataclass(frozen=True, slots=True)
class PreparedData:
    """A preprocessed dataset ready for training."""

    dataset_dir: Path
    """Folder with dataset.h5, vocab.json and stats.json."""
    cached: bool
    """True when an identical earlier preprocessing was reused."""
    stats: dict[str, Any]
    """stats.json of the dataset."""


def synthetic_inputs(profile: Profile, emitter: Emitter) -> list[str]:
    """The profile's input files, generating its synthetic reviews first when it asks for them;
    a relative path made absolute from the folder this command runs in (as the README and the
    check before the run read it: preprocessing runs in the run's node folder), a URL as given."""
    spec = profile.data.synthetic
    if spec is None:
        return [
            p if "://" in p else os.path.abspath(os.path.expanduser(p)) for p in profile.data.inputs
        ]
    folder = cache_root() / "synthetic"
    folder.mkdir(parents=True, exist_ok=True)
    share = "" if spec.distinct is None else f"-distinct{spec.distinct:g}"
    target = folder / f"reviews-{spec.size}-seed{spec.seed}{share}.jsonl"
    if not target.exists():
        from engine.synth import generate

        emitter.emit("stage_start", stage="synth", size=spec.size, seed=spec.seed)
        partial = target.with_suffix(f".part{os.getpid()}")
        counts = generate(partial, spec.size, seed=spec.seed, distinct=spec.distinct)
        os.replace(partial, target)
        emitter.emit(
            "stage_end",
            stage="synth",
            status="ok",
            seconds=counts.get("seconds"),
            records=counts.get("records"),
        )
    return [str(target)]


ADDED_SETTINGS = ("title_rows",)
"""Preprocessing settings added after datasets were first cached: left out of the key at their
default (engine.config), so an upgrade keeps a cached corpus (hours of preprocessing at
scale) instead of preprocessing it again for a setting it does not use."""


def dataset_key(cfg: PreprocessConfig) -> str:
    """A key that changes when the inputs (path, size, mtime) or any preprocessing setting do."""
    parts: dict[str, Any] = {
        k: v
        for k, v in config_to_dict(cfg).items()
        if k not in ("output", "workers", "runner", "max_skipped_share", "min_class_share")
        and not (k in ADDED_SETTINGS and v == PreprocessConfig.__dataclass_fields__[k].default)
    }
    stamps = []
    for path in _input_files(cfg.inputs):
        try:
            st = os.stat(path)
            stamps.append([os.path.abspath(path), st.st_size, int(st.st_mtime)])
        except OSError:
            stamps.append([path, None, None])
    parts["inputs"] = stamps
    blob = json.dumps(parts, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _input_files(inputs: list[str]) -> list[str]:
    """The files preprocessing will read: a folder's review files, so that editing one changes
    the key (a folder that cannot be expanded stands for itself; preprocessing names the
    problem)."""
    from engine.errors import InputError
    from engine.preprocess.inputs import expand_folders

    try:
        return expand_folders(inputs).files
    except InputError:
        return list(inputs)


def _complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in ("dataset.h5", "vocab.json", "stats.json"))


async def prepare_dataset(
    profile: Profile, run_dir: Path, emitter: Emitter, events_sink: Any
) -> PreparedData:
    """Generate (if synthetic) and preprocess the profile's data, reusing a cached result."""
    inputs = synthetic_inputs(profile, emitter)
    probe = profile.to_preprocess_config(cache_root() / "datasets" / "probe", inputs=inputs)
    out = cache_root() / "datasets" / dataset_key(probe)
    cfg = profile.to_preprocess_config(out, inputs=inputs)
    stamps, stamps_path = input_stamps(cfg.inputs), out.with_name(out.name + ".inputs.json")
    changed = _complete(out) and _stamps_changed(stamps_path, stamps)
    if changed:
        emitter.emit(
            "warning",
            stage="preprocess",
            code="inputs_changed",
            message=f"{changed}: its cached dataset ({out}) is preprocessed again",
        )
    elif _complete(out):
        if not stamps_path.is_file():  # cached before inputs were stamped: stamp them now
            write_private_file(stamps_path, json.dumps(stamps))
        stats = json.loads((out / "stats.json").read_text())
        emitter.emit("stage_start", stage="preprocess", runner=cfg.runner, inputs=cfg.inputs)
        for warning in stats.get("warnings") or []:  # a reused dataset keeps its warnings
            emitter.emit("warning", stage="preprocess", **warning)
        emitter.emit("summary", stage="preprocess", cached=True, **stats)
        emitter.emit("stage_end", stage="preprocess", status="ok", seconds=0.0, cached=True)
        return PreparedData(out, True, stats)
    if cfg.runner == "emr":
        from remote.emr import run_emr_preprocess

        await run_emr_preprocess(profile, cfg, run_dir=run_dir, emitter=emitter)
    else:
        await _preprocess_here(cfg, run_dir, events_sink)
    if not _complete(out):
        raise InputError(f"preprocessing finished but {out} lacks dataset.h5/vocab.json/stats.json")
    write_private_file(stamps_path, json.dumps(stamps))  # as they were before it read them
    return PreparedData(out, False, json.loads((out / "stats.json").read_text()))


def input_stamps(inputs: list[str]) -> list[list[Any]]:
    """[path, size, mtime_ns, ctime_ns, inode] of each input file. The cache key holds size and
    whole-second mtime only (so that it stays stable across releases); a file rewritten in place
    keeping both (`cp -p`, `rsync -t`, `tar x` restore mtimes) still moves its ctime, which no
    tool can set, so these stamps tell that the cached dataset is of other content."""
    stamps: list[list[Any]] = []
    for path in _input_files(inputs):
        try:
            st = os.stat(path)
        except OSError:
            stamps.append([path, None, None, None, None])
            continue
        file = os.path.abspath(path)
        stamps.append([file, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
    return stamps


def _stamps_changed(path: Path, stamps: list[list[Any]]) -> str | None:
    """Which input changed since the dataset cached under the same key was made from it (its
    stamps in ``path``), or None: none did, or the dataset predates stamps."""
    try:
        before = {row[0]: row for row in json.loads(path.read_text())}
    except (OSError, ValueError, TypeError, IndexError):
        return None
    for row in stamps:
        if before.get(row[0]) != row:
            return f"input {row[0]} changed since it was preprocessed (rewritten in place)"
    return None


async def _preprocess_here(cfg: PreprocessConfig, run_dir: Path, events_sink: Any) -> None:
    """Run ``python -m engine.jobs preprocess`` as a supervised local process."""
    config_path = run_dir / "preprocess_config.json"
    write_private_file(config_path, json.dumps(config_to_dict(cfg), indent=2))
    cluster = LocalCluster(["local"])
    async with cluster:
        await cluster.start(run_dir, events=events_sink)
        command = Command(
            argv=(sys.executable, "-m", "engine.jobs", "preprocess", str(config_path)),
            env=cluster.code_env("local"),
        )
        try:
            await cluster.run({"local": command}, stage="preprocess")
        except NodeFailedError as exc:
            if exc.node_exit_code == 2:  # its message, without the event lines around it
                said = [line for line in exc.tail if parse_event_line(line) is None][-5:]
                own = [i for i, line in enumerate(said) if line.startswith(f"{InputError.title}: ")]
                said = said[own[-1] :] if own else said  # (not its error event's copy before it)
                hints = [line.strip()[6:] for line in said if line.strip().startswith("hint: ")]
                text = [line.removeprefix(f"{InputError.title}: ") for line in said]
                raise InputError(
                    "preprocessing rejected its input: "
                    + "\n".join(line for line in text if not line.strip().startswith("hint: ")),
                    hint="; ".join(hints) or None,
                ) from None
            raise

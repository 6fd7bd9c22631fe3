"""Continuing a stopped run: which run may be resumed, with which profile, and the hint to do it.

`sentitop run --resume RUN` starts a new run folder whose training continues from RUN's last
checkpoint (``RUN/train/checkpoints/latest.pt``: written there by a local run, fetched there
after each checkpoint from a remote rank 0). The new run reuses the cached dataset, puts the
checkpoint where rank 0 resumes from it, and its summary covers the whole training (the trainer
restores the epochs done, their history and their time from the checkpoint). The resumed run
keeps its own folder and cost; the new one's summary names it (``resumed_from``).

A run resumed once or more is one training spread over a chain of run folders
(remote.resume_chain): a run a later one continued is not resumed again.
"""

from __future__ import annotations

import dataclasses
import json
import math
import zipfile
from pathlib import Path
from typing import Any

from engine.config import TrainConfig
from engine.errors import ConfigError, DivergedError, InputError, SentitopError
from engine.events import has_live_writer, read_events
from engine.sentiment.resume_checks import refuse_fewer_epochs
from remote.checkpoint_keeper import NODE_CHECKPOINT
from remote.profile import Profile, load_profile
from remote.resume_chain import continued_by, read_leg, resume_chain
from remote.run_folder import EVENTS_FILE, SUMMARY_FILE, events_of, resolve_run_dir

PROFILE_FILE = "profile.yaml"
"""The resolved profile a run folder records at its start."""
DIVERGED_HINT = (
    "start a new run with a lower train.lr (or more train.warmup_steps); a resume keeps the "
    "run's own learning rate"
)
"""What to do about a run that diverged."""
SAME_SECTIONS = ("data", "preprocess")
"""Profile sections a resumed run must share with the run it continues (the same dataset)."""


def resumable_run(ref: str | Path, runs_dir: str | Path | None = None) -> Path:
    """The folder of run ``ref`` when it can be resumed: it recorded its profile, stopped
    before its end and left a checkpoint; InputError saying why not otherwise."""
    try:
        folder = resolve_run_dir(ref, want=PROFILE_FILE, root=runs_dir)
    except InputError as exc:
        trained = Path(ref).expanduser()
        if (trained / "train_config.json").is_file():  # what `sentitop train` writes
            exc.message = (
                f"{trained} is a `sentitop train` run (train_config.json, no profile.yaml); "
                "`sentitop run --resume` continues a `sentitop run`"
            )
            exc.hint = f"`sentitop train --run-dir {trained} --resume` continues it"
        raise
    if has_live_writer(folder / EVENTS_FILE):
        raise InputError(
            f"{folder}: still running; only a stopped run can be resumed",
            hint="stop it first (Ctrl-C, or s in the dashboard), then resume it",
        )
    summary = _read_json(folder / SUMMARY_FILE)
    if (summary.get("status") or _ended(folder)) == "ok":  # (summary.json lost: the events)
        raise InputError(
            f"{folder}: finished ok; there is nothing to resume",
            hint="to train longer, start a new run with more epochs",
        )
    if not (folder / NODE_CHECKPOINT).is_file():
        stopped = summary.get("status") or "stopped"
        kept = summary.get("checkpoints")
        if isinstance(kept, str) and "failed" in kept:  # written on a node, never copied here
            raise InputError(
                f"{folder}: no checkpoint here ({NODE_CHECKPOINT} is missing): {kept}",
                hint=f"copy that file to {folder / NODE_CHECKPOINT} and resume again, or start "
                f"it again: sentitop run {folder / PROFILE_FILE}",
            )
        raise InputError(
            f"{folder}: {stopped} before its first checkpoint ({NODE_CHECKPOINT} is missing); "
            "there is nothing to resume from",
            hint=f"start it again: sentitop run {folder / PROFILE_FILE}",
        )
    if (why := diverged(folder)) is not None:
        raise InputError(
            f"{folder}: training diverged ({why}); its checkpoint would diverge the same way",
            hint=DIVERGED_HINT,
        )
    later = continued_by(folder)
    if later is not None:
        raise InputError(
            f"{folder}: already resumed by run {later.folder.name} ({later.status}); resuming "
            "it again would train the same epochs twice and pay for them twice",
            hint=f"continue the newest run of its chain: sentitop run --resume {later.folder}"
            if later.status != "ok"
            else "its training finished there; start a new run to train longer",
        )
    checkpoint = folder / NODE_CHECKPOINT
    if not looks_like_checkpoint(checkpoint):  # every rank would fail on it
        raise InputError(
            f"{checkpoint} cannot be read as a checkpoint (truncated, or not a torch save): "
            "resuming from it would start the nodes only to fail",
            hint=f"restore it from a copy (a remote node's own copy, if it is still up), or "
            f"start the run again: sentitop run {folder / PROFILE_FILE}",
        )
    return folder.absolute()


def resumable_or_torn_down(ref: str | Path, runs_dir: str | Path | None = None) -> Path:
    """:func:`resumable_run`; when it refuses a run whose launcher was killed on cloud
    machines, what that run left is terminated (remote.teardown.tear_down_refused) and the
    refusal says so: a resume would have terminated them first, and a refusal must not leave
    them billing."""
    try:
        return resumable_run(ref, runs_dir)
    except InputError as refused:
        try:
            folder = resolve_run_dir(ref, want=PROFILE_FILE, root=runs_dir)
        except SentitopError:
            raise refused from None
        if _read_json(folder / SUMMARY_FILE).get("status") or _ended(folder):
            raise  # its launcher ended it, and tore its machines down on the way out
        from remote.teardown import tear_down_refused

        if said := tear_down_refused(folder):
            refused.message += f". Also: {said}"
        raise


def looks_like_checkpoint(path: Path) -> bool:
    """Whether ``path`` can be a torch save, read without torch: a zip whose directory is whole,
    that holds a pickle (``*/data.pkl``, as torch.save writes it) and whose every entry matches
    its CRC. A truncated, foreign or damaged file is not, and loading it would fail in every
    rank (reading it costs about a tenth of a second per 50 MB, less than a node's start)."""
    try:
        with zipfile.ZipFile(path) as saved:
            names = saved.namelist()
            if not any(name == "data.pkl" or name.endswith("/data.pkl") for name in names):
                return False
            return saved.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError, NotImplementedError):
        return False


def resume_profile(folder: Path, given: Profile | None) -> Profile:
    """The profile to resume ``folder`` with: ``given`` when its data and preprocessing equal
    the run's (other settings, such as epochs or nodes, may change), else the run's own."""
    recorded = load_profile(folder / PROFILE_FILE)
    if given is None:
        return recorded
    old, new = recorded.resolved(), given.resolved()
    differ = [k for k in SAME_SECTIONS if old.get(k) != new.get(k)]
    if old.get("train", {}).get("model") != new.get("train", {}).get("model"):
        differ.append("train.model")
    if differ:
        raise InputError(
            f"{given.where} differs from the run in {folder} in {', '.join(differ)}: its "
            "checkpoint was trained on that data with that model",
            hint=f"resume with the run's own profile: sentitop run --resume {folder}",
        )
    return given


def keep_run_settings(cfg: TrainConfig, profile: Profile, resumed: Path) -> TrainConfig:
    """``cfg`` with the settings the ``resumed`` run trained with where the profile leaves them
    to the engine's defaults, which may have changed since: its trainer's last ``train_start``
    event says which. The sample order (length buckets on or off; a run whose events do not
    say predates that default: random batches), so a run goes on in its own order instead of
    redoing its interrupted epoch in the other one (the trainer's guard when the orders
    differ); and the learning rate (``reference_lr``, or before that field the event's
    batch-scaled ``lr`` scaled back), so a resumed run's schedule does not jump."""
    events = resumed / EVENTS_FILE
    read = read_events(events) if events.is_file() else ()
    starts = [e for e in read if e.get("type") == "train_start"]
    last = starts[-1] if starts else {}
    if profile.train.length_buckets is None:  # chosen: another order redoes its epoch
        said = [e["length_buckets"] for e in starts if isinstance(e.get("length_buckets"), bool)]
        cfg = dataclasses.replace(cfg, length_buckets=said[-1] if said else False)
    if profile.train.lr is None and (lr := _recorded_lr(last, cfg.lr_reference_batch)):
        cfg = dataclasses.replace(cfg, lr=lr)
    return cfg


def _recorded_lr(start: dict[str, Any], reference_batch: int) -> float | None:
    """The learning rate at the reference batch a ``train_start`` event says, if it does."""
    reference, scaled, batch = (
        _positive(start.get(k)) for k in ("reference_lr", "lr", "global_batch")
    )
    if reference is not None:
        return reference
    if scaled is not None and batch is not None:
        return scaled * reference_batch / batch
    return None


def _positive(value: Any) -> float | None:
    """``value`` when it is a finite number above 0 (not a bool), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf:
        return float(value)
    return None


def resume_hint(run_dir: Path) -> str | None:
    """What to run to continue ``run_dir`` (None when it left no checkpoint); for a run that
    diverged, what to do instead."""
    checkpoint = run_dir / NODE_CHECKPOINT
    if not checkpoint.is_file():
        return None
    if not looks_like_checkpoint(checkpoint):  # resuming would fail as resumable_run says
        return (
            f"{checkpoint} cannot be read as a checkpoint (truncated?): nothing to continue "
            f"from; start it again: sentitop run {run_dir / PROFILE_FILE}"
        )
    if diverged(run_dir) is not None:
        return f"training diverged: {DIVERGED_HINT}"
    at = checkpoint_at(run_dir)
    where = f" (epochs done: {at[0]})" if at is not None else ""
    return f"checkpoint kept{where}; continue with: sentitop run --resume {run_dir}"


def diverged(run_dir: Path) -> str | None:
    """The message of a rank that said the run diverged (loss or weights no longer finite),
    from the run's events; None when none did."""
    if not (run_dir / EVENTS_FILE).is_file():
        return None
    for event in read_events(run_dir / EVENTS_FILE):
        if event.get("type") == "error" and event.get("title") == DivergedError.title:
            return str(event.get("message") or "the loss is no longer finite")
    return None


def _ended(run_dir: Path) -> str | None:
    """The status of the run's last ``run_end`` event (None: none, or no events)."""
    if not (run_dir / EVENTS_FILE).is_file():
        return None
    ends = [e for e in read_events(run_dir / EVENTS_FILE) if e.get("type") == "run_end"]
    status = ends[-1].get("status") if ends else None
    return status if isinstance(status, str) else None


def checkpoint_at(run_dir: Path) -> tuple[int, int] | None:
    """(whole epochs, steps into the next) of the newest checkpoint of ``run_dir`` (a run
    folder, or a `sentitop train` run dir), from its events; None when unknown."""
    at = None
    events = events_of(run_dir)  # a run's train/ folder: the run folder's events
    if not events.is_file():
        return None
    for event in read_events(events):
        if event.get("type") in ("checkpoint", "checkpoint_stored"):
            epoch, step = event.get("epoch"), event.get("step") or 0
            if isinstance(epoch, int) and isinstance(step, int):
                at = (epoch, step)
    return at


def refuse_fewer_epochs_than_done(run_dir: Path, epochs: int) -> None:
    """Before any rank starts: ConfigError (engine.sentiment.resume_checks) when the newest
    checkpoint of ``run_dir`` holds more training than ``epochs`` asks for."""
    if (at := checkpoint_at(run_dir)) is not None:
        refuse_fewer_epochs(*at, epochs)


def refuse_other_dataset_than(
    run_dir: Path, dataset_dir: Path, max_train: int | None, *, hint: str | None = None
) -> None:
    """Before any rank starts: ConfigError when ``dataset_dir`` is not the dataset the
    checkpoint of ``run_dir`` (a run folder, or a `sentitop train` folder) trained on: its copy
    of vocab.json differs, or its events record other training samples (those of the run that
    trained the checkpoint: see :func:`_trained_by`). A profile's input
    rewritten since the stop is preprocessed again for `run --resume`; `train --resume` may be
    given another --data. The checkpoint would go on over other rows or other word ids."""
    from engine.sentiment.splits import train_rows

    hint = hint or (
        f"the inputs or the preprocessing settings changed since {run_dir.name} stopped: "
        "restore the inputs it was trained on to resume it, or start a new run on these"
    )
    source = _trained_by(run_dir)
    train = source / "train" if (source / "train").is_dir() else source
    kept, given = train / "vocab.json", dataset_dir / "vocab.json"
    if kept.is_file() and given.is_file() and kept.read_bytes() != given.read_bytes():
        raise ConfigError(
            f"--resume: {dataset_dir} is not the dataset {run_dir} was trained on (its "
            "vocab.json differs from the run's copy)",
            hint=hint,
        )
    trained = rows = None
    try:
        rows = train_rows(dataset_dir, max_train)
        for event in read_events(events_of(source)):
            if event.get("type") == "train_start" and isinstance(event.get("n_train"), int):
                trained = event["n_train"]
    except (OSError, ValueError, KeyError):
        pass  # unreadable or missing: the checks and loaders that follow (the trainer's) say so
    if trained is not None and rows is not None and rows != trained:
        raise ConfigError(
            f"--resume: {dataset_dir} has {rows:,} training samples but {run_dir} trained on "
            f"{trained:,}: it is not the run's dataset",
            hint=hint,
        )


def _trained_by(run_dir: Path) -> Path:
    """The run whose ranks trained the checkpoint of ``run_dir``: itself, or, for a run whose
    own resume was refused before any rank started (it holds the checkpoint it was given, but
    no vocab.json copy and no train_start), the newest run before it in its resume chain that
    trained; resuming such a run was checked against nothing and failed in a rank (exit 1)."""
    leg = read_leg(run_dir)
    chain = resume_chain(leg) if leg is not None else None
    for folder in [leg.folder for leg in reversed(chain.legs)] if chain else [run_dir]:
        train = folder / "train" if (folder / "train").is_dir() else folder
        if (train / "vocab.json").is_file() or _trained(folder):
            return folder
    return run_dir


def _trained(run_dir: Path) -> bool:
    try:
        return any(e.get("type") == "train_start" for e in read_events(events_of(run_dir)))
    except (OSError, ValueError):
        return False


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}

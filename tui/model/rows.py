"""Plain rows for the Profiles, Prices and Runs tables, and the loaders that build them.

Textual-free: thread workers call these loaders; the headless CLI can use them too. The
loaders adapt `remote.profile`, `remote.pricing` and run folders to flat rows.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.errors import InputError, SentitopError
from engine.events import has_live_writer
from remote.review.outcome import summary_outcome
from remote.review.summary_check import check_summary
from remote.run_record import last_evaluated_epoch
from remote.runs_store import summary_problem
from tui.model.run_history import Stamp, device_kind, run_stamp, scan_events
from tui.model.run_state import RunState


@dataclass(slots=True)
class ProfileRow:
    """One profile file: what it asks for, what it costs, or why it does not validate."""

    name: str
    """Profile name (file stem when it does not parse)."""
    path: str
    """File path."""
    cluster: str = ""
    """Cluster kind (local, ssh, ec2, emr)."""
    nodes: int = 0
    """Node count."""
    gpus: int = 0
    """GPUs in total (0 for a CPU profile)."""
    usd_per_hour: float | None = None
    """Estimated $/h (None = free or unknown)."""
    ranks: int = 0
    """Training processes (the world size)."""
    device: str = ""
    """What the ranks train on: "CPU", "2× A10G", "T4 + A10G"."""
    errors: list[str] = field(default_factory=list)
    """Validation errors (empty when valid)."""
    warnings: int = 0
    """Warnings of a valid profile (things that will not stop it, but may surprise)."""
    detail: str = ""
    """Extra lines shown in the detail pane (instance types, epochs...)."""
    profile: Any = None
    """The validated profile object, handed to the runner on `r`."""
    resume_from: Path | None = None
    """A stopped run's folder whose checkpoint the run continues from (Runs screen, `c`)."""
    stamp: tuple[int, int] | None = None
    """(mtime_ns, size) of the file when it was read (None: not read from a file)."""

    @property
    def valid(self) -> bool:
        """True when the profile validated."""
        return not self.errors

    def changed_on_disk(self) -> bool:
        """True when the file changed (or went) since this row was read from it."""
        return self.stamp is not None and file_stamp(Path(self.path)) != self.stamp


def file_stamp(path: Path) -> tuple[int, int] | None:
    """(mtime_ns, size) of ``path``; None when it cannot be read."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


@dataclass(slots=True)
class PriceRow:
    """One instance type of the catalog."""

    instance: str
    gpu_model: str
    gpus: int
    gpu_memory_gib: float
    vcpus: int
    memory_gib: float
    on_demand_usd: float | None
    spot_usd: float | None
    source: str
    """live | cache | bundled | user."""
    age_s: float | None
    """Seconds since the price was recorded (None = unknown)."""
    usd_per_epoch: float | None = None
    """Predicted $ of one epoch of the selected profile's workload on one instance (None: not
    predicted, or no profile selected)."""


@dataclass(slots=True)
class EpochCosts:
    """Predicted $ per epoch of one profile's workload on one instance of each GPU type."""

    profile: str
    workload: str
    usd_per_epoch: dict[str, float]
    band: float
    """Widest band factor of the figures (1 = all measured)."""


@dataclass(slots=True)
class RunRow:
    """One recorded run in the runs folder."""

    run: str
    path: str
    profile: str = ""
    gpus: int = 0
    """Training workers (ranks): GPUs of a GPU run, processes of a CPU run."""
    device: str = ""
    """What the workers trained on: GPU, CPU or "" (unknown)."""
    epochs: int = 0
    """Epochs completed (for a stopped run: as far as its events or checkpoint got)."""
    hours: float = 0.0
    usd: float | None = None
    accuracy: float | None = None
    accuracy_epoch: int | None = None
    """Set for a run stopped before its end: ``accuracy`` is this epoch's (from 1), not the
    finished model's (shown dimmed)."""
    f1: float | None = None
    samples_per_s: float | None = None
    status: str = ""
    shown_status: str = ""
    """The status as the Runs screen shows it: "ok, below majority 0.800" for a finished run
    whose model does not beat the majority rate, "ok, 2 warnings" for one whose summary warns
    (remote.review.outcome), else ``status``."""
    brief_status: str = ""
    """``shown_status`` in fewer words for a narrow column ("below majority"); "": the same."""
    status_style: str = ""
    """Rich style of the shown status (remote.review.outcome.Outcome.style): "" for plain."""
    resumed_from: str = ""
    """The stopped run it continued (summary.json ``resumed_from``), "" when none."""
    chain_hours: float | None = None
    """A resumed run: hours of its whole chain of runs (its own included; None: not resumed)."""
    chain_usd: float | None = None
    """A resumed run: $ of its whole chain of runs (its own included)."""
    chain_runs: int = 0
    """A resumed run: how many runs its chain holds (itself included; 0: not resumed)."""
    chain_unpriced: tuple[str, ...] = ()
    """A resumed run: runs of its chain whose $ is not counted (folder gone, no summary)."""
    resumed_by: str = ""
    """The run that continued this stopped one ("" when none): its $ counts in that chain."""
    problem: str = ""
    """Why its summary.json cannot be read ("" when it can, or there is none)."""


def _node_count(profile: Any) -> int:
    nodes = getattr(profile, "nodes", None)
    if isinstance(nodes, (list, tuple)):
        return sum(int(getattr(n, "count", 1) or 1) for n in nodes)
    return 1


def _call(func: Any, *args: Any) -> Any:
    """``func(*args)``, None when it is missing or cannot price/size the profile."""
    if not callable(func):
        return None
    try:
        return func(*args)
    except (TypeError, ValueError, KeyError, LookupError, SentitopError):
        return None


def profile_row(
    profile: Any, path: Path, catalog: Any = None, warnings: list[str] | None = None
) -> ProfileRow:
    """A row for a validated profile (duck-typed over remote.profile.Profile)."""
    provider = str(getattr(profile, "provider", None) or getattr(profile, "cluster", "") or "")
    gpus, device = _devices(profile, provider, catalog)
    ranks = _call(getattr(profile, "world_size", None), catalog)
    if ranks is None:
        nodes = getattr(profile, "nodes", None) or []
        ranks = sum(int(getattr(n, "count", 1) or 1) * max(1, _gpus(n, catalog)) for n in nodes)
    usd = _call(getattr(profile, "hourly_usd", None), catalog)
    lines = [f"warning: {w}" for w in warnings or []]
    description = getattr(profile, "description", "")
    if description:
        lines.insert(0, str(description))
    return ProfileRow(
        name=str(getattr(profile, "name", path.stem)),
        path=str(path),
        cluster=provider,
        nodes=_node_count(profile),
        gpus=gpus,
        usd_per_hour=float(usd) if usd else None,
        ranks=int(ranks or 0),
        device=device,
        warnings=len(warnings or []),
        detail="\n".join(lines),
        profile=profile,
    )


def _gpus(node: Any, catalog: Any) -> int:
    """GPUs of one machine of a node (group): as given, else the catalog's, else 0."""
    given = getattr(node, "gpus", None)
    if given is not None:
        return int(given)
    spec = _spec(node, catalog)
    return int(spec.gpus) if spec is not None else 0


def _spec(node: Any, catalog: Any) -> Any:
    name = getattr(node, "instance_type", None)
    return _call(getattr(catalog, "specs", None), name) if name else None


def _devices(profile: Any, provider: str, catalog: Any) -> tuple[int, str]:
    """GPUs in total and what the ranks train on ("CPU", "2× A10G", "T4 + A10G")."""
    if provider == "local":  # CUDA when asked, or (auto) when this machine shows a GPU
        wanted = getattr(getattr(profile, "train", None), "device", None) or "auto"
        gpu = wanted == "cuda" or (wanted == "auto" and Path("/dev/nvidia0").exists())
        return 0, "GPU" if gpu else "CPU"
    models: Counter[str] = Counter()
    for node in getattr(profile, "nodes", None) or []:
        count, per = int(getattr(node, "count", 1) or 1), _gpus(node, catalog)
        spec = _spec(node, catalog)
        model = (getattr(spec, "gpu_model", "") or "GPU") if per else "CPU"
        models[model] += count * per if per else count
    label = " + ".join(f"{n}× {m}" if n > 1 and m != "CPU" else m for m, n in models.items())
    return sum(n for m, n in models.items() if m != "CPU"), label


def load_profile_rows(folder: Path | None) -> list[ProfileRow]:
    """Every profile file of ``folder`` via remote.profile.list_profiles, valid ones first."""
    from remote.pricing import load_catalog
    from remote.profile import list_profiles

    catalog = load_catalog()
    rows: list[ProfileRow] = []
    for entry in list_profiles(folder):
        stamp = file_stamp(entry.path)
        if entry.profile is not None:
            row = profile_row(entry.profile, entry.path, catalog, list(entry.warnings))
            row.stamp = stamp
            unpriced = entry.profile.price_error(catalog)  # `run` refuses it: not valid
            row.errors = (
                [unpriced.message.removeprefix(f"{entry.profile.where}: ")] if unpriced else []
            )
            rows.append(row)
            continue
        problems = [
            f"line {p.line}: {p.path or 'profile'}: {p.message}"
            if p.line
            else f"{p.path or 'profile'}: {p.message}"
            for p in entry.problems
        ]
        rows.append(
            ProfileRow(
                name=entry.path.stem,
                path=str(entry.path),
                errors=problems or [entry.error or "does not validate"],
            )
        )
    rows.sort(key=lambda r: (not r.valid, r.name))
    return rows


@dataclass(slots=True)
class PriceList:
    """Catalog rows plus what the user should know about them (fallbacks, missing prices)."""

    rows: list[PriceRow]
    warnings: list[str] = field(default_factory=list)


def price_rows(book: Any, now: float | None = None) -> list[PriceRow]:
    """One row per catalog type of a remote.pricing PriceBook (source and age of each price)."""
    now = time.time() if now is None else now
    rows = []
    for name in book.catalog.names():
        spec = book.catalog.get(name, book.region) or book.catalog.specs(name)
        od = book.on_demand_price(name)
        spot = book.spot_price(name)
        rows.append(
            PriceRow(
                instance=name,
                gpu_model=spec.gpu_model if spec else "",
                gpus=spec.gpus if spec else 0,
                gpu_memory_gib=spec.gpu_memory_gib if spec else 0.0,
                vcpus=spec.vcpus if spec else 0,
                memory_gib=spec.memory_gib if spec else 0.0,
                on_demand_usd=od.usd_per_hour if od else None,
                spot_usd=spot.usd_per_hour if spot else None,
                source=od.source if od else (spec.source if spec else "?"),
                age_s=od.age_s(now) if od else None,
            )
        )
    return rows


def load_price_rows(refresh: bool = False) -> PriceList:
    """The catalog with cached/bundled prices; ``refresh`` fetches live ones (boto3) first."""
    from remote.pricing import price_book

    # the dashboard refreshes with `u`: "this command reads no network (`sentitop prices
    # --refresh` …)" spoke of a command nobody typed
    book = price_book(
        live=refresh, refresh=refresh, not_fetched="not asked for yet (press u to fetch them)"
    )
    return PriceList(price_rows(book), list(book.warnings))


def load_epoch_costs(profile_path: Path, runs_dir: Path) -> EpochCosts:
    """$ per epoch on each GPU type for a profile's workload (the planner, with past runs)."""
    from remote.profile import load_profile
    from remote.review.planner import epoch_costs
    from remote.runs_store import list_runs

    profile = load_profile(profile_path)
    workload, costs = epoch_costs(profile, list_runs(runs_dir))
    band = max((b for _, b in costs.values()), default=1.0)
    return EpochCosts(profile.name, workload, {k: v for k, (v, _) in costs.items()}, band)


def read_run_state(run_dir: Path, capacity: int = 4096) -> RunState:
    """A RunState built from a run folder's events.jsonl (InputError when it has none)."""
    path = run_dir / "events.jsonl"
    if not path.is_file():
        raise InputError(f"{run_dir}: no events.jsonl", hint="pass a run folder under runs/")
    state = RunState(capacity=capacity)
    from tui.replay import read_events_fast

    state.ingest_many(read_events_fast(path))
    return state


RowCache = dict[str, tuple[Stamp, "RunRow | None"]]
"""Run folder -> (its stamp, its row) from an earlier load (None: not a run folder)."""


def load_run_rows(runs_dir: Path, cache: RowCache | None = None) -> list[RunRow]:
    """Rows for every run folder (summary.json when present, else derived from events); a
    folder whose stamp matches ``cache`` is not read again (the cache is updated in place)."""
    rows: list[RunRow] = []
    if not runs_dir.is_dir():
        return rows
    cache = {} if cache is None else cache
    folders = sorted(p for p in runs_dir.iterdir() if p.is_dir())
    for gone in set(cache) - {str(p) for p in folders}:
        del cache[gone]
    for run_dir in folders:
        stamp = run_stamp(run_dir)
        known = cache.get(str(run_dir))
        row = known[1] if known is not None and known[0] == stamp else run_row(run_dir)
        if (
            row is not None
            and row.status == "running"
            and not has_live_writer(run_dir / "events.jsonl")
        ):  # its files did not change, but its process died since
            row = replace(row, status="unfinished")
        cache[str(run_dir)] = (stamp, row)
        if row is not None:
            rows.append(row)
    return link_chains(rows)


def link_chains(rows: list[RunRow]) -> list[RunRow]:
    """``rows`` with each resumed run's chain totals and each resumed run's successor (copies:
    cached rows stay as read, since a later resume changes an older run's row)."""
    from remote.resume_chain import Leg, resume_chain, resumed_by

    legs = {
        Path(r.path): Leg(Path(r.path), r.resumed_from or None, r.usd, r.hours * 3600.0, r.status)
        for r in rows
    }
    later = resumed_by(legs.values())
    out = []
    for row in rows:
        chain = resume_chain(legs[Path(row.path)], legs)
        by = later.get(Path(row.path).absolute().resolve())
        if by:  # a later run continued it: its figures are part of that run's chain
            row = replace(row, resumed_by=by[-1].folder.name)  # a copy: the cache keeps its own
        elif chain is not None:
            row = replace(  # a copy: the cached row stays as read
                row,
                chain_hours=chain.wall_s / 3600.0,
                chain_usd=chain.usd,
                chain_runs=len(chain.legs) + (1 if chain.missing else 0),
                chain_unpriced=tuple(chain.unpriced),
            )
        out.append(row)
    return out


UNREADABLE_SUMMARY = "bad summary.json"
"""Status of a run folder whose summary.json cannot be read (its figures come from events)."""
UNREADABLE_BRIEF = "bad summary"
"""That status where the column is narrower."""


def run_row(run_dir: Path) -> RunRow | None:
    """The row of one run folder; None when it holds neither summary.json nor events."""
    summary_path = run_dir / "summary.json"
    events_path = run_dir / "events.jsonl"
    data: Any = {}
    if summary_path.is_file():
        try:
            data = json.loads(summary_path.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                check_summary(data, summary_path)
        except (ValueError, InputError):  # broken JSON, a string where a number belongs
            data = None
    bad_summary = summary_path.is_file() and not isinstance(data, dict)
    if not isinstance(data, dict):
        data = {}
    if not data and events_path.is_file():
        data = read_run_state(run_dir).summary_row()
        if data.get("status") == "running" and not has_live_writer(events_path):
            data["status"] = "unfinished"  # no run_end and nobody writes: killed or crashed
    if bad_summary:  # figures from the events; `sentitop runs` leaves such a folder out
        data["status"] = UNREADABLE_SUMMARY
    if not data:
        return None
    train = data["train"] if isinstance(data.get("train"), dict) else {}
    device = data.get("device") or train.get("device")
    epochs = int(data.get("epochs") or 0)
    if not epochs or not device:  # an interrupted run has no train summary: ask its events
        facts = scan_events(events_path)
        epochs, device = epochs or facts.epochs_done, device or facts.device
    wall_s = data.get("wall_s")
    status = str(data.get("status") or "")
    accuracy = data.get("accuracy")
    known = isinstance(accuracy, int | float) and not isinstance(accuracy, bool)
    shown = summary_outcome(status, data, float(accuracy) if known else None)
    stopped = last_evaluated_epoch(data)  # a stopped run: its last evaluated epoch's figures
    return RunRow(
        run=run_dir.name,  # what replay, resume and `sentitop runs` name it by
        path=str(run_dir),
        profile=str(data.get("profile") or ""),
        gpus=int(data.get("gpus") or data.get("world_size") or 0),
        device=device_kind(device),
        epochs=epochs,
        hours=float(
            data.get("hours") or (wall_s / 3600.0 if isinstance(wall_s, int | float) else 0)
        ),
        usd=data.get("usd"),
        accuracy=data.get("accuracy") if stopped is None else stopped[0]["accuracy"],
        accuracy_epoch=None if stopped is None else stopped[1],
        f1=data.get("f1") if stopped is None else stopped[0].get("f1"),  # F1 read "—"
        samples_per_s=data.get("samples_per_s"),
        status=status,
        shown_status=shown.status,
        brief_status=UNREADABLE_BRIEF if bad_summary else shown.brief,
        status_style=shown.style if shown.status != status else "",  # said in other words
        resumed_from=str(data.get("resumed_from") or ""),
        problem=(summary_problem(summary_path) or "cannot be read") if bad_summary else "",
    )

"""The runs store: run folders (summary.json, events.jsonl, sweep.json) and imported CSV results.

A :class:`RunRecord` is what the review needs from one run, whether it was recorded by
``sentitop run``/``sweep`` in ``runs/<run-id>/`` or entered from a CSV of published results
(:func:`import_csv`, columns in :data:`CSV_COLUMNS`). Bad input raises ``InputError`` naming the
file, the line and the field.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from engine.errors import InputError
from engine.events import epochs_done_by, read_events
from remote.cost import peak_rate
from remote.pricing import Catalog, load_catalog
from remote.review.summary_check import check_summary
from remote.run_folder import SUMMARY_FILE, resolve_run_dir, runs_root
from remote.run_record import BILLINGS, RunRecord, groups_label, last_epoch_accuracy

EMBEDDINGS = "embeddings"
"""summary.json's `workload` of an embeddings run (`sentitop embed`); sentiment runs have none."""
SWEEP_FILE = "sweep.json"
"""Written into a run folder by `sentitop sweep`: sweep id, mode, index."""
MAX_EPOCHS = 100_000
"""Most epochs an imported CSV row may claim (a row stands for that many epoch times: 1e30
was an OverflowError, 1e8 a list of 800 MB)."""

CSV_COLUMNS: dict[str, str] = {
    "run": "unique id of the row (required)",
    "instance_type": "EC2 type, e.g. g3.4xlarge (required)",
    "count": "instances (default 1)",
    "gpus": "GPUs (= training workers) over all instances (default: count x catalog GPUs)",
    "gpu_model": "GPU model (default: from the catalog)",
    "epochs": "epochs the seconds cover (required, >= 1)",
    "seconds": "training seconds for those epochs (required, > 0)",
    "usd_per_hour": "price of one instance (default: catalog on-demand)",
    "billing": "per_second (default) or hours_2dp",
    "usd": "published cost of the run (optional; compared with the computed one)",
    "time_to_threshold_s": "seconds until the loss threshold (optional)",
    "accuracy": "test accuracy 0..1 (optional)",
    "f1": "test F1 0..1 (optional)",
    "samples_per_s": "training throughput (optional)",
    "n_train": "training samples per epoch (optional)",
    "mode": "strong (default) or weak",
    "series": "sweep/series id (optional)",
    "profile": "profile / workload name (optional)",
    "note": "free text (optional)",
}
"""Columns of an import CSV; lines starting with # are comments."""


def runs_dir(root: str | Path | None = None) -> Path:
    """The runs folder (see remote.run_folder.runs_root)."""
    return runs_root(root)


def list_runs(
    root: str | Path | None = None,
    unreadable: list[str] | None = None,
    unfinished: list[str] | None = None,
) -> list[RunRecord]:
    """Every run folder under ``root`` that has a summary.json, oldest first; a folder whose
    files cannot be read (a run killed mid-write, a damaged file) is left out, its error's
    message appended to ``unreadable`` when given, so one bad folder never hides the rest; the
    names of folders with events but no summary yet (running, or killed before their end) go to
    ``unfinished`` when given."""
    folder = runs_dir(root)
    if not folder.is_dir():
        return []
    records = []
    catalog = load_catalog()  # once: a broken price file is one error, not every run "unreadable"
    for path in sorted(folder.iterdir()):
        if not (path / "summary.json").is_file():
            if unfinished is not None and (path / "events.jsonl").is_file():
                unfinished.append(path.name)
            continue
        try:
            records.append(load_run(path, catalog))
        except InputError as exc:
            if unreadable is not None:
                unreadable.append(exc.message)
    return sorted(records, key=lambda r: (r.started or 0.0, r.run_id))


def resolve_runs(
    refs: list[str], root: str | Path | None = None, catalog: Catalog | None = None
) -> list[RunRecord]:
    """Runs named by folder paths, run ids, sweep ids or CSV files (in that order of lookup)."""
    out: list[RunRecord] = []
    known: list[RunRecord] | None = None
    catalog = catalog or load_catalog()  # a broken price file: its own error, not "no such run"
    for ref in refs:
        path = Path(ref).expanduser()
        if path.suffix.lower() == ".csv":
            out.extend(import_csv(path, catalog))
            continue
        try:
            out.append(load_run(resolve_run_dir(ref, want=SUMMARY_FILE, root=root), catalog))
            continue
        except InputError as exc:
            if len(path.parts) > 1:  # a path, not an id: no sweep of that name
                raise
            not_a_run = exc
        known = list_runs(root) if known is None else known
        sweep = [r for r in known if r.sweep == ref]
        if not sweep:
            raise InputError(
                f"{not_a_run.message}; no sweep id {ref!r} or CSV file of that name either",
                hint="`sentitop runs` lists the run ids and sweep ids",
            )
        out.extend(sweep)
    return _once_each(out)


def _once_each(records: list[RunRecord]) -> list[RunRecord]:
    """Each run folder once, where first named (a run named twice, or by its id and by its
    sweep id, is one run: a report would count it twice)."""
    seen: set[Path] = set()
    out: list[RunRecord] = []
    for record in records:
        if record.source == "folder":
            folder = record.path.resolve()
            if folder in seen:
                continue
            seen.add(folder)
        out.append(record)
    return out


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"{path.parent}: not a run folder ({path.name} missing)",
            hint="pass a folder made by `sentitop run` or `sentitop sweep` (see `sentitop runs`)",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise InputError(_json_problem(path, exc), hint=_JSON_HINT) from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


def summary_problem(path: Path) -> str | None:
    """Why the summary.json at ``path`` cannot be used, as `sentitop runs` says it (the message
    of its InputError); None when it can."""
    try:
        check_summary(_read_json(path), path)
    except InputError as exc:
        return exc.message
    return None


_JSON_HINT = "a run stopped while writing it leaves it cut short: run it again, or leave it out"


def _json_problem(path: Path, exc: json.JSONDecodeError) -> str:
    """Where and why ``path`` is not JSON: 'invalid JSON at line 3, column 17 (invalid control
    character)'; JSONDecodeError's ``msg`` ends in a dangling 'at', its place said here."""
    if not exc.doc.strip():
        return f"{path}: empty file, not JSON"
    what = exc.msg.removesuffix(" at").removesuffix(" starting")
    return (
        f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno} "
        f"({what[:1].lower()}{what[1:]})"
    )


def _num(data: dict[str, Any], key: str) -> float | None:
    value = data.get(key)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _clean(value: Any) -> Any:
    """``value`` without None/empty entries (raw and resolved profiles compare equal)."""
    if isinstance(value, dict):
        items = {k: _clean(v) for k, v in value.items()}
        return {k: v for k, v in items.items() if v not in (None, [], {})}
    return value


def workload_keys(config: dict[str, Any]) -> tuple[str, str]:
    """(workload, data_key) of a resolved profile: model + seq_len; data + preprocessing."""
    train = config.get("train") or {}
    pre = config.get("preprocess") or {}
    workload = json.dumps(
        _clean({"model": train.get("model"), "seq_len": pre.get("seq_len")}), sort_keys=True
    )
    data = json.dumps(
        _clean(
            {
                "data": config.get("data"),
                "vocab": pre.get("vocab_size"),
                "seq_len": pre.get("seq_len"),
                "test": pre.get("test_fraction"),
                "max": train.get("max_train_samples"),
            }
        ),
        sort_keys=True,
    )
    return workload, data


def embeddings_keys(summary: dict[str, Any]) -> tuple[str, str]:
    """(workload, data_key) of an embeddings run: never equal to a sentiment run's keys."""
    settings = {k: summary.get(k) for k in ("mode", "encoder", "dim", "batch")}
    workload = json.dumps({EMBEDDINGS: settings}, sort_keys=True)
    data = json.dumps({EMBEDDINGS: {"vocab": summary.get("vocab")}}, sort_keys=True)
    return workload, data


def _straggle(balance: Any) -> str:
    """The summary's injected straggle ({"1": 3.0}) as "1:3" (several: "0:2 1:3"), else ""."""
    given = balance.get("straggle") if isinstance(balance, dict) else None
    if not isinstance(given, dict):
        return ""
    return " ".join(f"{rank}:{factor:g}" for rank, factor in sorted(given.items())
                    if isinstance(factor, int | float) and factor != 1)  # fmt: skip


def _other_configuration(epoch: dict[str, Any], workers: int) -> bool:
    """True for an epoch record of a `sentitop train` folder that its final configuration did
    not train whole: split by a mid-epoch resume, or trained on another number of ranks."""
    size = epoch.get("world_size")
    return bool(epoch.get("resumed_mid_epoch")) or (isinstance(size, int) and size != workers)


def load_run(folder: str | Path, catalog: Catalog | None = None) -> RunRecord:
    """A run folder's summary, profile, sweep tag and events as a RunRecord."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise InputError(
            f"{folder}: no such run folder", hint="`sentitop runs` lists the recorded runs"
        )
    summary = _read_json(folder / "summary.json")
    check_summary(summary, folder / "summary.json")
    embeddings = summary.get("workload") == EMBEDDINGS
    # flat summaries: an embeddings run's, and the trainer's own (`sentitop train --run-dir`)
    flat = embeddings or ("train" not in summary and "per_epoch" in summary)
    raw_train = summary if flat else summary.get("train")
    train: dict[str, Any] = raw_train if isinstance(raw_train, dict) else {}
    config = _profile_config(folder)
    catalog = catalog or load_catalog()
    provider = str(summary.get("provider") or config.get("provider") or "local")
    workers = int(summary.get("world_size") or train.get("world_size") or 1)
    instance_type, instances, gpus, gpu_model = _hardware(config, provider, workers, catalog)
    groups = _groups_label(config) if provider != "local" else ""
    if str(train.get("device") or "").startswith("cpu"):  # GPU machines whose ranks used none
        gpu_model = ""  # (no CUDA in their torch): a CPU rate filed under the GPU misled plans
    per_epoch = train.get("per_epoch") or []
    timed = [
        e for e in per_epoch if isinstance(e, dict) and isinstance(e.get("seconds"), int | float)
    ]
    if flat and not embeddings:  # `train --resume` in place: epochs of another configuration
        own = [e for e in timed if not _other_configuration(e, workers)]  # (a run's chain of
    else:  # folders is folded later: remote.review.chains)
        own = timed
    epoch_seconds = [float(e["seconds"]) for e in own]
    lines = (summary.get("cost") or {}).get("lines") or []
    rate = _num(summary, "usd_per_hour") or 0.0
    train_lines = [x for x in lines if x.get("stage") != "preprocess"]
    if all("start_s" in x and "stop_s" in x for x in train_lines):  # the concurrent peak
        train_rate = peak_rate(
            (float(x["start_s"]), float(x["stop_s"]), float(x.get("usd_per_hour", 0)))
            for x in train_lines
        )
    else:  # summaries written before the lines had times
        train_rate = sum(float(x.get("usd_per_hour", 0)) for x in train_lines)
    sweep = _read_json(folder / SWEEP_FILE) if (folder / SWEEP_FILE).is_file() else {}
    workload, data_key = embeddings_keys(summary) if embeddings else workload_keys(config)
    record = RunRecord(
        run_id=folder.name,
        source="folder",
        path=folder,
        profile=str(summary.get("profile") or config.get("name") or folder.name),
        provider=provider,
        status=str(summary.get("status") or "unknown"),
        instance_type=instance_type,
        instances=instances,
        workers=workers,
        gpus=gpus,
        gpu_model=gpu_model,
        groups=groups,
        leftovers=summary.get("leftovers") is True,
        usd_per_hour=train_rate or rate,
        epochs=int(summary.get("epochs") or len(epoch_seconds)),
        epoch_seconds=epoch_seconds,
        mode="weak" if sweep.get("mode") == "weak" else "strong",
        sweep=str(sweep["sweep"]) if sweep.get("sweep") else None,
        wall_s=_num(summary, "wall_s"),
        time_to_threshold_s=_num(summary, "time_to_threshold_s"),
        loss_threshold=_num(train, "loss_threshold"),
        accuracy=_num(summary, "accuracy"),
        f1=_num(summary, "f1"),
        samples_per_s=_num(summary, "samples_per_s"),
        mixed_world=isinstance(sizes := summary.get("world_sizes"), list) and len(set(sizes)) > 1,
        epochs_left_out=len(timed) - len(own),
        stopped_accuracy=last_epoch_accuracy(summary),
        n_train=int(train["n_train"]) if isinstance(train.get("n_train"), int) else None,
        global_batch=int(train["global_batch"])
        if isinstance(train.get("global_batch"), int)
        else None,
        usd=_num(summary, "usd"),
        started=_num(summary, "started"),
        workload=workload,
        data_key=data_key,
        task=EMBEDDINGS if embeddings else "sentiment",
        words_per_s=_num(summary, "words_per_s"),
        pip_loss=_num(summary, "pip_loss"),
        pip_loss_initial=_num(summary, "pip_loss_initial"),
        embed_mode=str(summary.get("mode") or "") if embeddings else "",
        recoveries=int(summary.get("recoveries") or 0),
        downtime_s=_num(summary, "downtime_s") or 0.0,
        usd_lost=_num(summary, "usd_lost") or 0.0,
        resumed_from=str(summary["resumed_from"]) if summary.get("resumed_from") else None,
        straggle=_straggle(train.get("balance") or summary.get("balance")),
    )
    if (folder / "events.jsonl").is_file():
        try:
            _add_events(record, folder / "events.jsonl")
        except OSError as exc:  # (a listing leaves the folder out, saying this)
            raise InputError(
                f"{folder / 'events.jsonl'}: cannot be read: {exc.strerror or exc}"
            ) from None
    return record


def _profile_config(folder: Path) -> dict[str, Any]:
    path = folder / "profile.yaml"
    if not path.is_file():
        return {}
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: cannot read the resolved profile ({exc})") from None
    return data if isinstance(data, dict) else {}


def _hardware(
    config: dict[str, Any], provider: str, workers: int, catalog: Catalog
) -> tuple[str | None, int, int, str]:
    """(instance_type, instances, gpus, gpu_model) of a resolved profile."""
    if provider == "local":
        return config.get("instance_type"), 1, 0, ""
    nodes = [n for n in config.get("nodes") or [] if isinstance(n, dict)]
    first: str | None = None
    instances = gpus = 0
    models: set[str] = set()
    for node in nodes:
        name = node.get("instance_type")
        specs = catalog.specs(name) if name else None
        first = first or name
        count = int(node.get("count") or 1)
        given = node.get("gpus")
        per = int(given) if given is not None else (specs.gpus if specs else 0)
        instances += count
        gpus += per * count
        if specs is not None and specs.gpu_model:
            models.add(specs.gpu_model)
    return first, max(1, instances), min(gpus, workers), "+".join(sorted(models))


def _groups_label(config: dict[str, Any]) -> str:
    """groups_label of a resolved profile's machine groups."""
    return groups_label(
        [
            (str(n["instance_type"]), int(n.get("count") or 1), bool(n.get("spot")))
            for n in config.get("nodes") or []
            if isinstance(n, dict) and n.get("instance_type")
        ]
    )


def _add_events(record: RunRecord, path: Path) -> None:
    """Phases, the loss curve, eval and preprocessing seconds from events.jsonl; an event whose
    fields have the wrong type (a hand-edited or foreign line) is left out, not the run."""
    state: dict[str, float] = {}
    for event in read_events(path):
        try:
            _add_event(record, event, state)
        except (TypeError, ValueError, KeyError):
            continue


def _add_event(record: RunRecord, event: dict[str, Any], state: dict[str, float]) -> None:
    """One event into ``record`` (``state`` holds the train start time once seen)."""
    train_t0 = state.get("train_t0")
    kind = event.get("type")
    if kind == "train_start" or (  # runs recorded before `train_start` existed
        kind == "stage_start" and event.get("stage") == "train" and "rank" in event
    ):
        state["train_t0"] = float(event["t"])
        if isinstance(event.get("threads"), int):
            record.threads = int(event["threads"])
    elif (done := epochs_done_by(event)) is not None:
        record.epochs_in_events = max(record.epochs_in_events, done)
    elif kind == "phase":
        record.phases.append(event)
        if event.get("rank") == 0 and isinstance(event.get("eval"), int | float):
            record.eval_s += float(event["eval"])
    elif kind == "step" and train_t0 is not None:
        loss = event.get("smoothed_loss", event.get("loss"))
        if isinstance(loss, int | float):
            record.curve.append((float(event["t"]) - train_t0, float(loss)))
    elif (
        kind == "stage_end"
        and event.get("stage") in ("synth", "preprocess")
        and "rank" not in event
    ):
        record.prep_s += float(event.get("seconds") or 0.0)
        record.data_cached = record.data_cached or bool(event.get("cached"))


# ---------------------------------------------------------------------------- CSV import
def import_csv(path: str | Path, catalog: Catalog | None = None) -> list[RunRecord]:
    """Recorded runs from a CSV of published results (see :data:`CSV_COLUMNS`)."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8-sig")  # Excel starts a CSV with a BOM
    except FileNotFoundError:
        raise InputError(f"{path}: no such CSV file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    numbered = [
        (n, line)
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not numbered:
        raise InputError(f"{path}: no header row", hint=f"columns: {','.join(CSV_COLUMNS)}")
    reader = csv.reader(io.StringIO("\n".join(line for _, line in numbered)))
    rows = list(reader)
    header = [h.strip() for h in rows[0]]
    header_line = numbered[0][0]
    unknown = [h for h in header if h not in CSV_COLUMNS]
    missing = [c for c in ("run", "instance_type", "epochs", "seconds") if c not in header]
    if unknown or missing:
        raise InputError(
            f"{path}:{header_line}: bad header"
            + (f"; unknown column(s) {', '.join(unknown)}" if unknown else "")
            + (f"; missing column(s) {', '.join(missing)}" if missing else ""),
            hint=f"columns: {','.join(CSV_COLUMNS)}",
        )
    catalog = catalog or load_catalog()
    records: list[RunRecord] = []
    seen: dict[str, int] = {}
    for (line_no, _), values in zip(numbered[1:], rows[1:], strict=True):
        if len(values) != len(header):
            raise InputError(
                f"{path}:{line_no}: {len(values)} fields, the header has {len(header)}",
                hint="quote fields that contain commas",
            )
        row = {h: v.strip() for h, v in zip(header, values, strict=True)}
        record = _csv_record(row, path, line_no, catalog)
        if record.run_id in seen:
            raise InputError(
                f"{path}:{line_no}: run: {record.run_id!r} repeats line {seen[record.run_id]}"
            )
        seen[record.run_id] = line_no
        records.append(record)
    return records


class _Row:
    """Typed access to one CSV row; errors name file:line: field."""

    def __init__(self, row: dict[str, str], path: Path, line: int) -> None:
        self.row, self.path, self.line = row, path, line

    def fail(self, name: str, problem: str) -> InputError:
        return InputError(
            f"{self.path}:{self.line}: {name}: {problem}", hint=f"{name}: {CSV_COLUMNS[name]}"
        )

    def text(self, name: str, *, required: bool = False) -> str:
        value = self.row.get(name, "")
        if required and not value:
            raise self.fail(name, "is empty")
        return value

    def number(
        self,
        name: str,
        *,
        required: bool = False,
        integer: bool = False,
        low: float | None = None,
        high: float | None = None,
        strict_low: bool = False,
    ) -> float | None:
        value = self.text(name, required=required).replace("_", "").replace(",", "")
        if not value:
            return None
        try:
            number = float(value)
        except ValueError:
            raise self.fail(name, f"{value!r} is not a number") from None
        if not math.isfinite(number) or (integer and number != int(number)):
            raise self.fail(name, f"{value!r} is not {'an integer' if integer else 'finite'}")
        if low is not None and (number <= low if strict_low else number < low):
            raise self.fail(name, f"{value} must be {'>' if strict_low else '>='} {low:g}")
        if high is not None and number > high:
            raise self.fail(name, f"{value} must be <= {high:g}")
        return number

    def choice(self, name: str, allowed: tuple[str, ...]) -> str:
        value = self.text(name) or allowed[0]
        if value not in allowed:
            raise self.fail(name, f"{value!r} is not one of {', '.join(allowed)}")
        return value


def _csv_record(raw: dict[str, str], path: Path, line: int, catalog: Catalog) -> RunRecord:
    row = _Row(raw, path, line)
    run_id = row.text("run", required=True)
    instance_type = row.text("instance_type", required=True)
    specs = catalog.specs(instance_type)
    count = int(row.number("count", integer=True, low=1) or 1)
    gpus_given = row.number("gpus", integer=True, low=0)
    if gpus_given is None and specs is None:
        raise row.fail(
            "instance_type",
            f"{instance_type!r} is not in the catalog; give the "
            "gpus, gpu_model and usd_per_hour columns",
        )
    gpus = int(gpus_given if gpus_given is not None else specs.gpus * count)  # type: ignore[union-attr]
    price = row.number("usd_per_hour", low=0)
    if price is None:
        if specs is None or specs.on_demand_usd is None:
            raise row.fail("usd_per_hour", f"empty and no catalog price for {instance_type!r}")
        price = specs.on_demand_usd
    epochs = int(row.number("epochs", required=True, integer=True, low=1, high=MAX_EPOCHS) or 1)
    seconds = row.number("seconds", required=True, low=0, strict_low=True) or 0.0
    n_train = row.number("n_train", integer=True, low=1)
    return RunRecord(
        run_id=run_id,
        source="csv",
        path=path,
        line=line,
        profile=row.text("profile") or path.stem,
        provider="ec2",
        status="ok",
        instance_type=instance_type,
        instances=count,
        workers=max(1, gpus),
        gpus=gpus,
        gpu_model=row.text("gpu_model") or (specs.gpu_model if specs else ""),
        usd_per_hour=price * count,
        epochs=epochs,
        epoch_seconds=[seconds / epochs] * epochs,
        billing=row.choice("billing", BILLINGS),  # type: ignore[arg-type]
        mode=row.choice("mode", ("strong", "weak")),  # type: ignore[arg-type]
        sweep=row.text("series") or None,
        wall_s=seconds,
        time_to_threshold_s=row.number("time_to_threshold_s", low=0),
        accuracy=row.number("accuracy", low=0, high=1),
        f1=row.number("f1", low=0, high=1),
        samples_per_s=row.number("samples_per_s", low=0),
        n_train=int(n_train) if n_train is not None else None,
        usd=row.number("usd", low=0),
        note=row.text("note"),
        workload=row.text("profile") or path.stem,
        data_key=row.text("profile") or path.stem,
    )

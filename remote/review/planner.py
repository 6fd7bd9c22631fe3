"""Predict hours and $ of a profile, and of candidate configurations, before paying.

Where runs of the profile's workload on its hardware exist, the scaling model of
:mod:`remote.review.scaling` predicts from them. Otherwise — and for every GPU instance type
the catalog prices — a measured rate is transferred to the hardware by
:mod:`remote.review.transfer` (an estimate with a back-tested band). Candidate sets (single
types, mixed types, spot) come from :mod:`remote.review.candidates`.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.errors import InputError
from remote.pricing import Catalog, PriceBook, load_catalog
from remote.profile import UNSUPPORTED_GPUS, EC2Profile, Profile
from remote.review.backtest import STUDY_BATCH, STUDY_SAMPLES, study_runs
from remote.review.candidates import (
    SPOT_INTERRUPTIONS_PER_HOUR,
    Candidate,
    Choice,
    GpuJob,
    check_spot_rate,
    choose,
    cpu_target,
    gpu_candidates,
    gpu_prices,
    gpu_set,
    unsupported_note,
)
from remote.review.datasize import PrepEstimate
from remote.review.hardware import gpu_table
from remote.review.input_size import measure_inputs
from remote.review.metrics import billed_usd
from remote.review.money_text import duration_text, money
from remote.review.plan_data import (
    engine_default,
    n_train_of,
    own_prep_seconds,
    prep_estimates,
    workload_of,
)
from remote.review.plan_money import own_budget_notes, price_prep
from remote.review.scaling import (
    ErrorCheck,
    Measurement,
    ScalingModel,
    compute_units,
    fit,
    log_band,
    measure,
    prediction_errors,
    ring,
)
from remote.review.transfer import (
    CALIBRATION_HINT,
    Anchor,
    RateEstimate,
    Workload,
    bundled_anchors,
    transfer_rate,
)
from remote.run_record import RunRecord, groups_label
from remote.runs_store import workload_keys

__all__ = ["Candidate", "Plan", "compute_units", "fit", "measure", "plan_profile", "ring"]


@dataclass(slots=True)
class Plan:
    """The planner's answer for a profile."""

    profile: str
    epochs: int
    deadline_h: float | None
    target: Candidate
    target_wall_s: float | None
    """Predicted wall time of `sentitop run` of the profile (local: start to end)."""
    wall_parts: dict[str, float]
    candidates: list[Candidate]
    pick: Candidate | None
    inputs: list[str]
    errors: list[ErrorCheck]
    not_predicted: list[str]
    budget_usd: float | None = None
    choice: Choice | None = None
    prep: list[PrepEstimate] = field(default_factory=list)
    """Preprocessing per runner (with --data-size, or a synthetic size)."""
    prep_runner: str = "local"
    """The profile's own preprocessing runner (an EMR cluster's $ is part of its run's)."""
    n_train: int | None = None
    notes: list[str] = field(default_factory=list)
    """What the user should know: estimates, spot, how to tighten the band."""
    skipped: list[str] = field(default_factory=list)
    """Imported CSV rows not used, per file, and why (the CLI prints them on stderr)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready plan."""
        return {
            "profile": self.profile,
            "epochs": self.epochs,
            "deadline_h": self.deadline_h,
            "budget_usd": self.budget_usd,
            "n_train": self.n_train,
            "target": self.target.to_dict(),
            "target_wall_s": self.target_wall_s,
            "wall_parts": {k: round(v, 2) for k, v in self.wall_parts.items()},
            "candidates": [c.to_dict() for c in self.candidates],
            "pick": self.pick.to_dict() if self.pick else None,
            "pick_safe": self.choice.safe if self.choice else None,
            "infeasible": self.choice.message if self.choice and self.choice.message else None,
            "nearest": [c.to_dict() for c in self.choice.nearest] if self.choice else [],
            "preprocessing": [{**asdict(p), "seconds": round(p.seconds, 1)} for p in self.prep],
            "preprocessing_runner": self.prep_runner,
            "inputs": self.inputs,
            "notes": self.notes,
            "skipped_rows": self.skipped,
            "prediction_errors": [
                {
                    "run": e.run_id,
                    "workers": e.workers,
                    "what": e.what,
                    "predicted_s": round(e.predicted_s, 2),
                    "actual_s": round(e.actual_s, 2),
                    "error": round(e.error, 4),
                }
                for e in self.errors
            ],
            "not_predicted": self.not_predicted,
        }


# ---------------------------------------------------------------------------- helpers
def _train_groups(profile: Profile) -> list[tuple[str, int, bool]]:
    """(instance type, count, spot) of the training machines (EC2 groups, priced SSH nodes)."""
    if profile.provider == "local":
        return []
    if isinstance(profile, EC2Profile):
        return [(g.instance_type, g.count, g.spot) for g in profile.nodes]
    nodes = getattr(profile, "nodes", [])
    return [(t, 1, False) for t in (getattr(n, "instance_type", None) for n in nodes) if t]


def _check_known(profile: Profile, catalog: Catalog) -> None:
    unknown = [t for t, _, _ in _train_groups(profile) if t not in catalog]
    if unknown:
        known = ", ".join(catalog.names(gpu_only=True))
        raise InputError(
            f"{profile.source or profile.name}: instance type {', '.join(unknown)} is not in "
            f"the catalog; known GPU types: {known}",
            hint="fix the profile, or add the type with its gpus/gpu_model/vcpus to the user "
            "catalog (`sentitop prices --help` prints its path)",
        )


def _target_hardware(profile: Profile, catalog: Catalog) -> tuple[str, str | None, int]:
    """(hardware class, instance type, instance count) of a profile's training machines."""
    if profile.provider == "local":
        return "local CPU", getattr(profile, "instance_type", None), 1
    groups = _train_groups(profile)
    count = sum(getattr(n, "count", 1) for n in getattr(profile, "nodes", []))
    models = sorted({s.gpu_model for t, _, _ in groups if (s := catalog.specs(t)) and s.gpu_model})
    if not models and profile.provider == "ssh":
        return "ssh CPU", groups[0][0] if groups else None, count
    hardware = "+".join(models) or (f"CPU {groups[0][0]}" if groups else "unknown")
    return hardware, (groups[0][0] if groups else None), count


def _beaten_note(candidates: list[Candidate], target: Candidate) -> str | None:
    """A note naming the fastest configuration predicted at least 10 % faster than the
    profile's own for no more $ (the headline is the profile's own, slower one)."""
    better = [
        c
        for c in candidates
        if c is not target and c.usd <= target.usd and c.seconds <= 0.9 * target.seconds
    ]
    if not better:
        return None
    best = min(better, key=lambda c: (c.seconds, c.usd))

    longer = max(best.seconds, target.seconds)  # both in its unit: "0.51 h against 6.65 h"
    took, usual = duration_text(best.seconds, longer), duration_text(target.seconds, longer)
    return (
        f"{best.label} is predicted faster than the profile's own {target.label} "
        f"({took} against {usual}) for no more $ "
        f"({money(best.usd)} against {money(target.usd)}); --write-profile with a --deadline "
        "or --budget writes the pick as a profile"
    )


def label_of(profile: Profile, count: int, instance_type: str | None, workers: int) -> str:
    """The label of the profile's own configuration in the candidates table."""
    if profile.provider == "local":
        return f"local ×{workers} proc"
    if mixed := groups_label(_train_groups(profile)):  # as `runs` labels its runs
        return mixed
    if instance_type:
        return f"{count}×{instance_type}"
    return f"{profile.name} ({workers} proc)"  # SSH nodes: no instance type to name


def _matches(run: RunRecord, profile: Profile, workload: str) -> bool:
    return (
        run.status == "ok"
        and not run.mixed_world  # epochs on two world sizes: a wrong fit (+75 %, +161 %)
        and bool(run.epoch_seconds)
        and (run.workload == workload or (run.source == "csv" and run.workload == profile.name))
    )


def _study() -> tuple[float, float, list[ErrorCheck]]:
    """(all-reduce s per step and ring unit, count band log, leave-one-out) of the old study."""
    ms = [measure(r) for r in study_runs()]
    model = fit(ms, "M60")
    errors = prediction_errors(ms, "M60")
    steps = STUDY_SAMPLES / STUDY_BATCH
    return model.k / steps, log_band(errors), errors


def _skipped_rows(runs: list[RunRecord], used: list[RunRecord], profile: str) -> list[str]:
    """Per imported CSV file: how many of its rows the plan did not use, and why."""
    taken = {id(r) for r in used}
    by_file: dict[str, list[RunRecord]] = {}
    for run in runs:
        if run.source == "csv":
            by_file.setdefault(str(run.path), []).append(run)
    out: list[str] = []
    for path, rows in by_file.items():
        left = [r for r in rows if id(r) not in taken]
        if not left:
            continue
        lines = ", ".join(str(r.line) for r in left[:8]) + (", ..." if len(left) > 8 else "")
        names = ", ".join(sorted({repr(r.profile) for r in left}))
        out.append(
            f"{path}: {len(left)} of {len(rows)} row(s) skipped (line(s) {lines}): profile "
            f"{names} is not {profile!r}; a row without a `profile` value takes the file's "
            f"name ({Path(path).stem!r}): give its `profile` column {profile!r} to use it"
        )
    return out


def _training_rate(profile: Profile, book: PriceBook) -> float:
    return sum(
        line.total_usd_per_hour
        for line in profile.cost_lines(book)
        if line.stage in ("train", "all")
    )


def _prep_s(runs: list[RunRecord], *, cached: bool) -> float:
    values = [r.prep_s for r in runs if r.data_cached == cached]
    return statistics.median(values) if values else 0.0


def _measured(
    label: str,
    hardware: str,
    instance_type: str | None,
    count: int,
    workers: int,
    units: float,
    rate: float,
    model: ScalingModel,
    epochs: int,
    n_train: int | None,
    evals: int,
    band_log: float,
    basis: str,
    *,
    is_target: bool = False,
) -> Candidate:
    epoch_s = model.epoch_s(workers, units, n_train)
    seconds = epochs * epoch_s + evals * model.eval_s + model.fixed(workers)
    return Candidate(
        label,
        hardware,
        instance_type,
        count,
        workers,
        rate,
        epoch_s,
        seconds,
        billed_usd(seconds, rate),
        is_target,
        band=math.exp(band_log),
        basis=basis,
    )


def _gpu_anchors(models: dict[str, ScalingModel], workload: Workload) -> list[Anchor]:
    """Runs-store measurements on GPUs as transfer anchors (where the sample count is known)."""
    out: list[Anchor] = []
    table = gpu_table()
    for hw, model in models.items():
        if hw in table and model.n_train and model.compute_1 > 0:
            rate = model.n_train / model.compute_1
            out.append(
                Anchor(
                    hw,
                    workload,
                    rate,
                    table[hw].mem_bw_gbs,
                    "past runs",
                )
            )
    return out


def plan_profile(
    profile: Profile,
    runs: list[RunRecord],
    *,
    epochs: int | None = None,
    deadline_h: float | None = None,
    budget_usd: float | None = None,
    catalog: Catalog | None = None,
    book: PriceBook | None = None,
    data_size: int | None = None,
    spot_interruptions_h: float = SPOT_INTERRUPTIONS_PER_HOUR,
) -> Plan:
    """Predict the profile's run and the candidate configurations; pick under the constraints.

    Spot sets are priced with ``spot_interruptions_h`` interruptions per instance-hour
    (:func:`remote.review.candidates.spot_overhead`). ``data_size``: bytes of the input
    corpus (of generated reviews for a synthetic profile, like its ``synthetic.size``)."""
    check_spot_rate(spot_interruptions_h)
    catalog = catalog or load_catalog()
    book = book or PriceBook.from_catalog(catalog, profile.region)
    _check_known(profile, catalog)
    cfg = profile.to_train_config(".", ".")
    n_epochs = epochs or cfg.epochs
    evals = math.ceil(n_epochs / cfg.eval_every) if cfg.eval_every else 0
    wl_key, data_key = workload_keys(profile.resolved())
    hardware, instance_type, count = _target_hardware(profile, catalog)
    workload = workload_of(profile)
    matching = [r for r in runs if _matches(r, profile, wl_key)]
    by_hw: dict[str, list[Measurement]] = {}
    for run in matching:
        by_hw.setdefault(run.hardware, []).append(measure(run))
    inputs: list[str] = []
    models: dict[str, ScalingModel] = {}
    for hw, ms in by_hw.items():
        try:
            models[hw] = fit(ms, hw)
        except InputError as exc:
            inputs.append(f"{hw}: past runs not usable ({exc.message})")
    inputs = [line for m in models.values() for line in m.inputs] + inputs
    errors = [e for hw, ms in by_hw.items() if hw in models for e in prediction_errors(ms, hw)]
    same_data = [r for r in matching if r.data_key == data_key and r.n_train]
    sized = None
    if data_size is None and not same_data and profile.data.synthetic is None:
        sized = measure_inputs(list(profile.data.inputs))  # the files at hand
    n_train = n_train_of(profile, same_data, data_size, inputs, sized)
    prep_size, texts = data_size, None
    if prep_size is None and profile.data.synthetic is not None and not same_data:
        prep_size = profile.data.synthetic.size  # not measured on this data: estimated
    if sized is not None:
        prep_size, texts = sized.bytes, sized.lines
    prep = prep_estimates(profile, catalog, prep_size, texts)
    test = profile.preprocess.test_fraction
    test = float(engine_default("test_fraction")) if test is None else test
    sync_step, count_band, study_errors = _study()
    job = GpuJob(
        n_epochs,
        n_train,
        int(n_train * test / (1 - test)),
        evals,
        workload.batch,
        sync_step,
        count_band,
        spot_interruptions_h,
    )
    prices = gpu_prices(book, catalog)
    own_rate = _training_rate(profile, book)
    notes: list[str] = []
    parts: dict[str, float] = {}
    wall: float | None = None

    table = gpu_table()
    anchors = _gpu_anchors(models, workload) + bundled_anchors()
    rates: dict[str, RateEstimate] = {}
    not_predicted: list[str] = []
    for gpu in sorted({r.gpu_model for r in catalog.rows() if r.gpus > 0}):
        if gpu in table:
            rates[gpu] = transfer_rate(workload, gpu, anchors)
        else:
            not_predicted.append(f"{gpu}: not in the GPU table (remote/review/data/gpus.csv)")

    candidates: list[Candidate] = []
    if hardware in models:
        model = models[hardware]
        hw_errors = [e for e in errors if e.run_id in {m.run.run_id for m in by_hw[hardware]}]
        band = log_band(hw_errors) or count_band
        ids = ", ".join(m.run.run_id for m in by_hw[hardware])
        basis = f"measured on {hardware}: past runs {ids}; scaling model fitted to them"
        workers = profile.world_size(catalog)
        if model.n_train and n_train != model.n_train:  # the band is from runs at their size
            basis += (
                f"; scaled from their {model.n_train:,} to {n_train:,} training samples "
                f"(x{n_train / model.n_train:,.{0 if n_train > 10 * model.n_train else 2}f}, "
                "not measured at this size)"
            )
            if n_train > 10 * model.n_train:
                notes.append(
                    f"the band of {label_of(profile, count, instance_type, workers)} comes from "
                    f"runs on {model.n_train:,} training samples, {n_train / model.n_train:,.0f}x "
                    "fewer than planned: it says how well they predict one another, not how "
                    "per-sample time holds at this size (data reads, memory, caches); run one "
                    "epoch nearer the planned size to measure it"
                )
        n_for_model = n_train  # measured rates scale by samples (seconds per sample)
        if model.n_train is None:
            inputs.append(
                f"{hardware}: the past runs do not record their training-set size (n_train): "
                f"their epoch times are used as measured, not scaled to {n_train:,} samples"
            )
        units = compute_units(profile.provider, workers, profile.train.threads)
        label = label_of(profile, count, instance_type, workers)
        target = _measured(
            label,
            hardware,
            instance_type,
            count,
            workers,
            units,
            own_rate,
            model,
            n_epochs,
            n_for_model,
            evals,
            band,
            basis,
            is_target=True,
        )
        target.groups = _train_groups(profile)
        fixed = model.fixed(workers)
        own_prep = own_prep_seconds(prep, profile.preprocess.runner)  # the line printed below it
        parts = {
            "fixed (start-up, loading, teardown)": fixed,
            "preprocessing": (
                own_prep
                if own_prep is not None
                else _prep_s(same_data or matching, cached=bool(same_data))
            ),
            "training": n_epochs * target.epoch_s,
            "evaluation": evals * model.eval_s,
        }
        if model.fixed_s is not None:
            wall = sum(parts.values())
        else:
            inputs.append(
                "fixed start-up/teardown: not measured for this hardware (imported "
                "runs); hours below are training time only"
            )
        if hardware == "local CPU" and profile.provider == "local":
            cores = os.cpu_count() or 1
            for n in sorted({1, 2, cores} | set(model.compute_by_workers)):
                if n != workers:
                    u = compute_units("local", n, profile.train.threads)
                    candidates.append(
                        _measured(
                            f"local ×{n} proc",
                            hardware,
                            instance_type,
                            1,
                            n,
                            u,
                            own_rate,
                            model,
                            n_epochs,
                            n_for_model,
                            evals,
                            band,
                            basis,
                        )
                    )
    elif hardware in ("local CPU", "ssh CPU") or hardware.startswith("CPU "):
        target = cpu_target(
            profile, hardware, instance_type, count, workload, job, own_rate, catalog
        )
        inputs.append(
            ("past runs above not usable" if hardware in by_hw else "no past run of this workload")
            + " on this machine: predicted from the development host's measured rate"
        )
    else:
        groups = _train_groups(profile)
        own_prices = dict(prices)
        for name, _, spot in groups:
            price = book.hourly_usd(name, spot=spot)
            if price is not None:
                own_prices[(name, spot)] = price
            if spot and book.spot_price(name) is None:
                notes.append(
                    f"{name}: the profile asks for spot but no spot price is known; priced "
                    "on-demand (an upper bound)"
                )
        made = gpu_set(groups, catalog, rates, job, own_prices)
        if made is None:
            raise InputError(
                f"{profile.source or profile.name}: cannot predict "
                f"{', '.join(g[0] for g in groups)}: no price, or its GPU is not in the GPU "
                "table (remote/review/data/gpus.csv)",
                hint="add the type's price to the user catalog, or its GPU to the table",
            )
        target = replace(made, is_target=True)
        inputs.append(
            "fixed start-up/teardown of instances: not measured; hours are training "
            "and evaluation time only"
        )
    candidates.append(target)
    own_labels = {target.label}
    for cand in gpu_candidates(catalog, rates, job, prices):
        if cand.label not in own_labels:
            candidates.append(cand)
    for cand in candidates:
        cand.actual_s = [
            r.train_s / r.epochs * n_epochs
            + (r.wall_s - r.train_s if r.wall_s and r.source == "folder" else 0.0)
            for r in matching
            if r.label == cand.label
        ]
    prep_s = min((p.seconds for p in prep), default=0.0)
    prep = price_prep(prep, profile, book)
    own_runner = [p for p in prep if p.runner == profile.preprocess.runner]
    prep_usd = own_runner[0].usd if own_runner else 0.0  # an EMR cluster's: every set pays it
    choice = choose(candidates, deadline_h=deadline_h, budget_usd=budget_usd, extra_s=prep_s,
                    extra_usd=prep_usd)  # fmt: skip
    estimated = sorted({g for g, r in rates.items() if r.estimate and g not in UNSUPPORTED_GPUS})
    if target.estimate and target.hardware not in rates:
        estimated.append(target.hardware + (" (past runs not usable)" if hardware in by_hw else ""))
    if estimated:
        notes.append(
            "estimates: no run of this workload was measured on "
            + ", ".join(estimated)
            + "; times carry a band from back-tests (BENCHMARKS.md); to tighten it, "
            + CALIBRATION_HINT
        )
    own = [t for t, _, _ in _train_groups(profile)] + ([instance_type] if instance_type else [])
    inputs.append(book.basis(own + sorted({n for n, _ in prices} - set(own))))
    notes += [n for n in [unsupported_note(catalog, target)] if n]
    if not any(spot for _, spot in prices):
        notes.append(
            "spot prices unknown (none in the price book): only on-demand sets are "
            "ranked; `sentitop prices --refresh` fetches spot prices"
        )
    if not any(e for e in errors) and study_errors:
        inputs.append(
            "worker-count band from the old study's leave-one-out: "
            + ", ".join(f"{e.workers} GPUs {e.error:+.1%}" for e in study_errors)
        )
    notes += [n for n in [_beaten_note(candidates, target)] if n]
    notes += own_budget_notes(profile, target, prep_usd)
    return Plan(
        profile.name,
        n_epochs,
        deadline_h,
        target,
        wall,
        parts,
        sorted(candidates, key=lambda c: (c.usd, c.hours)),
        choice.pick,
        inputs,
        errors,
        not_predicted,
        budget_usd=budget_usd,
        choice=choice,
        prep=prep,
        prep_runner=profile.preprocess.runner,
        n_train=n_train,
        notes=notes,
        skipped=_skipped_rows(runs, matching, profile.name),
    )


def epoch_costs(
    profile: Profile, runs: list[RunRecord], book: PriceBook | None = None
) -> tuple[str, dict[str, tuple[float, float]]]:
    """(workload label, instance type -> ($ per epoch on one instance, band)) of a profile."""
    plan = plan_profile(profile, runs, epochs=1, book=book)
    out: dict[str, tuple[float, float]] = {}
    for c in plan.candidates:
        if len(c.groups) == 1 and c.groups[0][1] == 1 and c.market == "on-demand":
            out[c.groups[0][0]] = (c.epoch_s * c.usd_per_hour / 3600, c.band)
        elif c.is_target and not c.groups and c.instance_type and c.count == 1:
            # a local (or SSH) profile priced as an instance type: its own, often measured,
            # figure (the Prices screen showed "—" for it beside estimates for GPU types)
            out[c.instance_type] = (c.epoch_s * c.usd_per_hour / 3600, c.band)
    return workload_of(profile).label, out

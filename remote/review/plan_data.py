"""What a plan's data stands for: a profile's workload, training-set size and preprocessing
estimates."""

from __future__ import annotations

import os
from typing import Any

from engine.config import PreprocessConfig
from remote.pricing import Catalog
from remote.profile import Profile
from remote.review.backtest import STUDY_SAMPLES
from remote.review.datasize import (
    TEXTS_PER_GB_CORPUS,
    TEXTS_PER_GB_SYNTHETIC,
    TITLE_ROWS_FACTOR,
    PrepEstimate,
    prep_time,
    require_plannable,
    samples_of,
    train_samples,
)
from remote.review.input_size import InputSize
from remote.review.transfer import Workload, resolved_model
from remote.run_record import RunRecord


def engine_default(name: str) -> Any:
    """A preprocessing default of the engine (declared once, in engine.config)."""
    return PreprocessConfig.__dataclass_fields__[name].default


def workload_of(profile: Profile) -> Workload:
    """The model, sequence length and batch size a profile trains (what rates are keyed by)."""
    cfg = profile.to_train_config(".", ".")
    seq = profile.preprocess.seq_len or engine_default("seq_len")
    model = resolved_model(cfg.model)
    return Workload(model, int(seq), cfg.batch_size, f"{cfg.model.preset} model, {seq} tokens")


def n_train_of(
    profile: Profile,
    same_data: list[RunRecord],
    data_size: int | None,
    inputs: list[str],
    sized: InputSize | None = None,
) -> int:
    """Training samples the plan assumes (from --data-size, past runs on the same data, the
    input files' lines, the synthetic size, or the old study's); says which in ``inputs``."""
    test = profile.preprocess.test_fraction
    test = float(engine_default("test_fraction")) if test is None else test
    if data_size is not None:
        synthetic = profile.data.synthetic is not None
        titles = bool(profile.preprocess.title_rows) and not synthetic
        n = train_samples(data_size, test, synthetic=synthetic, title_rows=titles)
        require_plannable(n, data_size)
        per_gb = "synthetic reviews: 182 k" if synthetic else "old study: 231.5 k"
        inputs.append(
            f"training-set size: {n:,} samples from --data-size ({per_gb} "
            f"distinct texts per GB, less the {test:.0%} test split"
            + (
                f"; × {TITLE_ROWS_FACTOR:.2f} for preprocess.title_rows, as measured"
                if titles
                else ""
            )
            + ")"
        )
        return n
    if same_data and same_data[-1].n_train:
        n = int(same_data[-1].n_train)
        inputs.append(f"training-set size: {n:,} samples (past runs on the same data)")
        return n
    if sized is not None and sized.lines:
        titles = bool(profile.preprocess.title_rows)
        n = samples_of(sized.lines, test, titles)
        inputs.append(
            f"training-set size: at most {n:,} samples from the {sized.describe()} (each line "
            f"a distinct review, less the {test:.0%} test split"
            + (f", × {TITLE_ROWS_FACTOR:.2f} for preprocess.title_rows" if titles else "")
            + "; duplicates and skipped lines make it fewer: the prediction is an upper bound)"
        )
        return n
    if profile.data.synthetic is not None:
        n = train_samples(profile.data.synthetic.size, test, synthetic=True)
        inputs.append(
            f"training-set size: {n:,} samples (synthetic "
            f"{profile.data.synthetic.size / 1e6:,.0f} MB: "
            f"182 k distinct texts per GB, less the {test:.0%} test split)"
        )
        return n
    inputs.append(
        f"training-set size: {STUDY_SAMPLES:,} samples assumed (the old study's; the "
        "input files cannot be read here: give --data-size to set it)"
    )
    return STUDY_SAMPLES


def prep_estimates(
    profile: Profile, catalog: Catalog, size: int | None, texts: int | None = None
) -> list[PrepEstimate]:
    """Predicted preprocessing of a corpus of ``size`` bytes per runner (none without a size);
    ``texts``: its distinct texts when known (else from the size, as train_samples does)."""
    from engine.preprocess.budget import default_budget

    if size is None:
        return []
    pre = profile.preprocess
    per_gb = TEXTS_PER_GB_SYNTHETIC if profile.data.synthetic is not None else TEXTS_PER_GB_CORPUS
    texts = texts if texts is not None else int(size / 1e9 * per_gb)
    out: list[PrepEstimate] = []
    if pre.runner == "emr" and pre.emr is not None:
        row = catalog.specs(pre.emr.instance_type)
        cores = pre.emr.count * (row.vcpus if row else 4)
        out.append(prep_time(size, "emr", f"{pre.emr.count}×{pre.emr.instance_type}", cores))
    # the local runner runs where `sentitop run` runs (remote.datasets), before any node starts
    cores = pre.workers or os.cpu_count() or 1
    budget = pre.memory_budget or default_budget()
    machine = "this machine, before the nodes start"
    out.append(prep_time(size, "local", machine, cores, texts=texts, budget=budget))
    return out


def own_prep_seconds(prep: list[PrepEstimate], runner: str) -> float | None:
    """Predicted preprocessing seconds of the profile's own runner (else the local runner's)."""
    own = [p for p in prep if p.runner == runner] or [p for p in prep if p.runner == "local"]
    return own[0].seconds if own else None

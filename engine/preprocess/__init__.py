"""Preprocessing: raw review files → de-duplicated, encoded, chunked dataset.h5 (issue 2).

Public API: :func:`run_preprocess`, :func:`engine.preprocess.encode.load_encoder`,
:func:`engine.preprocess.readers.iter_records`. Heavy modules load on first call, so the CLI
can import this package cheaply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.config import PreprocessConfig
    from engine.events import Emitter


def run_preprocess(
    cfg: PreprocessConfig, emitter: Emitter | None = None, **options: Any
) -> dict[str, Any]:
    """Preprocess cfg.inputs into cfg.output and return the stats (see pipeline.run_preprocess
    for the keyword options: rating_max, negative_max, mrjob_args)."""
    from engine.preprocess.pipeline import run_preprocess as _run

    return _run(cfg, emitter, **options)


__all__ = ["run_preprocess"]

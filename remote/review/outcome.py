"""A run's outcome as the review shows it: status with warnings, and whether its accuracy counts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from remote.run_record import RunRecord

BELOW_MAJORITY = "below_majority"
"""summary.json warning code of a model that does not beat always answering the commoner class."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of a run, in words, and whether its test accuracy may stand for its setup."""

    status: str
    """'ok', 'failed', 'ok, below majority 0.800', 'ok, 2 warnings', ...: never a bare 'ok' for
    a useless model or one whose summary warns (the end-of-run table's "finished, N warning(s)")."""
    accuracy_counts: bool
    """False when the run failed or its model is not better than the majority rate."""
    why: str = ""
    """Why the accuracy does not count (empty when it does)."""
    brief: str = ""
    """``status`` in fewer words, for a narrow column ("below majority"); empty: the same."""
    warned: bool = False
    """The accuracy counts, but the summary carries warnings to read."""

    @property
    def style(self) -> str:
        """Rich style of ``status``: bold yellow when the accuracy does not count, yellow with
        warnings, none otherwise."""
        return "bold yellow" if not self.accuracy_counts else "yellow" if self.warned else ""


def _summary(run: RunRecord) -> dict[str, Any]:
    """The run folder's summary.json ({} for CSV rows, or when it cannot be read again)."""
    if run.source != "folder":
        return {}
    try:
        data = json.loads((run.path / "summary.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run_outcome(run: RunRecord) -> Outcome:
    """The outcome of ``run``: a failed run or a below-majority model is said so, loudly."""
    return summary_outcome(run.status, _summary(run), run.accuracy)


def summary_outcome(status: str, summary: dict[str, Any], accuracy: float | None) -> Outcome:
    """The outcome of a run whose status, summary.json (``{}``: none) and test accuracy are
    given (the Runs screen's rows, and :func:`run_outcome`)."""
    if status != "ok":
        reason = summary.get("reason")
        why = status + (f" ({reason})" if isinstance(reason, str) and reason else "")
        return Outcome(status, False, why)
    codes = {
        str(w.get("code"))
        for w in summary.get("warnings") or []
        if isinstance(w, dict) and w.get("code")
    }
    majority = summary.get("majority_rate")
    rate = float(majority) if isinstance(majority, int | float) else None
    below = BELOW_MAJORITY in codes or (
        rate is not None and accuracy is not None and accuracy <= rate
    )
    if below:
        shown = f" {rate:.3f}" if rate is not None else ""
        return Outcome(
            f"ok, below majority{shown}",
            False,
            f"test accuracy {accuracy if accuracy is not None else float('nan'):.3f} "
            f"does not beat the majority rate{shown}",
            brief="below majority",
        )
    if count := len(summary.get("warnings") or []):  # its accuracy stands, with a caveat
        said = f"ok, {count} warning{'s' if count > 1 else ''}"
        return Outcome(said, True, brief="ok, warned", warned=True)
    return Outcome(status, True)

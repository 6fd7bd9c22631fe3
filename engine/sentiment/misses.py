"""The most confident mistakes of an evaluation: which reviews, where, how sure the model was."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def confident_misses(
    proba: np.ndarray,
    labels: np.ndarray,
    texts: Sequence[str],
    where: Sequence[tuple[str, int]],
    count: int,
    threshold: float = 0.5,
) -> list[dict[str, Any]]:
    """The ``count`` wrongly decided texts farthest from ``threshold`` (most confident first;
    ties in file order), each as {file, line, label, p_positive, text}; ``where`` holds each
    text's (file, line)."""
    wrong = np.flatnonzero((proba > threshold) != labels.astype(bool))
    order = wrong[np.argsort(-np.abs(proba[wrong] - threshold), kind="stable")][: max(0, count)]
    return [
        {
            "file": where[i][0],
            "line": int(where[i][1]),
            "label": int(labels[i]),
            "p_positive": float(proba[i]),
            "text": texts[i],
        }
        for i in order
    ]

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
    ties in file order), each as {file, line, label, p_positive, text, repeats}; ``where`` holds
    each text's (file, line). A text wrong at several lines is listed once, at its first, with
    how many more lines hold it (``repeats``): one review three times had taken three places."""
    wrong = np.flatnonzero((proba > threshold) != labels.astype(bool))
    order = wrong[np.argsort(-np.abs(proba[wrong] - threshold), kind="stable")]
    listed: dict[tuple[str, int], dict[str, Any]] = {}
    for i in order:
        key = (texts[i], int(labels[i]))
        if key in listed:
            listed[key]["repeats"] += 1
            continue
        if len(listed) >= max(0, count):
            continue  # still counted: a listed text's repeats further down
        listed[key] = {
            "file": where[i][0],
            "line": int(where[i][1]),
            "label": int(labels[i]),
            "p_positive": float(proba[i]),
            "text": texts[i],
            "repeats": 0,
        }
    return list(listed.values())

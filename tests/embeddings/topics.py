"""A small synthetic review file with learnable co-occurrence (no shared data needed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

TOPICS = [[f"topic{chr(97 + t)}word{chr(97 + i)}" for i in range(6)] for t in range(16)]
"""16 groups of 6 words; a review draws its words from one group (so a pair of one group
occurs about 16 times as often as chance: above the SPPMI shift log 10)."""


def write_topic_reviews(path: Path, docs: int = 480, words: int = 12, seed: int = 0) -> Path:
    """``docs`` reviews of ``words`` words, each from one topic group (seeded): 96 words, each
    seen far more than min_count times, that co-occur only within their group."""
    rng = np.random.default_rng(seed)
    lines = []
    for d in range(docs):
        group = TOPICS[d % len(TOPICS)]
        text = " ".join(group[i] for i in rng.integers(0, len(group), words))
        lines.append(json.dumps({"reviewText": text}))
    path.write_text("\n".join(lines) + "\n")
    return path

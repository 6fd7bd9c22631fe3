"""Negation probes of trained runs: share right on each list, and every miss with P(positive)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from yardstick_data import HELDOUT_PROBES, PROBES, negation_probes


def score(run: Path) -> dict[str, Any]:
    """Per probe list: share right at the run's decision threshold (0.5, as `sentitop eval`
    and the yardstick decide) and the misses, most confident first."""
    from engine.sentiment.evaluate import load_run, predict_proba
    from engine.sentiment.misses import confident_misses

    loaded = load_run(run)
    out: dict[str, Any] = {"run": str(run)}
    for name, path in (("probes", PROBES), ("probes_heldout", HELDOUT_PROBES)):
        probes = negation_probes(path)
        proba = predict_proba(loaded, probes.texts)
        labels = np.asarray(probes.labels)
        where = [(path.name, i + 1) for i in range(len(labels))]
        wrong = confident_misses(proba, labels, probes.texts, where, len(labels))
        out[name] = round(float(1 - len(wrong) / len(labels)), 4)
        out[f"{name}_misses"] = [
            {"text": m["text"], "label": m["label"], "p": round(m["p_positive"], 3)} for m in wrong
        ]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", type=Path, help="training folders (runs/<id>/train)")
    parser.add_argument("--json", action="store_true", help="one JSON object per run")
    args = parser.parse_args()
    for run in args.runs:
        result = score(run)
        if args.json:
            print(json.dumps(result))
            continue
        print(f"{run}: main list {result['probes']:.3f}, held-out {result['probes_heldout']:.3f}")
        for name in ("probes", "probes_heldout"):
            for miss in result[f"{name}_misses"]:
                print(f"  {name:<15} {miss['label']}  {miss['p']:.3f}  {miss['text']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

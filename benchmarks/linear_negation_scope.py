"""Does marking negation scope help? The yardstick's baseline with and without `not_` prefixes.

Classic sentiment preprocessing (Das & Chen 2001; Pang, Lee & Vaithyanathan 2002) marks the
words after a negation so a bag of words can tell "bad" from "not bad": here the next SCOPE
words after not/no/never/n't forms get a `not_` prefix ("not bad at all" → "not not_bad not_at
not_all"), a clause word (but, however, although, …) ending the scope early. The cleaned text
has no punctuation, so the scope is a word count. Everything else is the yardstick's baseline
(`yardstick_baseline.py`: TF-IDF 1-2-grams, min_df 2, LR with C chosen on the same validation
split), so the difference is the marking alone. Prints test accuracy and the negation probes
per fold, and the loco means.

    python benchmarks/linear_negation_scope.py [--scopes 0,3] [--only phones,office]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from yardstick_baseline import C_GRID, split_validation
from yardstick_data import CATEGORIES, make_folds, negation_probes

from engine.sentiment.negation import SCOPE_CLAUSE, SCOPE_NEGATIONS

NEGATIONS, CLAUSE = SCOPE_NEGATIONS, SCOPE_CLAUSE  # the words the model's wide path uses


def mark(text: str, scope: int) -> str:
    """``text`` (cleaned: lowercase words, single spaces) with the ``scope`` words after each
    negation prefixed by `not_`."""
    if scope <= 0:
        return text
    out, left = [], 0
    for word in text.split():
        if word in NEGATIONS:
            out.append(word)
            left = scope
        elif word in CLAUSE:
            out.append(word)
            left = 0
        else:
            out.append(f"not_{word}" if left else word)
            left = max(0, left - 1)
    return " ".join(out)


def run_fold(fold: object, scope: int, probes: object) -> dict[str, float]:
    """Test accuracy and probe accuracy of the baseline on ``scope``-marked text."""
    fit, valid = split_validation(fold.train, 0.1)  # type: ignore[attr-defined]
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2)
    x_fit = vec.fit_transform([mark(t, scope) for t in fit.texts])
    x_valid = vec.transform([mark(t, scope) for t in valid.texts])
    best: tuple[float, LogisticRegression] | None = None
    for c in C_GRID:
        clf = LogisticRegression(C=c, solver="liblinear", max_iter=1000).fit(x_fit, fit.labels)
        acc = float((clf.predict(x_valid) == np.asarray(valid.labels)).mean())
        if best is None or acc > best[0]:
            best = (acc, clf)
    assert best is not None
    clf = best[1]
    test = fold.test  # type: ignore[attr-defined]
    x_test = vec.transform([mark(t, scope) for t in test.texts])
    x_probe = vec.transform([mark(t, scope) for t in probes.texts])  # type: ignore[attr-defined]
    return {
        "valid": round(best[0], 4),
        "accuracy": round(float((clf.predict(x_test) == np.asarray(test.labels)).mean()), 4),
        "probes": round(
            float((clf.predict(x_probe) == np.asarray(probes.labels)).mean()),  # type: ignore[attr-defined]
            4,
        ),
    }


def main() -> None:
    """Every fold × scope; a JSON line per result, then the loco means."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "data")
    )
    parser.add_argument("--scopes", default="0,3")
    parser.add_argument("--kinds", default="loco,imdb,in_domain")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    only = [n for n in args.only.split(",") if n]
    folds = make_folds(Path(args.data_dir), list(CATEGORIES), args.kinds.split(","), only)
    probes = negation_probes()
    scopes = [int(s) for s in args.scopes.split(",")]
    results: dict[int, dict[str, dict[str, float]]] = {s: {} for s in scopes}
    for fold in folds:
        for scope in scopes:
            results[scope][fold.name] = run_fold(fold, scope, probes)
            print(
                json.dumps({"fold": fold.name, "scope": scope, **results[scope][fold.name]}),
                flush=True,
            )
    loco = [f.name for f in folds if f.kind == "loco"]
    for scope in scopes:
        acc = np.mean([results[scope][f]["accuracy"] for f in loco]) if loco else float("nan")
        probe = np.mean([results[scope][f]["probes"] for f in loco]) if loco else float("nan")
        print(
            f"scope {scope}: loco mean accuracy {acc:.4f}, probes {probe:.3f} ({len(loco)} folds)"
        )


if __name__ == "__main__":
    main()

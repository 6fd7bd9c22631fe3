"""The yardstick's baseline: TF-IDF of word 1-2-grams on the cleaned text + logistic regression.

The text is the engine's cleaned text with every word (negations and other stopwords kept, no
truncation). C is chosen (min_df 2) on the validation split — the same held-out share of the
training texts the engine's preprocessing holds out (BLAKE2b of the cleaned text) — and the
model is fitted on the rest, so both sides learn from the same texts and select on the same ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from yardstick_data import LabelledTexts, negation_probes
from yardstick_metrics import adapted_scores, best_threshold, scores
from yardstick_significance import per_text

from engine.preprocess.dedupe import is_test

C_GRID = (1.0, 4.0, 16.0, 64.0, 256.0)
MIN_DF_GRID = (2,)


def split_validation(train: LabelledTexts, fraction: float) -> tuple[LabelledTexts, LabelledTexts]:
    """(fit part, validation part) by the engine's hash split of the cleaned text."""
    pick = [is_test(t.encode(), fraction) for t in train.texts]

    def part(want: bool) -> LabelledTexts:
        rows = [i for i, p in enumerate(pick) if p == want]
        return LabelledTexts(
            [train.texts[i] for i in rows],
            [train.labels[i] for i in rows],
            [train.ratings[i] for i in rows],
        )

    return part(False), part(True)


def tfidf_lr(
    train: LabelledTexts, test: LabelledTexts, valid_fraction: float = 0.1
) -> dict[str, Any]:
    """Metrics on ``test`` of the baseline selected on the validation split (at threshold 0.5,
    and with the threshold that is best on validation, as a second figure)."""
    fit, valid = split_validation(train, valid_fraction)
    y_fit, y_valid = np.asarray(fit.labels), np.asarray(valid.labels)
    best: tuple[float, Any, Any] | None = None
    for min_df in MIN_DF_GRID:
        vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=min_df)
        x_fit = vec.fit_transform(fit.texts)
        x_valid = vec.transform(valid.texts)
        for c in C_GRID:
            clf = LogisticRegression(C=c, solver="liblinear", max_iter=1000).fit(x_fit, y_fit)
            acc = float(((clf.predict_proba(x_valid)[:, 1] > 0.5) == y_valid).mean())
            if best is None or acc > best[0]:
                best = (acc, vec, clf)
    assert best is not None
    valid_acc, vec, clf = best
    p_valid = clf.predict_proba(vec.transform(valid.texts))[:, 1]
    p_test = clf.predict_proba(vec.transform(test.texts))[:, 1]
    threshold = best_threshold(p_valid, y_valid)
    y_test = np.asarray(test.labels)
    probes = negation_probes()
    probe_pred = clf.predict_proba(vec.transform(probes.texts))[:, 1] > 0.5
    return {
        **scores(p_test, y_test, 0.5),
        "per_text": per_text(p_test > 0.5, y_test),
        "tuned_threshold": {**scores(p_test, y_test, threshold), "threshold": threshold},
        "prior_adapted": adapted_scores(p_test, y_test, float(y_fit.mean())),
        "C": clf.C,
        "min_df": vec.min_df,
        "valid_accuracy": round(valid_acc, 4),
        "features": len(vec.vocabulary_),
        "n_fit": len(fit),
        "n_valid": len(valid),
        "negation_probes": round(float((probe_pred == np.asarray(probes.labels)).mean()), 4),
    }

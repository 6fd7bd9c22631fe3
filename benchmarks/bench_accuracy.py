"""Test accuracy on the real Amazon files vs a TF-IDF + logistic-regression baseline.

Preprocesses the McAuley-format Amazon files of ``--data-dir`` (1–3★ negative) twice —
``keep_negations`` off and on — trains the LSTM on each with the given settings (2 local
processes by default), and fits scikit-learn's TF-IDF + logistic regression on exactly the same
split: the same token ids of the same dataset.h5 (so the same texts, cleaning, vocabulary and
labels). Prints one JSON object.

    .venv/bin/python benchmarks/bench_accuracy.py [--epochs N] [--nproc 2] [--model default]
        [--pos-weight auto|none|F] [--negations off,on]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.linear_model import LogisticRegression

from engine.config import ModelConfig, PreprocessConfig, TrainConfig
from engine.events import parse_event_line
from engine.preprocess import run_preprocess
from engine.sentiment.data import load_split, read_info
from engine.sentiment.metrics import Confusion
from engine.sentiment.train import launch_local

AMAZON = [
    "amazon2014_Musical_Instruments_5.jsonl.gz",
    "amazon2014_Cell_Phones_and_Accessories_5.head4776.jsonl.gz",
    "amazon2018_AMAZON_FASHION_5.jsonl.gz",
    "amazon2018_All_Beauty_5.jsonl.gz",
    "amazon2018_Appliances_5.jsonl.gz",
    "amazon2018_Office_Products_5.balanced9000.jsonl.gz",
]


def bag_of_ids(tokens: np.ndarray, lengths: np.ndarray, vocab: int) -> sparse.csr_matrix:
    """Counts of each token id per row (padding excluded)."""
    rows = np.repeat(np.arange(len(lengths)), np.minimum(lengths, tokens.shape[1]))
    mask = np.arange(tokens.shape[1])[None, :] < lengths[:, None]
    cols = tokens[mask].astype(np.int64)
    data = np.ones(len(cols), dtype=np.float64)
    return sparse.csr_matrix((data, (rows, cols)), shape=(len(lengths), vocab))


def tfidf_baseline(data: Path) -> dict[str, Any]:
    """TF-IDF (uni-grams of token ids) + logistic regression on the dataset's own split."""
    vocab = read_info(data).vocab_size
    train, test = load_split(data, "train"), load_split(data, "test")
    tfidf = TfidfTransformer(sublinear_tf=True)
    x_train = tfidf.fit_transform(bag_of_ids(train.tokens, train.lengths, vocab))
    x_test = tfidf.transform(bag_of_ids(test.tokens, test.lengths, vocab))
    best: dict[str, Any] = {}
    for c in (1.0, 4.0, 16.0):  # a small sweep, scored on test: generous to the baseline
        clf = LogisticRegression(C=c, max_iter=2000).fit(x_train, train.labels)
        conf = Confusion()
        conf.add(clf.predict(x_test) > 0.5, test.labels)
        m = conf.metrics()
        if m["accuracy"] > best.get("accuracy", -1):
            best = {**m, "C": c}
    best.pop("loss", None)
    return best


def train_lstm(data: Path, run: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Train with the default config (overridable) and return the summary."""
    summary: dict[str, Any] = {}

    def on_line(rank: int, stream: str, line: str) -> None:
        event = parse_event_line(line) if stream == "stdout" else None
        if event is not None and event["type"] == "summary":
            summary.update(event)
        elif event is not None and event["type"] == "epoch":
            print(f"  epoch {event['epoch']}: acc {event['accuracy']}", file=sys.stderr)

    cfg = TrainConfig(
        data_dir=str(data),
        run_dir=str(run),
        epochs=args.epochs,
        model=ModelConfig(preset=args.model),
        checkpoint_every_min=0,
        pos_weight=args.pos_weight,
    )
    launch_local(cfg, args.nproc, on_line=on_line)
    keys = (
        "accuracy",
        "precision",
        "recall",
        "f1",
        "epochs",
        "train_s",
        "samples_per_s",
        "n_train",
        "n_test",
    )
    return {k: summary.get(k) for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", default="/work/shared/data")
    parser.add_argument(
        "--epochs", type=int, default=TrainConfig.__dataclass_fields__["epochs"].default
    )  # type: ignore[arg-type]
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--model", default="default", choices=["default", "seed"])
    parser.add_argument(
        "--pos-weight",
        default=str(TrainConfig.__dataclass_fields__["pos_weight"].default),
        help="auto (negatives/positives), none or a number; default: TrainConfig's",
    )
    parser.add_argument("--negations", default="off,on", help="off, on or off,on")
    args = parser.parse_args()
    if args.pos_weight not in ("auto", "none"):
        args.pos_weight = float(args.pos_weight)
    inputs = [str(Path(args.data_dir) / name) for name in AMAZON]
    result: dict[str, Any] = {
        "inputs": AMAZON,
        "model": args.model,
        "epochs": args.epochs,
        "nproc": args.nproc,
        "pos_weight": args.pos_weight,
    }
    with tempfile.TemporaryDirectory() as tmp:
        for setting in args.negations.split(","):
            keep = setting == "on"
            data = Path(tmp) / f"data-{setting}"
            run_preprocess(PreprocessConfig(inputs=inputs, output=str(data), keep_negations=keep))
            print(f"keep_negations {setting}: training", file=sys.stderr)
            start = time.time()
            lstm = train_lstm(data, Path(tmp) / f"run-{setting}", args)
            lstm["wall_s"] = round(time.time() - start, 1)
            base = tfidf_baseline(data)
            result[f"keep_negations_{setting}"] = {
                "lstm": lstm,
                "tfidf_lr": base,
                "lstm_minus_tfidf_accuracy": round((lstm["accuracy"] or 0.0) - base["accuracy"], 4),
            }
    result["load_avg_1m"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""Pretrain SGNS word vectors on all the review text of a folder, for ``init_embeddings``.

Reads every review file of DATA_DIR (``*.jsonl[.gz]``: McAuley 2014/2018, IMDB, Fine Food,
Alexa...; ratings unused), cleans it as preprocessing does, drops repeated texts, and trains
one sync rank (on the GPU when one is visible: ``--device auto``). Prints where the time went
(reading + reference vs training), tokens/s, the PIP loss and probe neighbours, and the line
that uses the vectors. Settings default to a ~15 M-token corpus in a few minutes on one H100.

    python benchmarks/pretrain_embeddings.py ../shared/data --run-dir runs/emb-all
    python benchmarks/pretrain_embeddings.py DATA --run-dir R --exclude 'amazon2018_Appliances*'
    nice -n 10 python benchmarks/pretrain_embeddings.py ../shared/data --run-dir /tmp/e \\
        --max-docs 5000 --device cpu --batch 4096        # a small CPU run
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.embeddings.cli import run_local
from engine.embeddings.config import EmbedConfig
from engine.embeddings.sources import expand_inputs

PROBES = ["good", "bad", "great", "terrible", "not", "love", "boring", "worth", "broke", "movie"]


def _progress(rank: int, stream: str, line: str) -> None:
    """Print epoch lines and errors as they come (events are JSON lines on stdout)."""
    if stream == "stderr":
        if line.strip() and "Warning" not in line:
            print(f"  [rank {rank}] {line}", file=sys.stderr)
        return
    try:
        event = json.loads(line)
    except ValueError:
        return
    kind = event.get("type")
    if kind == "stage_start" and event.get("stage") == "train":
        print(f"  train on {event.get('device')}: vocab {event['vocab']}, "
              f"{event['corpus_tokens']:,} tokens, dim {event['dim']}, batch {event['batch']}, "
              f"initial PIP {event['pip_loss']:.3f}", flush=True)  # fmt: skip
    elif kind == "epoch":
        print(f"  epoch {event['epoch'] + 1}: loss {event['train_loss']:.4f}  "
              f"PIP {event['pip_loss']:.3f}  {event['seconds']:.1f} s  "
              f"{event['words_per_s']:,.0f} words/s", flush=True)  # fmt: skip
    elif kind == "phase":
        print(f"  rank {event['rank']}: pair building + negatives {event['sampling']:.1f} s, "
              f"forward+backward {event['compute']:.1f} s, optimizer {event['comm']:.1f} s "
              f"(launch times on a GPU)", flush=True)  # fmt: skip
    elif kind == "error":
        print(f"  [rank {rank}] error: {event.get('message')}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run once and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir", help="folder of review files (README etc. are skipped)")
    parser.add_argument("--run-dir", required=True, help="the embeddings run folder to write")
    parser.add_argument("--exclude", action="append", default=[], help="file-name glob to skip")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--dim", type=int, default=100, help="= the classifier's embedding size")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8192, help="positive pairs per step")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--max-vocab", type=int, default=30_000)
    parser.add_argument("--min-count", type=int, default=5)
    parser.add_argument("--max-docs", type=int, default=None, help="first N documents only")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (CPU runs)")
    args = parser.parse_args(argv)

    files = [
        f
        for f in expand_inputs([args.data_dir])
        if not any(fnmatch.fnmatch(Path(f).name, pat) for pat in args.exclude)
    ]
    print(f"{len(files)} input file(s):")
    for f in files:
        print(f"  {f}")
    cfg = EmbedConfig(
        run_dir=args.run_dir, input=files, device=args.device, dim=args.dim,
        epochs=args.epochs, batch=args.batch, lr=args.lr, max_vocab=args.max_vocab,
        min_count=args.min_count, max_docs=args.max_docs, dedupe=True, threads=args.threads,
        window=5, negatives=10, subsample=1e-4, eval_words=1000, log_every=1_000_000,
        probe_words=PROBES,
    )  # fmt: skip
    t0 = time.perf_counter()
    summary: dict[str, Any] = run_local(cfg, 1, on_line=_progress)
    wall = time.perf_counter() - t0
    prep = json.loads((Path(args.run_dir) / "prepare.json").read_text())["stats"]
    train_s = summary["train_s"]
    tokens_per_s = prep["raw_tokens"] * summary["epochs"] / train_s if train_s > 0 else 0.0
    print(f"corpus: {prep['docs']:,} documents, {prep['raw_tokens']:,} tokens read, "
          f"{prep['tokens']:,} in the vocabulary of {prep['vocab']:,}")  # fmt: skip
    for src in prep.get("sources", []):
        print(f"  {Path(src['path']).name}: {src['docs']:,} docs, {src['duplicates']:,} "
              f"repeated, {src['skipped']:,} without text")  # fmt: skip
    print(f"device {summary['device']}: wall {wall:.1f} s = reading {prep.get('read_s', 0):.1f} s "
          f"+ SPPMI reference {prep['reference_s']:.1f} s + training {train_s:.1f} s "
          f"(+ start-up); training share {train_s / wall:.0%}")  # fmt: skip
    print(f"training: {tokens_per_s:,.0f} corpus tokens/s over {summary['epochs']} epoch(s); "
          f"PIP loss {summary['pip_loss_initial']:.3f} -> {summary['pip_loss']:.3f}")  # fmt: skip
    for word, near in summary["neighbours"].items():
        print(f"  {word}: {', '.join(near)}")
    print(f"use: sentitop train ... --model-init-embeddings {args.run_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

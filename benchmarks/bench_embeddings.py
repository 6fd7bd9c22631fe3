"""Embeddings: sync (DDP) vs async (parameter server), batch 1024 vs 8192, embedding 50 vs 200.

Runs ``python -m engine.embeddings`` on the first --docs IMDB reviews for every combination of
mode x batch x dim, each with 2 workers (sync: 2 ranks; async: 2 workers + the server rank),
plus one single-process run per batch x dim (the "one node" column of the old study), all on
this machine in one go. Prints a markdown table in the shape of the old study's (s/epoch,
words/s, PIP loss reached) and ratios measured in this one run: async/sync, 8192/1024 and
200/50 seconds per epoch. s/epoch is the mean over the epochs after the first (warm-up).

    .venv/bin/python benchmarks/bench_embeddings.py                  # ~10 minutes on 2 cores
    .venv/bin/python benchmarks/bench_embeddings.py --docs 200 --epochs 2 --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.embeddings.cli import run_local
from engine.embeddings.config import EmbedConfig

IMDB = Path(__file__).resolve().parents[2] / "shared" / "data" / "imdb_aclImdb_labeled.jsonl.gz"
OLD_STUDY = "embedding 200, batch 8192 x4: sync 52.8 s/epoch, async 46.5 s/epoch; one GPU 28.6"


def _quiet(rank: int, stream: str, line: str) -> None:
    if stream == "stderr" and "Warning" not in line and line.strip():
        print(f"  [rank {rank}] {line}", file=sys.stderr)


def one_run(root: Path, args: argparse.Namespace, mode: str, nproc: int, batch: int, dim: int)\
        -> dict[str, Any]:  # fmt: skip
    """Train once; the row of the table."""
    run_dir = root / f"{mode}-n{nproc}-b{batch}-d{dim}"
    cfg = EmbedConfig(
        run_dir=str(run_dir), input=str(args.input), max_docs=args.docs, mode=mode,  # type: ignore[arg-type]
        dim=dim, batch=batch, epochs=args.epochs, threads=1, eval_words=args.eval_words,
        max_vocab=args.max_vocab, log_every=10_000, events_file=True,
    )  # fmt: skip
    t0 = time.perf_counter()
    summary = run_local(cfg, nproc, on_line=_quiet)
    per_epoch = summary["per_epoch"]
    steady = per_epoch[1:] or per_epoch
    s_epoch = statistics.mean(e["seconds"] for e in steady)
    return {
        "mode": mode if nproc > 1 else "single",
        "processes": nproc,
        "workers": summary["workers"],
        "batch": batch,
        "dim": dim,
        "s_per_epoch": s_epoch,
        "words_per_s": statistics.mean(e["words_per_s"] for e in steady),
        "pip_initial": summary["pip_loss_initial"],
        "pip_final": summary["pip_loss"],
        "train_loss": summary["train_loss"],
        "wall_s": time.perf_counter() - t0,
    }


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of every run."""
    lines = [
        "| mode | workers | batch | dim | s/epoch | words/s | PIP loss (start → end) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['workers']} | {r['batch']} | {r['dim']} | "
            f"{r['s_per_epoch']:.2f} | {r['words_per_s']:,.0f} | "
            f"{r['pip_initial']:.3f} → {r['pip_final']:.3f} |"
        )
    return "\n".join(lines)


def ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    """s/epoch ratios measured in this run."""
    s = {(r["mode"], r["batch"], r["dim"]): r["s_per_epoch"] for r in rows}
    out = {}
    for batch, dim in itertools.product((1024, 8192), (50, 200)):
        if ("async", batch, dim) in s and ("sync", batch, dim) in s:
            out[f"async/sync b{batch} d{dim}"] = s["async", batch, dim] / s["sync", batch, dim]
        if ("single", batch, dim) in s and ("sync", batch, dim) in s:
            out[f"sync x2/single b{batch} d{dim}"] = s["sync", batch, dim] / s["single", batch, dim]
    for mode, dim in itertools.product(("sync", "async", "single"), (50, 200)):
        if (mode, 8192, dim) in s and (mode, 1024, dim) in s:
            out[f"{mode} b8192/b1024 d{dim}"] = s[mode, 8192, dim] / s[mode, 1024, dim]
    for mode, batch in itertools.product(("sync", "async", "single"), (1024, 8192)):
        if (mode, batch, 200) in s and (mode, batch, 50) in s:
            out[f"{mode} d200/d50 b{batch}"] = s[mode, batch, 200] / s[mode, batch, 50]
    return out


def main() -> int:
    """Run the grid and print the table and ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", type=Path, default=IMDB)
    parser.add_argument("--docs", type=int, default=400, help="IMDB reviews used")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--eval-words", type=int, default=300)
    parser.add_argument("--max-vocab", type=int, default=5000)
    parser.add_argument("--json", type=Path, help="also write the rows and ratios here")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-embed-") as tmp:
        for batch, dim in itertools.product((1024, 8192), (50, 200)):
            for mode, nproc in (("sync", 2), ("async", 3), ("sync", 1)):
                row = one_run(Path(tmp), args, mode, nproc, batch, dim)
                print(json.dumps(row), flush=True)
                rows.append(row)
    print()
    print(table(rows))
    print()
    found = ratios(rows)
    for name, value in found.items():
        print(f"{name}: {value:.2f}")
    print(f"old study (reference, other hardware): {OLD_STUDY} s/epoch")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "ratios": found}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

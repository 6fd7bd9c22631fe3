"""Load balancer: 2 local ranks, rank 1 straggling, balanced vs unbalanced, one run.

Trains the same model on the same data three or four times with 2 gloo ranks (1 thread each):
unbalanced (equal shares) and balanced, with rank 1 sleeping (FACTOR - 1) x its compute time
every step, plus the unbalanced run with another seed for the run-to-run loss noise.
Prints, as ratios measured in this one run:

* balanced epoch time / ideal, where ideal = N / sum of the per-rank rates measured in the
  same epoch (rate = samples / busy seconds; busy = compute + data + the all-reduce+optimizer
  time of the least-waiting rank, i.e. everything but waiting for the other rank);
* balanced epoch time / unbalanced epoch time (target <= 0.76; the ideal is 0.714 at 1.8x),
  the unbalanced time being the mean of the two unbalanced runs, which run before and after
  the balanced one (so a drifting load on a shared machine cancels to first order);
* per-epoch train-loss difference balanced vs unbalanced, against the seed-to-seed difference.

Epoch times are the steady state: the mean of the epochs after the first rebalance settles
(epochs >= 2). Writes a PNG of shares, batch sizes, epoch times and losses.

    .venv/bin/python benchmarks/bench_balancer.py                 # ~2-3 minutes on 2 cores
    .venv/bin/python benchmarks/bench_balancer.py --json --plot docs/balancer.png
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.config import BalanceConfig, ModelConfig, TrainConfig
from engine.events import read_events
from engine.launch import launch_local


def write_uniform_dataset(
    folder: Path,
    n_train: int,
    n_test: int,
    seq_len: int,
    vocab: int,
    seed: int = 0,
    label_noise: float = 0.1,
) -> Path:
    """Full-length sequences (steady per-sample compute); label = marker word, 10 % flipped."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    with h5py.File(folder / "dataset.h5", "w") as fh:
        for split, n in (("train", n_train), ("test", n_test)):
            labels = (rng.random(n) < 0.6).astype(np.uint8)
            tokens = rng.integers(4, vocab + 2, size=(n, seq_len)).astype(np.uint16)
            marks = rng.random((n, seq_len)) < 0.1
            tokens[marks] = np.where(labels[:, None] == 1, 2, 3).repeat(seq_len, 1)[marks]
            flip = rng.random(n) < label_noise  # so the loss settles well above zero
            labels[flip] = 1 - labels[flip]
            group = fh.create_group(split)
            rows = min(1024, n)
            group.create_dataset("tokens", data=tokens, chunks=(rows, seq_len))
            group.create_dataset("labels", data=labels, chunks=(rows,))
            group.create_dataset("lengths", data=np.full(n, seq_len, np.int32), chunks=(rows,))
        fh.attrs.update(vocab_size=vocab, seq_len=seq_len, pad_id=0, unk_id=1, format_version=1)
    words = {
        "<pad>": 0,
        "<unk>": 1,
        "good": 2,
        "bad": 3,
        **{f"w{i}": i for i in range(4, vocab + 2)},
    }
    (folder / "vocab.json").write_text(json.dumps({"words": words, "settings": {}}))
    return folder


def train(
    data: Path, run_dir: Path, args: argparse.Namespace, *, balance: bool, seed: int
) -> dict[str, Any]:
    """One 2-rank run; returns its per-epoch records, balance events and phases."""
    cfg = TrainConfig(
        data_dir=str(data),
        run_dir=str(run_dir),
        model=ModelConfig(preset=args.preset),
        epochs=args.epochs,
        batch_size=args.batch,
        warmup_steps=0,
        log_every=10_000,
        checkpoint_every_min=0,
        eval_every=args.epochs,
        seed=seed,
        grad_sync="separate",
        balance=BalanceConfig(enabled=balance, straggle={1: args.factor}, smoothing=args.smoothing),
    )
    t0 = time.perf_counter()
    launch_local(cfg, 2, threads=1, on_line=lambda rank, stream, line: None)
    wall = time.perf_counter() - t0
    events = list(read_events(run_dir / "events.jsonl"))
    return {
        "wall_s": wall,
        "epochs": [e for e in events if e["type"] == "epoch"],
        "balance": [e for e in events if e["type"] == "balance"],
        "phases": [e for e in events if e["type"] == "phase"],
        "summary": json.loads((run_dir / "summary.json").read_text()),
    }


def ideal_seconds(phases: list[dict[str, Any]], epoch: int) -> tuple[float, float, list[float]]:
    """(ideal from busy rates, ideal from compute rates, per-rank busy rates) of ``epoch``."""
    ranks = sorted((p for p in phases if p["epoch"] == epoch), key=lambda p: p["rank"])
    sync = min(p["allreduce_opt"] for p in ranks)  # the least-waiting rank: no waiting
    n = sum(p["samples"] for p in ranks)
    busy = [p["forward"] + p["backward"] + p["data"] + p["h2d"] + sync for p in ranks]
    rates = [p["samples"] / b for p, b in zip(ranks, busy, strict=True)]
    compute = [p["samples"] / (p["forward"] + p["backward"]) for p in ranks]
    return n / sum(rates), n / sum(compute) + sync, rates


def ideal_busy_per_rank(phases: list[dict[str, Any]], epoch: int) -> list[float]:
    """Per-rank busy seconds of ``epoch`` (equal when the split is perfect)."""
    ranks = sorted((p for p in phases if p["epoch"] == epoch), key=lambda p: p["rank"])
    sync = min(p["allreduce_opt"] for p in ranks)
    return [round(p["forward"] + p["backward"] + p["data"] + p["h2d"] + sync, 3) for p in ranks]


def analyse(
    unbal: dict[str, Any], bal: dict[str, Any], noise: dict[str, Any], steady_from: int
) -> dict[str, Any]:
    """The ratios printed and recorded."""
    e_unbal = [e["seconds"] for e in unbal["epochs"]]
    e_bal = [e["seconds"] for e in bal["epochs"]]
    steady = range(steady_from, len(e_bal))
    t_bal = float(np.mean([e_bal[i] for i in steady]))
    e_unbal1 = [e["seconds"] for e in noise["epochs"]]
    # the two unbalanced runs bracket the balanced one in time: their mean cancels a linear
    # drift of the machine's load
    t_unbal = float(np.mean([e_unbal[i] for i in steady] + [e_unbal1[i] for i in steady]))
    ideals = [ideal_seconds(bal["phases"], i) for i in steady]
    ideal_busy = float(np.mean([i[0] for i in ideals]))
    ideal_compute = float(np.mean([i[1] for i in ideals]))
    unbal_ideal = float(np.mean([ideal_seconds(unbal["phases"], i)[0] for i in steady]))
    loss_u = np.array([e["train_loss"] for e in unbal["epochs"]])
    loss_b = np.array([e["train_loss"] for e in bal["epochs"]])
    loss_n = np.array([e["train_loss"] for e in noise["epochs"]])
    return {
        "epoch_s_unbalanced": e_unbal,
        "epoch_s_unbalanced_seed1": e_unbal1,
        "epoch_s_balanced": e_bal,
        "steady_epochs": list(steady),
        "balanced_over_ideal": t_bal / ideal_busy,
        "balanced_over_ideal_compute_rates": t_bal / ideal_compute,
        "balanced_over_unbalanced": t_bal / t_unbal,
        "ideal_over_unbalanced_equal_batch_rates": unbal_ideal / t_unbal,
        "balanced_over_unbalanced_seed0_only": t_bal / float(np.mean([e_unbal[i] for i in steady])),
        "busy_s_balanced": [ideal_busy_per_rank(bal["phases"], i) for i in range(len(e_bal))],
        "final_shares": bal["balance"][-1]["shares"],
        "final_batch_sizes": bal["balance"][-1]["batch_sizes"],
        "final_sec_per_sample": bal["balance"][-1]["sec_per_sample"],
        "loss_unbalanced": loss_u.tolist(),
        "loss_balanced": loss_b.tolist(),
        "loss_unbalanced_seed1": loss_n.tolist(),
        "loss_diff_balanced_vs_unbalanced": float(np.mean(np.abs(loss_b - loss_u))),
        "loss_diff_seed_noise": float(np.mean(np.abs(loss_n - loss_u))),
        "advice": bal["summary"]["balance"]["advice"]["message"],
    }


def plot(result: dict[str, Any], bal: dict[str, Any], path: Path) -> None:
    """Shares and batch sizes per epoch, epoch times, and losses in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    epochs = [e["epoch"] for e in bal["balance"]]
    shares = np.array([e["shares"] for e in bal["balance"]])
    for r in range(shares.shape[1]):
        axes[0].plot(epochs, shares[:, r], marker="o", label=f"rank {r}")
    axes[0].axhline(1.8 / 2.8, ls=":", c="grey", lw=1)
    axes[0].axhline(1 / 2.8, ls=":", c="grey", lw=1)
    axes[0].set(
        title="data share per rank (rank 1 straggles)", xlabel="epoch", ylabel="share", ylim=(0, 1)
    )
    axes[0].legend()
    x = range(len(result["epoch_s_balanced"]))
    axes[1].plot(x, result["epoch_s_unbalanced"], marker="o", label="unbalanced")
    axes[1].plot(x, result["epoch_s_unbalanced_seed1"], ls=":", c="C0", label="unbalanced, seed 1")
    axes[1].plot(x, result["epoch_s_balanced"], marker="o", label="balanced")
    ideal = [ideal_seconds(bal["phases"], i)[0] for i in x]
    axes[1].plot(x, ideal, ls="--", label="ideal N/Σrates")
    axes[1].set(title="epoch seconds", xlabel="epoch", ylim=(0, None))
    axes[1].legend()
    axes[2].plot(x, result["loss_unbalanced"], marker="o", label="unbalanced")
    axes[2].plot(x, result["loss_balanced"], marker="o", label="balanced")
    axes[2].plot(x, result["loss_unbalanced_seed1"], ls=":", label="unbalanced, seed 1")
    axes[2].set(title="train loss per epoch", xlabel="epoch", yscale="log")
    axes[2].legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> int:
    """Parse options, run, print ratios."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--n-train", type=int, default=256 * 24)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seq-len", type=int, default=48)
    p.add_argument("--vocab", type=int, default=2000)
    p.add_argument("--preset", default="seed")
    p.add_argument("--factor", type=float, default=1.8)
    p.add_argument("--smoothing", type=float, default=0.5)
    p.add_argument("--steady-from", type=int, default=2)
    p.add_argument("--plot", type=Path, default=None, help="write the figure here (PNG)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_balancer_") as tmp:
        root = Path(tmp)
        data = write_uniform_dataset(root / "data", args.n_train, 512, args.seq_len, args.vocab)
        unbal = train(data, root / "unbal", args, balance=False, seed=0)
        bal = train(data, root / "bal", args, balance=True, seed=0)
        noise = train(data, root / "unbal1", args, balance=False, seed=1)
    result = analyse(unbal, bal, noise, args.steady_from)
    result["config"] = vars(args) | {"plot": str(args.plot) if args.plot else None}
    if args.plot:
        plot(result, bal, args.plot)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(
        f"2 ranks x 1 thread, rank 1 straggling {args.factor}x, N={args.n_train}, "
        f"B={args.batch}, seq {args.seq_len}, model {args.preset}, {args.epochs} epochs"
    )
    print("epoch s  unbalanced:", " ".join(f"{s:.2f}" for s in result["epoch_s_unbalanced"]))
    print("epoch s  unbal. s1: ", " ".join(f"{s:.2f}" for s in result["epoch_s_unbalanced_seed1"]))
    print("epoch s  balanced:  ", " ".join(f"{s:.2f}" for s in result["epoch_s_balanced"]))
    print("busy s per rank, balanced:", result["busy_s_balanced"])
    print(f"final shares {result['final_shares']} batch sizes {result['final_batch_sizes']}")
    print(
        f"balanced / ideal (busy rates)    = {result['balanced_over_ideal']:.3f}  (target <= 1.05)"
    )
    print(f"balanced / ideal (compute rates) = {result['balanced_over_ideal_compute_rates']:.3f}")
    print(
        f"balanced / unbalanced            = {result['balanced_over_unbalanced']:.3f}  "
        "(target <= 0.76, ideal 0.714)"
    )
    print(
        f"loss |balanced - unbalanced| = {result['loss_diff_balanced_vs_unbalanced']:.4f}, "
        f"|seed 0 - seed 1| = {result['loss_diff_seed_noise']:.4f} (mean over epochs)"
    )
    print(f"advice: {result['advice']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

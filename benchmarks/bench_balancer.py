"""Load balancer: 2 local ranks, rank 1 straggling 1.8x, balanced vs unbalanced, one run.

Every run uses 2 gloo ranks x 1 thread, the trainer of engine/sentiment/trainer.py,
the same data and model, rank 1 sleeping (FACTOR - 1) x its compute time after every backward, and
``grad_sync = separate``.

1. **Timing, interleaved A/B** (one training run): even epochs train on the balancer's plan,
   odd epochs on equal shares; only balanced epochs feed the balancer. Adjacent epochs share
   the machine's load, so the ratio survives a busy, drifting machine far better than runs
   one after another. Figures, over epochs >= 2 (epoch 0 is equal shares, the first
   measurement):

   * balanced epoch / ideal, ideal = N / sum of per-rank busy rates measured in the same
     epoch (busy = forward + backward + data + h2d + the least-waiting rank's
     all-reduce+optimizer time: everything but waiting for the other rank). Target <= 1.05.
   * balanced epoch / equal-shares epoch. Target <= 0.76 (the ideal is 0.714 at 1.8x).

2. **Convergence**: full runs unbalanced (seed 0), balanced (seed 0) and unbalanced (seed 1):
   per-epoch train loss balanced vs unbalanced against the seed-to-seed difference, the
   shares over the balanced run, and (load-sensitive) epoch times of consecutive runs.

    .venv/bin/python benchmarks/bench_balancer.py --plot docs/balancer.png      # ~4-5 min
    .venv/bin/python benchmarks/bench_balancer.py --json
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

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.balance.balancer import split
from engine.balance.hooks import BalanceHooks
from engine.config import BalanceConfig, ModelConfig, TrainConfig
from engine.events import read_events
from engine.launch import free_port
from engine.sentiment.data import StepPlan


def write_uniform_dataset(
    folder: Path, n_train: int, n_test: int, seq_len: int, vocab: int, seed: int = 0
) -> Path:
    """Full-length sequences (steady per-sample compute); label = marker word, 10 % flipped."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    with h5py.File(folder / "dataset.h5", "w") as fh:
        for split_name, n in (("train", n_train), ("test", n_test)):
            labels = (rng.random(n) < 0.6).astype(np.uint8)
            tokens = rng.integers(4, vocab + 2, size=(n, seq_len)).astype(np.uint16)
            marks = rng.random((n, seq_len)) < 0.1
            tokens[marks] = np.where(labels[:, None] == 1, 2, 3).repeat(seq_len, 1)[marks]
            flip = rng.random(n) < 0.1  # label noise: the loss settles well above zero
            labels[flip] = 1 - labels[flip]
            group = fh.create_group(split_name)
            rows = min(1024, n)
            group.create_dataset("tokens", data=tokens, chunks=(rows, seq_len))
            group.create_dataset("labels", data=labels, chunks=(rows,))
            group.create_dataset("lengths", data=np.full(n, seq_len, np.int32), chunks=(rows,))
        fh.attrs.update(vocab_size=vocab, seq_len=seq_len, pad_id=0, unk_id=1, format_version=1)
    words = {"<pad>": 0, "<unk>": 1, "good": 2, "bad": 3}
    words.update({f"w{i}": i for i in range(4, vocab + 2)})
    (folder / "vocab.json").write_text(json.dumps({"words": words, "settings": {}}))
    return folder


def make_config(
    data: Path, run_dir: Path, args: argparse.Namespace, *, epochs: int, balance: bool, seed: int
) -> TrainConfig:
    """The training settings shared by every run of the benchmark."""
    return TrainConfig(
        data_dir=str(data), run_dir=str(run_dir), model=ModelConfig(preset=args.preset),
        epochs=epochs, batch_size=args.batch, warmup_steps=0, log_every=10_000,
        checkpoint_every_min=0, eval_every=epochs, seed=seed, grad_sync="separate",
        balance=BalanceConfig(enabled=balance, straggle={1: args.factor},
                              smoothing=args.smoothing,
                              emulate_s=(args.emulate_device_ms or 0.0) / 1000),
    )  # fmt: skip


class BenchHooks(BalanceHooks):
    """BalanceHooks with an A/B device (emulated device time is ``BalanceConfig.emulate_s``).

    ``alternate``: even epochs train on the balancer's plan (and feed it), odd epochs on equal
    shares — an A/B inside one run.
    """

    def __init__(self, config: BalanceConfig, *, alternate: bool) -> None:
        super().__init__(config)
        self.alternate = alternate

    def next_plan(self, epoch: int, start: int) -> StepPlan:
        """Balanced plan, or the equal split on odd epochs of an A/B run."""
        if not self.alternate or epoch % 2 == 0:
            return super().next_plan(epoch, start)
        c = self.ctx
        return split(start, c.num_samples - start, c.global_batch, [1.0] * c.world)

    def end_plan(self, epoch: int, plan: StepPlan, windows: list[dict[str, float]]) -> None:
        """Only balanced epochs feed the balancer."""
        if not self.alternate or epoch % 2 == 0:
            super().end_plan(epoch, plan, windows)


def _rank_main(rank: int, world: int, port: int, cfg_json: str, alternate: bool) -> None:
    """One rank (spawned): the real trainer with BenchHooks, events of rank 0 to a file."""
    import torch
    import torch.distributed as dist

    from engine.config import TrainConfig, config_from_dict
    from engine.events import Emitter, JsonlFileSink
    from engine.sentiment.trainer import DistEnv, Trainer

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))  # fmt: skip
    torch.set_num_threads(1)
    cfg = config_from_dict(TrainConfig, json.loads(cfg_json))
    dist.init_process_group("gloo")
    sink = JsonlFileSink(Path(cfg.run_dir) / "events.jsonl") if rank == 0 else None
    emitter = Emitter(sink, rank=rank)
    try:
        hooks = BenchHooks(cfg.balance, alternate=alternate)
        Trainer(cfg, emitter=emitter, hooks=hooks, env=DistEnv.from_environ("cpu")).fit()
    finally:
        emitter.close()
        dist.destroy_process_group()


def train(
    data: Path,
    run_dir: Path,
    args: argparse.Namespace,
    *,
    epochs: int,
    balance: bool,
    seed: int,
    alternate: bool = False,
) -> dict[str, Any]:
    """One 2-rank run of the trainer; its epochs, balance events, phases and summary."""
    import torch.multiprocessing as mp

    from engine.config import config_to_dict

    cfg = make_config(data, run_dir, args, epochs=epochs, balance=balance, seed=seed)
    cfg_json = json.dumps(config_to_dict(cfg))
    mp.spawn(_rank_main, args=(2, free_port(), cfg_json, alternate), nprocs=2,
             join=True)  # fmt: skip
    events = list(read_events(run_dir / "events.jsonl"))
    return {
        "events": events,
        "epochs": [e for e in events if e["type"] == "epoch"],
        "balance": [e for e in events if e["type"] == "balance"],
        "phases": [e for e in events if e["type"] == "phase"],
        "summary": json.loads((run_dir / "summary.json").read_text()),
    }


def _spin_model(seconds: float, seq_len: int, vocab: int, preset: str, out: Any) -> None:
    """Forward+backward steps of the benchmark's model for ``seconds``; puts steps/s."""
    import torch

    from engine.sentiment.model import build_model, resolve_spec

    torch.set_num_threads(1)
    model = build_model(resolve_spec(ModelConfig(preset=preset), vocab + 2))
    x = torch.randint(2, vocab + 2, (128, seq_len))
    lengths, y = torch.full((128,), seq_len), torch.ones(128)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x, lengths), y)
        loss.backward()
        steps += 1
    out.put(steps / (time.perf_counter() - t0))


def host_parallel_efficiency(args: argparse.Namespace, seconds: float = 4.0) -> float:
    """Throughput of 2 concurrent model processes / 2 x that of one alone (1.0 = 2 free cores).

    Below ~0.9 the host cannot run both ranks at once, and balancing real CPU compute cannot
    approach N / sum(rates); the emulated device (--emulate-device-ms) does not need cores.
    """
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    rates = []
    for n in (1, 2):
        queue = ctx.Queue()
        procs = [ctx.Process(target=_spin_model,
                             args=(seconds, args.seq_len, args.vocab, args.preset, queue))
                 for _ in range(n)]  # fmt: skip
        for proc in procs:
            proc.start()
        rates.append(sum(queue.get() for _ in procs))
        for proc in procs:
            proc.join()
    return rates[1] / (2 * rates[0])


def busy_seconds(phases: list[dict[str, Any]], epoch: int) -> tuple[list[float], list[int]]:
    """Per-rank busy seconds and samples of ``epoch`` (busy = everything but waiting)."""
    ranks = sorted((p for p in phases if p["epoch"] == epoch), key=lambda p: p["rank"])
    sync = min(p["allreduce_opt"] for p in ranks)  # the least-waiting rank: no waiting
    busy = [p["forward"] + p["backward"] + p["data"] + p["h2d"] + sync for p in ranks]
    return busy, [int(p["samples"]) for p in ranks]


def ideal_seconds(phases: list[dict[str, Any]], epoch: int) -> float:
    """N / sum of the per-rank busy rates measured in ``epoch``."""
    busy, samples = busy_seconds(phases, epoch)
    return sum(samples) / sum(s / b for s, b in zip(samples, busy, strict=True))


def analyse(
    ab: list[dict[str, Any]],
    unbal: dict[str, Any],
    bal: dict[str, Any],
    noise: dict[str, Any],
    steady_from: int,
) -> dict[str, Any]:
    """The ratios printed and recorded."""
    seconds = [e["seconds"] for e in ab if e["type"] == "epoch"]
    phases = [e for e in ab if e["type"] == "phase"]
    balanced = [i for i in range(steady_from, len(seconds)) if i % 2 == 0]
    equal = [i for i in range(steady_from, len(seconds)) if i % 2 == 1]
    t_bal = float(np.mean([seconds[i] for i in balanced]))
    t_equal = float(np.mean([seconds[i] for i in equal]))
    t_ideal = float(np.mean([ideal_seconds(phases, i) for i in balanced]))
    shares = [e for e in ab if e["type"] == "balance"]
    loss = {name: np.array([e["train_loss"] for e in run["epochs"]])
            for name, run in (("unbal", unbal), ("bal", bal), ("noise", noise))}  # fmt: skip
    seq = {name: [e["seconds"] for e in run["epochs"]]
           for name, run in (("unbal", unbal), ("bal", bal), ("noise", noise))}  # fmt: skip
    steady = range(steady_from, len(seq["bal"]))
    seq_unbal = np.mean([seq["unbal"][i] for i in steady] + [seq["noise"][i] for i in steady])
    return {
        "ab_epoch_s": seconds,
        "ab_balanced_epochs": balanced,
        "ab_equal_epochs": equal,
        "ab_ideal_s": {i: ideal_seconds(phases, i) for i in balanced},
        "ab_busy_s": {i: [round(b, 3) for b in busy_seconds(phases, i)[0]] for i in balanced},
        "ab_final_shares": shares[-1]["shares"],
        "ab_final_batch_sizes": shares[-1]["batch_sizes"],
        "balanced_over_ideal": t_bal / t_ideal,
        "balanced_over_unbalanced": t_bal / t_equal,
        "runs_epoch_s": seq,
        "runs_balanced_over_unbalanced": float(np.mean([seq["bal"][i] for i in steady]))
        / float(seq_unbal),
        "runs_shares": [e["shares"] for e in bal["balance"]],
        "runs_batch_sizes": [e["batch_sizes"] for e in bal["balance"]],
        "loss_unbalanced": loss["unbal"].tolist(),
        "loss_balanced": loss["bal"].tolist(),
        "loss_unbalanced_seed1": loss["noise"].tolist(),
        "loss_diff_balanced_vs_unbalanced": float(np.mean(np.abs(loss["bal"] - loss["unbal"]))),
        "loss_diff_seed_noise": float(np.mean(np.abs(loss["noise"] - loss["unbal"]))),
        "advice": bal["summary"]["balance"]["advice"]["message"],
    }


def plot(result: dict[str, Any], path: Path, factor: float) -> None:
    """A/B epoch times, shares over a balanced run, consecutive runs' times, losses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(11, 7))
    ab = result["ab_epoch_s"]
    eq = [i for i in range(len(ab)) if i % 2 == 1]
    bal = [i for i in range(len(ab)) if i % 2 == 0]
    ax[0, 0].plot(eq, [ab[i] for i in eq], "o-", label="equal shares (odd epochs)")
    ax[0, 0].plot(bal, [ab[i] for i in bal], "o-", label="balanced (even epochs)")
    ideal = result["ab_ideal_s"]
    ax[0, 0].plot(list(ideal), list(ideal.values()), "--", label="ideal N/Σ busy rates")
    ax[0, 0].set(title="interleaved A/B run: epoch seconds", xlabel="epoch", ylim=(0, None))
    ax[0, 0].legend(fontsize=8)
    shares = np.array(result["runs_shares"])
    for r in range(shares.shape[1]):
        ax[0, 1].plot(shares[:, r], "o-", label=f"rank {r}")
    for target in (factor / (1 + factor), 1 / (1 + factor)):
        ax[0, 1].axhline(target, ls=":", c="grey", lw=1)
    ax[0, 1].set(
        title=f"balanced run: data share per rank (rank 1 {factor}x slower)",
        xlabel="epoch",
        ylim=(0, 1),
    )
    ax[0, 1].legend(fontsize=8)
    runs = result["runs_epoch_s"]
    for name, label in (
        ("unbal", "unbalanced"),
        ("bal", "balanced"),
        ("noise", "unbalanced, seed 1"),
    ):
        ax[1, 0].plot(runs[name], "o-", label=label)
    ax[1, 0].set(
        title="consecutive full runs: epoch seconds (load drifts)", xlabel="epoch", ylim=(0, None)
    )
    ax[1, 0].legend(fontsize=8)
    ax[1, 1].plot(result["loss_unbalanced"], "o-", label="unbalanced")
    ax[1, 1].plot(result["loss_balanced"], "o-", label="balanced")
    ax[1, 1].plot(result["loss_unbalanced_seed1"], ":", label="unbalanced, seed 1")
    ax[1, 1].set(title="train loss per epoch", xlabel="epoch")
    ax[1, 1].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main() -> int:
    """Parse options, run, print ratios."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--ab-epochs", type=int, default=14, help="epochs of the A/B run (even)")
    p.add_argument("--epochs", type=int, default=5, help="epochs of each full run")
    p.add_argument("--n-train", type=int, default=256 * 16)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seq-len", type=int, default=48)
    p.add_argument("--vocab", type=int, default=2000)
    p.add_argument("--preset", default="seed")
    p.add_argument("--factor", type=float, default=1.8)
    p.add_argument("--smoothing", type=float, default=0.5)
    p.add_argument("--steady-from", type=int, default=2)
    p.add_argument(
        "--emulate-device-ms",
        type=float,
        default=None,
        metavar="MS",
        help="emulated accelerator: every rank also sleeps MS per sample after "
        "backward (its work then does not compete for the host's cores)",
    )
    p.add_argument("--plot", type=Path, default=None, help="write the figure here (PNG)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args()
    t0 = time.perf_counter()
    efficiency = host_parallel_efficiency(args)
    with tempfile.TemporaryDirectory(prefix="bench_balancer_") as tmp:
        root = Path(tmp)
        data = write_uniform_dataset(root / "data", args.n_train, 512, args.seq_len, args.vocab)
        ab = train(
            data, root / "ab", args, epochs=args.ab_epochs, balance=True, seed=0, alternate=True
        )["events"]
        runs = {
            name: train(data, root / name, args, epochs=args.epochs, balance=balance, seed=seed)
            for name, balance, seed in (("unbal", False, 0), ("bal", True, 0), ("noise", False, 1))
        }
    result = analyse(ab, runs["unbal"], runs["bal"], runs["noise"], args.steady_from)
    result["config"] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    result["wall_s"] = time.perf_counter() - t0
    result["host_parallel_efficiency"] = efficiency
    if args.plot:
        plot(result, args.plot, args.factor)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    ab_s = result["ab_epoch_s"]
    print(
        f"2 ranks x 1 thread, rank 1 straggling {args.factor}x, N={args.n_train}, "
        f"B={args.batch}, seq {args.seq_len}, vocab {args.vocab}, model {args.preset}, "
        f"emulated device {args.emulate_device_ms or 0} ms/sample"
    )
    print(
        f"host: 2 concurrent model processes run at {efficiency:.2f} x 2 x one alone "
        "(below ~0.9 real CPU compute cannot show the balancer's gain)"
    )
    print("A/B epoch s (even = balanced, odd = equal):", " ".join(f"{s:.2f}" for s in ab_s))
    print("A/B busy s per rank, balanced epochs:", result["ab_busy_s"])
    print(
        f"A/B final shares {result['ab_final_shares']} batch sizes {result['ab_final_batch_sizes']}"
    )
    print(f"balanced / ideal N/Σrates = {result['balanced_over_ideal']:.3f}  (target <= 1.05)")
    print(
        f"balanced / unbalanced     = {result['balanced_over_unbalanced']:.3f}  "
        "(target <= 0.76, ideal 0.714)"
    )
    print(
        f"consecutive runs: balanced / unbalanced = "
        f"{result['runs_balanced_over_unbalanced']:.3f} (load-drift sensitive)"
    )
    print(
        f"loss |balanced - unbalanced| = {result['loss_diff_balanced_vs_unbalanced']:.4f}, "
        f"|seed 0 - seed 1| = {result['loss_diff_seed_noise']:.4f} (mean over epochs)"
    )
    print(f"advice: {result['advice']}")
    print(f"({result['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Recovery: the same small run uninterrupted and with 1 and 3 injected node losses.

A local profile (2 ranks, `recovery: {on_node_loss: replace}`, a mid-epoch checkpoint every
CHECKPOINT_EVERY steps) runs through `execute_run`:

* twice uninterrupted (seeds 0 and 1: the seed-to-seed noise of the final accuracy),
* with 1 and with 3 node losses (seed 0): rank 1's process is SIGKILLed at evenly spread
  global steps; the runner stops the survivor, restarts the node and resumes from the latest
  checkpoint.

It prints, measured in this one run: the train stage's wall time of each run, the overhead per
recovery (extra wall seconds / losses) next to the target (one checkpoint interval + 30 s), the
recovery events' own downtime and redone seconds, the $ overhead at the profile's price, and the
final accuracy of each run against the seed-to-seed spread.

    .venv/bin/python benchmarks/bench_recovery.py            # ~6-10 minutes on 2 busy cores
    .venv/bin/python benchmarks/bench_recovery.py --json
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from remote.profile import load_profile
from remote.runner import execute_run
from tests.procs import rank_pid

CHECKPOINT_EVERY = 8

PROFILE = """\
name: bench-recovery
provider: local
instance_type: g5.xlarge
data:
  synthetic: {{size: 12MB, seed: 1}}
preprocess: {{vocab_size: 2000, seq_len: 48}}
train:
  model: {{embedding_dim: 48, hidden: 32}}
  nproc: 2
  epochs: {epochs}
  batch_size: 64
  lr: 0.04
  warmup_steps: 5
  pos_weight: auto
  log_every: 2
  checkpoint_every_min: 0
  checkpoint_every_steps: {every}
  threads: 1
  seed: {seed}
recovery: {{on_node_loss: replace, max_restarts: 5}}
"""


async def one_run(work: Path, *, seed: int, losses: int, epochs: int) -> dict[str, Any]:
    path = work / f"bench-{seed}-{losses}.yaml"
    path.write_text(PROFILE.format(epochs=epochs, every=CHECKPOINT_EVERY, seed=seed))
    profile = load_profile(path)
    events: list[dict[str, Any]] = []
    state: dict[str, Any] = {"kills": [], "total": None, "run": None}

    def on_event(event: dict[str, Any]) -> None:
        events.append(event)
        if event["type"] == "run_start":
            state["run"] = event["run"]
        if event["type"] == "train_start" and state["total"] is None:
            steps = -(-int(event["n_train"]) // int(event["global_batch"]))
            total = steps * epochs
            state["total"] = total
            # losses spread over the run, each a few steps after a checkpoint would be
            state["at"] = [int(total * (k + 1) / (losses + 1)) for k in range(losses)]
        due = event["type"] == "step" and len(state["kills"]) < losses
        if due and event["global_step"] >= state["at"][len(state["kills"])]:
            pid = rank_pid(1, state["run"])
            if pid is not None:
                state["kills"].append(event["global_step"])
                os.kill(pid, signal.SIGKILL)

    outcome = await execute_run(profile, runs_dir=work / "runs", on_event=on_event)
    train_start = next(
        e["t"] for e in events if e["type"] == "stage_start" and e.get("stage") == "train"
    )
    train_end = next(
        e["t"]
        for e in events
        if e["type"] == "stage_end" and e.get("stage") == "train" and "rank" not in e
    )
    checkpoints = [e["t"] for e in events if e["type"] == "checkpoint" and e.get("step")]
    gaps = [b - a for a, b in itertools.pairwise(checkpoints)]
    recs = [e for e in events if e["type"] == "recovery"]
    return {
        "seed": seed,
        "losses": losses,
        "status": outcome.status,
        "recoveries": outcome.summary.get("recoveries"),
        "train_wall_s": round(train_end - train_start, 1),
        "checkpoint_interval_s": round(min(gaps), 2) if gaps else None,
        "accuracy": outcome.summary.get("accuracy"),
        "majority_rate": _majority(outcome.summary),
        "usd": outcome.summary.get("usd"),
        "usd_lost": outcome.summary.get("usd_lost"),
        "downtime_s": [r["downtime_s"] for r in recs],
        "redone_s": [r["redone_s"] for r in recs],
        "redone_steps": [r["redone_steps"] for r in recs],
        "killed_at_steps": state["kills"],
    }


def _majority(summary: dict[str, Any]) -> float | None:
    """Accuracy of always predicting the more frequent test label (the floor to beat)."""
    confusion = (summary.get("train") or {}).get("confusion")
    if not confusion:
        return None
    (tn, fp), (fn, tp) = confusion
    total = tn + fp + fn + tp
    return max(tn + fp, fn + tp) / total if total else None


async def bench(work: Path, epochs: int) -> dict[str, Any]:
    base = await one_run(work, seed=0, losses=0, epochs=epochs)
    other = await one_run(work, seed=1, losses=0, epochs=epochs)
    one = await one_run(work, seed=0, losses=1, epochs=epochs)
    three = await one_run(work, seed=0, losses=3, epochs=epochs)
    runs = [base, other, one, three]
    interval = base["checkpoint_interval_s"] or 0.0
    for run in (one, three):
        n = max(1, run["recoveries"] or 0)
        run["overhead_per_recovery_s"] = round((run["train_wall_s"] - base["train_wall_s"]) / n, 1)
        run["usd_overhead"] = round((run["usd"] or 0) - (base["usd"] or 0), 6)
    return {
        "runs": runs,
        "target_per_recovery_s": round(interval + 30, 1),
        "seed_noise_accuracy": round(abs((base["accuracy"] or 0) - (other["accuracy"] or 0)), 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--workdir", type=Path, help="keep runs and cache here (default: temp)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["SENTITOP_CACHE_DIR"] = str(work / "cache")
    result = asyncio.run(bench(work, args.epochs))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{'seed':>4} {'losses':>6} {'status':>7} {'train s':>8} {'+s/rec':>7} "
          f"{'$ extra':>9} {'$ lost':>8} {'accuracy':>8}  down s / redone s")  # fmt: skip
    for r in result["runs"]:
        extra = r.get("overhead_per_recovery_s", "")
        usd = r.get("usd_overhead", "")
        per = ", ".join(
            f"{d:.1f}/{w:.1f}" for d, w in zip(r["downtime_s"], r["redone_s"], strict=True)
        )
        print(f"{r['seed']:>4} {r['losses']:>6} {r['status']:>7} {r['train_wall_s']:>8} "
              f"{extra!s:>7} {usd!s:>9} {r['usd_lost'] or 0:>8.5f} {r['accuracy'] or 0:>8.4f}  "
              f"{per}")  # fmt: skip
    print(
        f"target per recovery: <= checkpoint interval + 30 s = {result['target_per_recovery_s']} s"
    )
    print(f"seed-to-seed accuracy difference (uninterrupted): {result['seed_noise_accuracy']}")
    floor = max((r["majority_rate"] or 0) for r in result["runs"])
    print(f"majority-class rate of the test set: {floor:.4f}")
    if any((r["accuracy"] or 0) <= floor for r in result["runs"]):
        print("WARNING: a run did not beat the majority class; the accuracy comparison is void")
    return 0


if __name__ == "__main__":
    sys.exit(main())

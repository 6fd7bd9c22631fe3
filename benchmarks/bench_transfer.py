"""Planner transfer calibration: this host's seed-model rate next to its bandwidth and FLOP/s.

The planner scales a measured samples/s from one device to another by a device characteristic
(remote/review/transfer.py). The old study measured one device (the M60); this host is a second
one. One run measures, on ONE core of this host, in the same process:

1. the STREAM-style copy bandwidth (numpy, 64 MiB arrays, best of 5): bytes read + written / s;
2. fp32 matrix-multiply FLOP/s (torch, 1024², 1 thread, best of 5);
3. samples/s of the old study's workload: the `seed` model (emb 100, 2-layer LSTM hidden 32),
   100 tokens, batch 512 (profiles/aws-seed-g3.yaml), forward + backward + clipping + Adam.

It prints the CSV row for remote/review/data/device_rates.csv and, for the M60 row already
there, the M60 / host ratio predicted by each rule (memory bandwidth, fp32 FLOP/s) vs measured.

    .venv/bin/python benchmarks/bench_transfer.py [--steps 12] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import date
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from engine.config import ModelConfig
from engine.sentiment.model import build_model, resolve_spec


def copy_bandwidth_gbs(mib: int = 64, repeat: int = 5) -> float:
    """GB/s of a[:] = b (read + write counted), best of ``repeat``."""
    a = np.ones(mib * 1024 * 1024 // 8)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - start)
    return 2 * a.nbytes / best / 1e9


def matmul_gflops(n: int = 1024, repeat: int = 5) -> float:
    """fp32 GFLOP/s of an n×n matmul on one thread, best of ``repeat``."""
    x, y = torch.randn(n, n), torch.randn(n, n)
    torch.mm(x, y)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        torch.mm(x, y)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def model_rate(
    preset: str, steps: int, batch: int = 512, seq: int = 100, vocab: int = 10_000
) -> float:
    """Training samples/s of a preset on one thread, full-length rows (after 2 warm-up steps)."""
    torch.manual_seed(0)
    model = build_model(resolve_spec(ModelConfig(preset=preset), vocab))  # type: ignore[arg-type]
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    tokens = torch.randint(1, vocab, (batch, seq))
    lengths = torch.full((batch,), seq, dtype=torch.int64)
    labels = torch.randint(0, 2, (batch,)).float()
    start = 0.0
    for step in range(steps + 2):
        if step == 2:
            start = time.perf_counter()
        loss = loss_fn(model(tokens, lengths), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return steps * batch / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rounds = []
    for _ in range(args.repeat):  # interleaved: each round's figures share the machine's load
        bw1, fl1 = copy_bandwidth_gbs(), matmul_gflops()
        seed = model_rate("seed", args.steps)
        dflt = model_rate("default", max(4, args.steps // 3))
        bw2, fl2 = copy_bandwidth_gbs(), matmul_gflops()
        rounds.append((seed, dflt, max(bw1, bw2), max(fl1, fl2)))
    rounds.sort(key=lambda r: r[0] / r[2])  # the median round by rate per GB/s
    rate, default, bw, fl = rounds[len(rounds) // 2]
    from remote.review.hardware import device_rates, gpu_table

    m60 = next((r for r in device_rates() if r.device == "M60"), None)
    spec = gpu_table()["M60"]
    result: dict[str, object] = {
        "host": platform.processor() or platform.machine(),
        "seed_samples_per_s_1core": round(rate, 1),
        "default_samples_per_s_1core": round(default, 1),
        "default_over_seed_measured": round(default / rate, 4),
        "copy_gb_s_1core": round(bw, 2),
        "fp32_gflops_1core": round(fl, 1),
        "rounds_seed_per_gbs": [round(r[0] / r[2], 1) for r in rounds],
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "csv_rows": [
            f"host-1core,{preset},100,512,{r:.1f},{bw:.2f},{fl / 1000:.4f},"
            f"{date.today().isoformat()},benchmarks/bench_transfer.py"
            for preset, r in (("seed", rate), ("default", default))
        ],
    }
    if m60 is not None:
        actual = m60.samples_per_s / rate
        result["m60_over_host_measured"] = round(actual, 2)
        result["m60_over_host_by_bandwidth"] = round(spec.mem_bw_gbs / bw, 2)
        result["m60_over_host_by_fp32"] = round(spec.fp32_tflops * 1000 / fl, 2)
    lines = "\n".join(f"{k}: {v}" for k, v in result.items())
    print(json.dumps(result, indent=2) if args.json else lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())

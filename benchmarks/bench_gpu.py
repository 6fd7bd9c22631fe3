"""GPU path: samples/s of the seed and default models on one CUDA device, bare loop vs Trainer.

One run on a machine with a CUDA GPU measures, in this order:

1. the device, driver, torch, CUDA and cuDNN versions;
2. the device's own ceilings: device-to-device copy bandwidth (bytes read + written) and the
   throughput of large bf16 and fp32 matrix products (the figures the planner's transfer rule
   scales by, measured instead of read off a datasheet);
3. a bare PyTorch loop (batches already on the GPU; forward under bf16 autocast through the
   cuDNN LSTM, BCE, backward, gradient clipping, Adam) for each model preset and batch size,
   with autocast on and off, and Adam's foreach and fused kernels;
4. sentitop's own Trainer (one rank, device cuda) on a synthetic dataset.h5 of --rows reviews
   (`engine.synth.write_synthetic_dataset`: the preprocessor's layout and a realistic length
   mix), for the same presets and batches: epoch samples/s and seconds per phase (data, h2d,
   forward, backward, allreduce_opt), and its ratio to the bare loop;
5. the loader alone on the node's memory-mapped copy (one core): sequences/s, to compare with
   the GPU's rate (the data path must keep up);
6. a 2-process NCCL all-reduce when the machine has 2 GPUs (on one GPU: skipped, with the reason).

The target of issue 16: the seed-size model at >= 250 k reviews/s on one H100-class GPU.

    python benchmarks/bench_gpu.py [--rows 2000000] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import h5py
import numpy as np
import torch
from torch import nn

from engine.config import ModelConfig, TrainConfig
from engine.events import Emitter
from engine.sentiment.model import build_model, resolve_spec

CELLS = [("packed", True, False), ("padded", True, True), ("padded", False, True)]
"""Bare-loop cells (packing, bf16 autocast, fused Adam): the loop before the GPU path, the GPU
path (what the Trainer does on CUDA, its reference), and the GPU path in fp32."""
VOCAB = 10_000
SEQ_LEN = 100
DEVICE = "cuda"
"""Where models run (a CPU smoke test of this script sets "cpu")."""


class Recorder:
    """An event sink that keeps every event (phases and epochs of a Trainer run)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def write(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def close(self) -> None:
        """Nothing to close."""


def environment() -> dict[str, Any]:
    """Device, driver and library versions."""
    props = torch.cuda.get_device_properties(0)
    try:
        smi = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout.strip()
    except OSError as exc:
        smi = f"nvidia-smi not available: {exc}"
    return {
        "device": torch.cuda.get_device_name(0),
        "nvidia_smi": smi,
        "capability": f"{props.major}.{props.minor}",
        "multiprocessors": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "cpu_count": os.cpu_count(),
    }


def cuda_time(fn: Any, repeat: int) -> float:
    """Median seconds of ``fn()`` over ``repeat`` runs, timed with CUDA events after a warm-up."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return float(np.median(times))


def ceilings() -> dict[str, float]:
    """Copy bandwidth (GB/s, read + write) and bf16 / fp32 matrix-product TFLOP/s."""
    n = 1 << 29  # 512 MiB
    a = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    copy_s = cuda_time(lambda a=a, b=b: b.copy_(a), 10)
    del a, b
    out: dict[str, float] = {"copy_gbs": round(2 * n / copy_s / 1e9, 1)}
    torch.backends.cuda.matmul.allow_tf32 = False
    for name, dtype, size in (("bf16", torch.bfloat16, 8192), ("fp32", torch.float32, 8192)):
        x = torch.randn(size, size, device="cuda", dtype=dtype)
        y = torch.randn(size, size, device="cuda", dtype=dtype)
        seconds = cuda_time(lambda x=x, y=y: x @ y, 10)
        out[f"{name}_tflops"] = round(2 * size**3 / seconds / 1e12, 1)
        del x, y
    torch.cuda.empty_cache()
    return out


def host_batches(data_dir: Path, batch: int, count: int) -> list[tuple[np.ndarray, ...]]:
    """``count`` batches of real rows of the synthetic dataset (tokens, lengths, labels)."""
    with h5py.File(data_dir / "dataset.h5", "r") as fh:
        n = min(batch * count, fh["train/labels"].shape[0])
        tokens = fh["train/tokens"][:n].astype(np.int64)
        lengths = fh["train/lengths"][:n].astype(np.int64)
        labels = fh["train/labels"][:n].astype(np.float32)
    return [
        (tokens[i : i + batch], lengths[i : i + batch], labels[i : i + batch])
        for i in range(0, n - batch + 1, batch)
    ]


def bare_rate(
    preset: str,
    batches: list[tuple[np.ndarray, ...]],
    *,
    packing: str,
    amp: bool,
    fused: bool,
    seconds: float,
) -> float:
    """Samples/s of the bare loop: the Trainer's step without its clocks, events or loader
    (``packing``: packed = pack_padded_sequence, as before; padded = the GPU path)."""
    torch.manual_seed(0)
    model = build_model(resolve_spec(ModelConfig(preset=preset), VOCAB + 2)).to(DEVICE)
    model.packing = packing
    opt = torch.optim.Adam(
        model.parameters(), lr=1e-3, fused=fused, foreach=None if fused else True
    )
    criterion = nn.BCEWithLogitsLoss()
    on_gpu = [
        (torch.from_numpy(t).to(DEVICE), torch.from_numpy(n), torch.from_numpy(y).to(DEVICE))
        for t, n, y in batches
    ]

    def step(i: int) -> None:
        tokens, lengths, labels = on_gpu[i % len(on_gpu)]
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=amp and DEVICE == "cuda"):
            logits = model(tokens, lengths)
        loss = criterion(logits.float(), labels)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for i in range(5):  # cuDNN plans, autocast caches
        step(i)
    torch.cuda.synchronize()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or steps < 10:
        step(steps)
        steps += 1
        if steps % 10 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return steps * len(batches[0][2]) / (time.perf_counter() - start)


def trainer_rate(
    data_dir: Path, run_dir: Path, preset: str, batch: int, rows: int
) -> dict[str, Any]:
    """One epoch of sentitop's Trainer on ``rows`` training rows: samples/s and phase seconds."""
    from engine.sentiment.trainer import Trainer

    cfg = TrainConfig(
        data_dir=str(data_dir),
        run_dir=str(run_dir),
        model=ModelConfig(preset=preset),
        epochs=1,
        batch_size=batch,
        device=DEVICE,  # type: ignore[arg-type]
        max_train_samples=rows,
        eval_max_samples=20_000,
        checkpoint_every_min=0,
        events_file=False,
        log_every=1_000_000,
        warmup_steps=10,
        keep_best=False,
    )
    recorder = Recorder()
    start = time.perf_counter()
    summary = Trainer(cfg, emitter=Emitter(recorder)).fit()
    wall = time.perf_counter() - start
    epoch = next(e for e in recorder.events if e["type"] == "epoch")
    phase = next(e for e in recorder.events if e["type"] == "phase")
    phases = {
        k: round(float(phase[k]), 3)
        for k in ("data", "h2d", "forward", "backward", "allreduce_opt", "eval")
    }
    return {
        "samples_per_s": round(float(epoch["samples_per_s"])),
        "epoch_s": round(float(epoch["seconds"]), 2),
        "steps": int(phase["steps"]),
        "phases_s": phases,
        "wall_s": round(wall, 1),
        "accuracy": summary.get("accuracy"),
    }


def loader_rate(data_dir: Path, cache: Path, batch: int) -> dict[str, float]:
    """Sequences/s of the memory-mapped loader alone (one core), cold and warm page cache."""
    from bench_loader import epoch_rate

    from engine.sentiment.store import ensure_copy, open_split

    torch.set_num_threads(1)
    h5 = data_dir / "dataset.h5"
    ensure_copy(h5, "train", cache)
    store, _ = open_split(h5, "train", cache=cache)
    n = len(store)
    store.evict()
    cold = epoch_rate(store, n, batch)
    warm = epoch_rate(store, n, batch)
    store.close()
    torch.set_num_threads(os.cpu_count() or 1)
    return {
        "batch": batch,
        "rows": n,
        "cold_seq_per_s": round(cold[0]),
        "warm_seq_per_s": round(warm[0]),
    }


def nccl_pair() -> dict[str, Any]:
    """A 2-process NCCL all-reduce (needs 2 GPUs; NCCL refuses two ranks on one device)."""
    if torch.cuda.device_count() < 2:
        return {"skipped": f"{torch.cuda.device_count()} GPU visible; NCCL needs one GPU per rank"}
    code = Path(__file__).resolve().parent / "bench_ddp.py"
    proc = subprocess.run(
        [sys.executable, str(code), "--backend", "nccl"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return {"rc": proc.returncode, "tail": proc.stdout[-2000:] + proc.stderr[-2000:]}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=2_000_000, help="synthetic training rows")
    parser.add_argument("--batches", default="512,2048,8192,32768", help="batch sizes (comma list)")
    parser.add_argument("--presets", default="seed,default")
    parser.add_argument("--seconds", type=float, default=2.0, help="bare loop seconds per cell")
    parser.add_argument(
        "--trainer-rows",
        type=int,
        default=500_000,
        help="rows per Trainer epoch (at least 200 steps' worth)",
    )
    parser.add_argument("--seq-len", type=int, default=SEQ_LEN, help="tokens per review")
    parser.add_argument(
        "--trainer-only", action="store_true", help="only the Trainer rows (no ceilings, bare loop)"
    )
    parser.add_argument("--dir", help="scratch folder (default: a temporary one)")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_gpu: no CUDA device visible", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = False
    batches = [int(b) for b in args.batches.split(",")]
    presets = args.presets.split(",")
    result: dict[str, Any] = {"command": " ".join(sys.argv), "env": environment()}

    def save() -> None:
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))

    print(json.dumps(result["env"]), flush=True)
    if not args.trainer_only:
        result["ceilings"] = ceilings()
        print(json.dumps(result["ceilings"]), flush=True)
    save()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        from engine.synth.dataset import write_synthetic_dataset

        data_dir = Path(tmp) / "data"
        start = time.perf_counter()
        write_synthetic_dataset(data_dir, args.rows, 50_000, seq_len=args.seq_len, vocab_size=VOCAB)
        result["dataset_write_s"] = round(time.perf_counter() - start, 1)
        os.environ["SENTITOP_CACHE_DIR"] = str(Path(tmp) / "cache")
        bare: list[dict[str, Any]] = []
        for preset in presets if not args.trainer_only else []:
            for batch in batches:
                held = host_batches(data_dir, batch, max(16, 262_144 // batch))
                for packing, amp, fused in CELLS:
                    rate = bare_rate(
                        preset, held, packing=packing, amp=amp, fused=fused, seconds=args.seconds
                    )
                    row = {
                        "preset": preset,
                        "batch": batch,
                        "packing": packing,
                        "amp": amp,
                        "fused_adam": fused,
                        "samples_per_s": round(rate),
                    }
                    bare.append(row)
                    print(json.dumps({"bare": row}), flush=True)
        result["bare"] = bare
        save()
        trainer: list[dict[str, Any]] = []
        for preset in presets:
            for batch in batches:
                row = {
                    "preset": preset,
                    "batch": batch,
                    **trainer_rate(
                        data_dir,
                        Path(tmp) / f"run-{preset}-{batch}",
                        preset,
                        batch,
                        min(args.rows, max(batch * 200, args.trainer_rows)),
                    ),
                }
                refs = [
                    b["samples_per_s"]
                    for b in bare
                    if b["preset"] == preset
                    and b["batch"] == batch
                    and (b["packing"], b["amp"], b["fused_adam"]) == CELLS[1]
                ]
                row["vs_bare"] = round(row["samples_per_s"] / refs[0], 3) if refs else None
                trainer.append(row)
                print(json.dumps({"trainer": row}), flush=True)
                save()
        result["trainer"] = trainer
        result["loader"] = [loader_rate(data_dir, Path(tmp) / "lcache", b) for b in (512, 8192)]
        print(json.dumps({"loader": result["loader"]}), flush=True)
    result["nccl"] = nccl_pair()
    save()
    print(
        "\n| preset | batch | bare packed bf16 | bare padded bf16 fused | bare padded fp32 fused "
        "| Trainer | Trainer/bare |"
    )
    print("|---|---|---|---|---|---|---|")
    for t in trainer:
        cells = [b for b in bare if b["preset"] == t["preset"] and b["batch"] == t["batch"]]
        rates = " | ".join(f"{c['samples_per_s']:,}" for c in cells)
        print(
            f"| {t['preset']} | {t['batch']} | {rates} | {t['samples_per_s']:,} | {t['vs_bare']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

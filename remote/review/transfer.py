"""Transfer a measured training rate to another device and workload, with a back-tested band.

The rule, and why (numbers: BENCHMARKS.md "Planner: predictions for GPUs never run on"):

    rate(W, D) = rate(W₀, D₀) · cost(W₀)/cost(W) · bw(D)/bw(D₀)

- **Device: memory bandwidth.** Of the rules the bundled measurements can test (the old
  study's M60 and one core of the development host, same seed workload), bandwidth predicts the
  M60/host ratio within a factor ≈ 1.6, FP32 peak is off by ≈ 12× and "same speed everywhere"
  by ≈ 5×: a small LSTM (hidden 32-64) streams its weights and activations once per time step
  and does too little arithmetic per byte to reach any tensor-core or FP32 peak.
- **Workload**: on a CPU, multiply-accumulates per sample of the LSTM layers (4 gates · H ·
  (input + H) per direction and layer, × sequence length), checked against the measured
  default/seed ratio on one core; on a GPU, sequential passes (layers × directions × sequence
  length): these small LSTMs are launch-bound there, and the default model (3.5× the seed's
  MACs, the same 2 passes) measured the seed's rate on the H100.
- **Batch**: where a device was measured at several batch sizes, its step time is fitted as
  overhead + batch × per-sample time (:func:`step_curve`); a transfer scales the per-sample
  part by bandwidth and keeps the overhead. With one measured batch the batch is not modelled.
- **Band**: the largest back-test error in log space of each step used (device transfer,
  workload transfer, worker-count scaling), added: a prediction that uses a transfer is
  ``[value / f, value · f]`` with ``f = exp(Σ |log error|)``. A 1-epoch run on the target
  replaces every transfer with a measurement.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.sentiment.presets import PRESETS
from remote.review.hardware import DeviceRate, device_rates, gpu_table

BALANCER_EFFICIENCY = 1 / 1.027
"""Rate of a mixed-GPU set with the load balancer over the sum of its GPUs' rates: the balanced
epoch measured 1.027 × the ideal N/Σrates (BENCHMARKS.md, issue 4, real CPU compute, quiet)."""

CALIBRATION_HINT = (
    "run 1 epoch on the target type first (`sentitop sweep PROFILE --nproc 1 --epochs 1`: "
    "one GPU, or one process locally); that run's measured rate replaces this estimate the "
    "next time `sentitop plan` reads the runs folder"
)
"""How to tighten a transferred prediction's band."""


def lstm_macs(model: dict[str, Any]) -> float:
    """Multiply-accumulates per token of the LSTM layers (forward) of a resolved model dict."""
    emb, hidden, layers = model["embedding_dim"], model["hidden"], model["layers"]
    dirs = 2 if model["bidirectional"] else 1
    total = 0.0
    for layer in range(layers):
        inp = emb if layer == 0 else hidden * dirs
        total += dirs * 4 * hidden * (inp + hidden)
    return total


def lstm_passes(model: dict[str, Any]) -> int:
    """Sequential passes over the tokens (layers × directions): what a GPU step of a small LSTM
    costs, since each time step is one launch-bound kernel step whatever the hidden size."""
    return int(model["layers"]) * (2 if model["bidirectional"] else 1)


def resolved_model(model_cfg: Any) -> dict[str, Any]:
    """The preset of an engine ModelConfig with its overrides (as engine.sentiment.model does)."""
    values = dict(PRESETS[model_cfg.preset])
    for name in ("embedding_dim", "hidden", "layers", "bidirectional"):
        override = getattr(model_cfg, name, None)
        if override is not None:
            values[name] = override
    return values


@dataclass(frozen=True, slots=True)
class Workload:
    """What one training sample costs: the model's shape and the sequence length."""

    model: dict[str, Any]
    seq_len: int
    batch: int
    label: str

    @property
    def cost(self) -> float:
        """Relative cost of one sample on a CPU (LSTM MACs per token × tokens)."""
        return lstm_macs(self.model) * self.seq_len

    @property
    def gpu_cost(self) -> float:
        """Relative cost of one sample on a GPU (sequential passes × tokens): on the H100 the
        default model (3.5× the seed's MACs, the same 2 passes) runs at the seed's rate."""
        return float(lstm_passes(self.model) * self.seq_len)

    def cost_on(self, gpu: bool) -> float:
        """:attr:`gpu_cost` on a GPU, else :attr:`cost`."""
        return self.gpu_cost if gpu else self.cost

    @classmethod
    def of_preset(cls, preset: str, seq_len: int, batch: int) -> Workload:
        """A bundled measurement's workload."""
        return cls(dict(PRESETS[preset]), seq_len, batch, f"{preset} model, {seq_len} tokens")


@dataclass(frozen=True, slots=True)
class BackTest:
    """One measured rate predicted from another measurement by the transfer rule."""

    kind: str
    """'device' or 'workload'."""
    source: str
    target: str
    predicted: float
    actual: float
    rule: str = "memory bandwidth"

    @property
    def log_error(self) -> float:
        """|log(predicted / actual)|."""
        return abs(math.log(self.predicted / self.actual))

    @property
    def error(self) -> float:
        """(predicted - actual) / actual."""
        return self.predicted / self.actual - 1


def _workload(r: DeviceRate) -> Workload:
    return Workload.of_preset(r.preset, r.seq_len, r.batch)


def _by_bandwidth(a: DeviceRate, b: DeviceRate) -> float:
    return b.mem_bw_gbs / a.mem_bw_gbs


def _by_fp32(a: DeviceRate, b: DeviceRate) -> float:
    return b.fp32_tflops / a.fp32_tflops


def _same(a: DeviceRate, b: DeviceRate) -> float:
    return 1.0


RULES: dict[str, Callable[[DeviceRate, DeviceRate], float]] = {
    "memory bandwidth": _by_bandwidth,
    "fp32 peak": _by_fp32,
    "same speed": _same,
}
"""Device rules the back-test compares (the planner uses memory bandwidth)."""


def step_curve(rows: list[tuple[int, float]]) -> tuple[float, float] | None:
    """(overhead s/step, s/sample) of ``step = overhead + batch · per_sample`` fitted by least
    squares to (batch, samples/s) measured on one device and workload at >= 2 batch sizes (None
    with fewer). A GPU's step has a fixed part (kernel launches per time step, the optimizer,
    synchronisation) that a larger batch amortises: on the H100 the seed model's step fits
    10 ms + batch × 3.7 µs within 6 % from batch 512 to 32,768 (BENCHMARKS.md "GPU path")."""
    points = sorted({(b, b / r) for b, r in rows})
    if len({b for b, _ in points}) < 2:
        return None
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_t = sum(t for _, t in points) / n
    var = sum((b - mean_b) ** 2 for b, _ in points)
    slope = sum((b - mean_b) * (t - mean_t) for b, t in points) / var
    if slope <= 0:
        return None
    overhead = max(0.0, mean_t - slope * mean_b)
    return overhead, slope


def rate_at(rows: list[tuple[int, float]], batch: int, speedup: float) -> tuple[float, str]:
    """Samples/s at ``batch`` on a device ``speedup`` × faster per sample than the measured one
    (rows: its (batch, samples/s)); the per-step overhead is kept. One measured batch: its rate
    × speedup, whatever the batch (the batch is then not modelled)."""
    curve = step_curve(rows)
    if curve is None:
        return rows[0][1] * speedup, ""
    overhead, per_sample = curve
    note = (
        f"step = {overhead * 1e3:.3g} ms + batch x {per_sample * 1e6:.3g} us fitted to "
        f"{len(rows)} batch sizes, at batch {batch:,}"
    )
    return batch / (overhead + batch * per_sample / speedup), note


def back_tests(rates: tuple[DeviceRate, ...] | None = None) -> list[BackTest]:
    """Every bundled rate predicted from every other device's rates of the same workload (at
    the target's batch, through their step curve when they have one), and from the same
    device's other workload at the same batch."""
    rates = rates if rates is not None else device_rates()
    out: list[BackTest] = []
    for b in rates:
        others = sorted({a.device for a in rates if a.device != b.device})
        for device in others:
            group = [
                a
                for a in rates
                if a.device == device and (a.preset, a.seq_len) == (b.preset, b.seq_len)
            ]
            if not group:
                continue
            rows = [(a.batch, a.samples_per_s) for a in group]
            for rule, ratio in RULES.items():
                pred, _ = rate_at(rows, b.batch, ratio(group[0], b))
                gpus = (device in gpu_table()) + (b.device in gpu_table())
                kind = ("device_cpu", "device", "device_gpu")[gpus]
                out.append(BackTest(kind, device, b.device, pred, b.samples_per_s, rule))
        gpu = b.device in gpu_table()
        for a in rates:
            if a.device == b.device and a.batch == b.batch and a.preset != b.preset:
                if a.seq_len != b.seq_len:
                    continue
                pred = a.samples_per_s * _workload(a).cost_on(gpu) / _workload(b).cost_on(gpu)
                out.append(
                    BackTest(
                        "workload_gpu" if gpu else "workload",
                        f"{a.preset} on {a.device}",
                        f"{b.preset} on {b.device}",
                        pred,
                        b.samples_per_s,
                        "passes per sample" if gpu else "MACs per sample",
                    )
                )
    return out


def band_logs(tests: list[BackTest] | None = None) -> dict[str, float]:
    """Largest |log error| of the planner's rules by kind: 'device_gpu' (GPU to GPU),
    'device_cpu' (CPU host to CPU host), 'device' (a CPU on one side, a GPU on the other),
    'workload' (CPU: MACs), 'workload_gpu' (GPU: passes)."""
    tests = tests if tests is not None else back_tests()
    kinds = ("device", "device_gpu", "device_cpu", "workload", "workload_gpu")
    out = dict.fromkeys(kinds, 0.0)
    for t in tests:
        if t.rule in ("memory bandwidth", "MACs per sample", "passes per sample"):
            out[t.kind] = max(out[t.kind], t.log_error)
    return out


@dataclass(frozen=True, slots=True)
class Anchor:
    """A measured rate to transfer from."""

    device: str
    workload: Workload
    samples_per_s: float
    """Per GPU (or per core for a CPU host)."""
    mem_bw_gbs: float
    where: str


@dataclass(frozen=True, slots=True)
class RateEstimate:
    """Samples/s of one GPU (or one unit) of a device for a workload, with how it was made."""

    samples_per_s: float
    basis: str
    band_log: float
    """Sum of |log error| of the transfer steps used (0 = measured on this device)."""
    estimate: bool
    """True when a transfer was used (the value was not measured on this device)."""


def transfer_rate(workload: Workload, device: str, anchors: list[Anchor]) -> RateEstimate:
    """Rate of ``workload`` on one GPU ``device`` from the best of ``anchors``.

    Preference: the same device, then any GPU, then the same workload, then the same model
    shape, then list order (put the runs store's measurements first). Raises KeyError for a
    GPU missing from the table.
    """
    target = gpu_table()[device]
    bands = band_logs()

    def score(a: Anchor) -> tuple[int, int, int, int]:
        same_wl = (a.workload.model, a.workload.seq_len) == (workload.model, workload.seq_len)
        return (
            0 if a.device == device else 1,
            0 if a.device in gpu_table() else 1,
            0 if same_wl else 1,
            0 if a.workload.model == workload.model else 1,  # else the same shape, other length
        )

    a = min(anchors, key=score)
    group = [
        x
        for x in anchors
        if x.device == a.device
        and x.where == a.where
        and x.workload.model == a.workload.model
        and x.workload.seq_len == a.workload.seq_len
    ]
    gpu = a.device in gpu_table()  # a GPU anchor's workload scales as a GPU's does
    ratio = a.workload.cost_on(gpu) / workload.cost_on(gpu)
    speedup = target.mem_bw_gbs / a.mem_bw_gbs if a.device != device else 1.0
    rows = [(x.workload.batch, x.samples_per_s) for x in group]
    out, curve = rate_at(rows, workload.batch, speedup)
    out *= ratio
    band = 0.0
    measured = ", ".join(f"{r:,.0f} at batch {b:,}" for b, r in sorted(rows))
    steps = [f"measured on {a.device} ({a.where}): samples/s of the {a.workload.label}: {measured}"]
    if curve:
        steps.append(curve)
    if (a.workload.model, a.workload.seq_len) != (workload.model, workload.seq_len):
        band += bands["workload_gpu" if gpu else "workload"]
        rule = "sequential LSTM passes" if gpu else "MACs per sample"
        steps.append(f"scaled by {rule} to the {workload.label} (x{ratio:.3g})")
    if a.device != device:
        band += bands["device_gpu" if gpu else "device"]
        what = "per-sample time" if curve else "rate"
        steps.append(
            f"{what} scaled by memory bandwidth to {device} "
            f"({a.mem_bw_gbs:g} -> {target.mem_bw_gbs:g} GB/s)"
        )
    return RateEstimate(out, "; ".join(steps), band, estimate=band > 0 or a.device != device)


def bundled_anchors() -> list[Anchor]:
    """The bundled measured rates as transfer anchors."""
    return [
        Anchor(r.device, _workload(r), r.samples_per_s, r.mem_bw_gbs, r.source.split(" (")[0])
        for r in device_rates()
    ]

"""Transfer a measured training rate to another device and workload, with a back-tested band.

The rule, and why (numbers: BENCHMARKS.md "Planner: predictions for GPUs never run on"):

    rate(W, D) = rate(W₀, D₀) · cost(W₀)/cost(W) · bw(D)/bw(D₀)

- **Device: memory bandwidth.** Of the rules the bundled measurements can test (the old
  study's M60 and one core of the development host, same seed workload), bandwidth predicts the
  M60/host ratio within a factor ≈ 1.6, FP32 peak is off by ≈ 12× and "same speed everywhere"
  by ≈ 5×: a small LSTM (hidden 32-64) streams its weights and activations once per time step
  and does too little arithmetic per byte to reach any tensor-core or FP32 peak.
- **Workload: multiply-accumulates per sample** of the LSTM layers (4 gates · H · (input + H)
  per direction and layer, × sequence length); checked against the measured default/seed
  ratio on one core. The batch size is not modelled (a larger batch helps a GPU more).
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
        """Relative cost of one sample (LSTM MACs per token × tokens)."""
        return lstm_macs(self.model) * self.seq_len

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


def back_tests(rates: tuple[DeviceRate, ...] | None = None) -> list[BackTest]:
    """Every bundled rate predicted from every other one that differs in one thing."""
    rates = rates if rates is not None else device_rates()
    out: list[BackTest] = []
    for a in rates:
        for b in rates:
            if a is b:
                continue
            same_workload = (a.preset, a.seq_len) == (b.preset, b.seq_len)
            if same_workload and a.device != b.device:
                for rule, ratio in RULES.items():
                    pred = a.samples_per_s * ratio(a, b)
                    out.append(BackTest("device", a.device, b.device, pred, b.samples_per_s, rule))
            elif a.device == b.device and not same_workload:
                pred = a.samples_per_s * _workload(a).cost / _workload(b).cost
                out.append(
                    BackTest(
                        "workload",
                        f"{a.preset} on {a.device}",
                        f"{b.preset} on {b.device}",
                        pred,
                        b.samples_per_s,
                        "MACs per sample",
                    )
                )
    return out


def band_logs(tests: list[BackTest] | None = None) -> dict[str, float]:
    """Largest |log error| of the planner's rules by kind ('device', 'workload')."""
    tests = tests if tests is not None else back_tests()
    out = {"device": 0.0, "workload": 0.0}
    for t in tests:
        if t.rule in ("memory bandwidth", "MACs per sample"):
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

    Preference: the same device, then any GPU, then the same workload, then list order (put
    the runs store's measurements first). Raises KeyError for a GPU missing from the table.
    """
    target = gpu_table()[device]
    bands = band_logs()

    def score(a: Anchor) -> tuple[int, int, int]:
        same_wl = (a.workload.model, a.workload.seq_len) == (workload.model, workload.seq_len)
        return (
            0 if a.device == device else 1,
            0 if a.device in gpu_table() else 1,
            0 if same_wl else 1,
        )

    a = min(anchors, key=score)
    ratio = a.workload.cost / workload.cost
    out = a.samples_per_s * ratio
    band = 0.0
    steps = [
        f"measured on {a.device} ({a.where}): "
        f"{a.samples_per_s:,.0f} samples/s of the {a.workload.label}"
    ]
    if (a.workload.model, a.workload.seq_len) != (workload.model, workload.seq_len):
        band += bands["workload"]
        steps.append(f"scaled by MACs per sample to the {workload.label} (x{ratio:.3g})")
    if a.device != device:
        out *= target.mem_bw_gbs / a.mem_bw_gbs
        band += bands["device"]
        steps.append(
            f"scaled by memory bandwidth to {device} "
            f"({a.mem_bw_gbs:g} -> {target.mem_bw_gbs:g} GB/s)"
        )
    return RateEstimate(out, "; ".join(steps), band, estimate=band > 0 or a.device != device)


def bundled_anchors() -> list[Anchor]:
    """The bundled measured rates as transfer anchors."""
    return [
        Anchor(r.device, _workload(r), r.samples_per_s, r.mem_bw_gbs, r.source.split(" (")[0])
        for r in device_rates()
    ]

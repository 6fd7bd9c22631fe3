"""Which device an embeddings run trains on: ``auto|cpu|cuda`` resolved once, by the launcher."""

from __future__ import annotations

from engine.embeddings.config import EmbedConfig
from engine.errors import ConfigError


def cuda_devices() -> int:
    """How many CUDA devices this process sees (0 without CUDA or without torch's CUDA build)."""
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def resolve_device(cfg: EmbedConfig, nproc: int, visible: int | None = None) -> str:
    """``cpu`` or ``cuda`` for ``nproc`` local ranks of ``cfg`` (``visible`` CUDA devices,
    counted when None): auto picks cuda when sync mode can give every rank a GPU of its own;
    cuda that cannot be had is a ConfigError (NCCL needs one GPU per rank)."""
    if cfg.device == "cpu" or (cfg.device == "auto" and cfg.mode == "async"):
        return "cpu"
    gpus = cuda_devices() if visible is None else visible
    if cfg.device == "auto":
        return "cuda" if 1 <= nproc <= gpus else "cpu"
    if gpus == 0:
        raise ConfigError(
            "embed.device = cuda but no CUDA device is visible",
            hint="use --device cpu (or auto), or check the driver and CUDA_VISIBLE_DEVICES",
        )
    if nproc > gpus:
        raise ConfigError(
            f"embed.device = cuda with --nproc {nproc} needs {nproc} GPUs; {gpus} visible",
            hint=f"use --nproc {gpus} (one rank per GPU) or --device cpu",
        )
    return "cuda"

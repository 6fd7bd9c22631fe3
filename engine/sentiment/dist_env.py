"""Where a training process sits: rank, world and device from torchrun's environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from engine.errors import TrainError


@dataclass(frozen=True, slots=True)
class DistEnv:
    """Where this process sits: from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK...)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    local_world: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def backend(self) -> str:
        """Process-group backend: NCCL between CUDA devices, gloo on CPU."""
        return "nccl" if self.device.type == "cuda" else "gloo"

    @classmethod
    def from_environ(cls, device: str = "auto") -> DistEnv:
        """Read the torchrun variables; CUDA device ``LOCAL_RANK`` when available and wanted."""
        env = os.environ
        local_rank = int(env.get("LOCAL_RANK", "0"))
        use_cuda = uses_cuda(device)
        if use_cuda and not torch.cuda.is_available():
            raise TrainError(
                "device = cuda but no CUDA device is visible",
                hint="use --device cpu or check the driver",
            )
        dev = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
        return cls(
            rank=int(env.get("RANK", "0")),
            world=int(env.get("WORLD_SIZE", "1")),
            local_rank=local_rank,
            local_world=int(env.get("LOCAL_WORLD_SIZE", "1")),
            device=dev,
        )


def uses_cuda(device: str) -> bool:
    """Whether ranks given this ``device`` setting (auto, cpu, cuda) train on CUDA here."""
    return device == "cuda" or (device == "auto" and torch.cuda.is_available())

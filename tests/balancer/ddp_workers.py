"""Worker functions spawned by the balancer's multi-process tests (importable by spawn)."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from engine.balance.balancer import SplitPlan, split
from engine.rank_main import exit_rank

N, B, SHARES = 23, 10, (0.3, 0.7)
"""23 samples, global batch 10: steps of 10, 10 and 3 samples; local batches 3 and 7."""


class TinyLSTM(nn.Module):
    """Embedding → LSTM → one logit (the shape of the real classifier, tiny)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 6, batch_first=True)
        self.head = nn.Linear(6, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.emb(x))  # (b, T, 6)
        return self.head(out[:, -1]).squeeze(-1)  # (b,)


def make_data() -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed tokens (N, 5) and 0/1 labels (N,)."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(0, 20, (N, 5), generator=gen)
    y = torch.randint(0, 2, (N,), generator=gen).float()
    return x, y


def make_model() -> TinyLSTM:
    """The same initial weights in every process."""
    torch.manual_seed(0)
    return TinyLSTM()


def plan() -> SplitPlan:
    """The split both the workers and the reference follow."""
    return split(0, N, B, SHARES)


def flat_grad(model: nn.Module) -> torch.Tensor:
    """All parameter gradients as one vector."""
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


def train_steps(rank: int, world: int, *, scaled: bool) -> torch.Tensor:
    """Run the plan's steps under DDP with SGD; return each step's all-reduced gradient."""
    model = make_model()
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.5)
    x, y = make_data()
    p = plan()
    grads = []
    for step in range(p.steps):
        lo, hi = p.local_range(rank, step)
        opt.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(ddp(x[lo:hi]), y[lo:hi])
        if scaled:
            loss = loss * p.loss_scale(rank, step)
        loss.backward()
        grads.append(flat_grad(model).clone())
        opt.step()
    return torch.stack(grads)


def gradient_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """Spawned entry: scaled and plain-averaged runs; saves rank{r}.pt."""
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        result = {
            "scaled": train_steps(rank, world, scaled=True),
            "plain": train_steps(rank, world, scaled=False),
        }
        torch.save(result, Path(out_dir) / f"rank{rank}.pt")
        # both ranks done before the teardown: one destroying the group while its peer still
        # talks to it aborted that peer ("terminate called without an active exception")
        dist.barrier()
    finally:
        dist.destroy_process_group()
    # as every rank does: skip the interpreter's teardown, where gloo's threads still aborted
    # a rank about one run in ten after the barrier (SIGABRT); the results are saved by now
    exit_rank(0)


def reference_steps() -> torch.Tensor:
    """Single process: each step's full-batch mean gradient over the same samples, SGD."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    x, y = make_data()
    p = plan()
    grads = []
    for step in range(p.steps):
        idx = torch.cat([torch.arange(*p.local_range(r, step)) for r in range(p.world)])
        opt.zero_grad()
        nn.functional.binary_cross_entropy_with_logits(model(x[idx]), y[idx]).backward()
        grads.append(flat_grad(model).clone())
        opt.step()
    return torch.stack(grads)
